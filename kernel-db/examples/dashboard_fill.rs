//! Fills a SQLite kernel database with a synthetic crowd, written row by
//! row in SQL (not through HTTP), for the dashboard's timing in
//! BENCHMARKS.md and the dashboard's screenshot test:
//!
//! ```text
//! cargo run --release -p webtune-kernel-db --example dashboard_fill -- PATH [REPORTS] [KEYS] [HOURS]
//! ```
//!
//! `REPORTS` reports (default 1,000,000) spread evenly over the last `HOURS`
//! hours (default 1440, 60 days), from 50 sessions on each of `KEYS` device
//! keys (default 200; a tenth as many fingerprints per key as sessions),
//! five vendors, two kernels kinds per target. Each report has three
//! entries (weights 5, 4, 3); its fastest time falls as the crowd
//! converges. Every 97th report's third entry failed the client's check
//! (weight 0, a `client-check` flag); every 211th report also brings a
//! server-check flag. One device-level winner per (kind, device key), and
//! one per arch and vendor key. The ballots and tallies are not built: the
//! database is for reading, not for more reports. Deterministic for given
//! arguments, except that times end at the moment it runs.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use sqlx::{AnyPool, AssertSqlSafe, Executor};
use webtune_kernel_db::Db;

const VENDORS: [(&str, &str, [&str; 3]); 5] = [
    ("gpu-nvidia", "wgsl", ["ada", "hopper", "ampere"]),
    ("gpu-amd", "wgsl", ["rdna3", "rdna2", "cdna3"]),
    ("gpu-intel", "wgsl", ["xe-lpg", "xe-hpg", "gen12"]),
    ("cpu-x86", "wasm", ["avx2", "avx512", "sse4"]),
    ("cpu-arm", "wasm", ["apple", "neoverse", "cortex"]),
];
const SHAPES: [&str; 2] = ["384,768,768", "256,256,256"];
const KERNELS_PER_KIND: i64 = 40;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().ok_or("usage: dashboard_fill PATH [REPORTS] [KEYS] [HOURS]")?;
    let n: i64 = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(1_000_000);
    let keys: i64 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(200);
    let hours: i64 = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(1440);
    let url = format!("sqlite://{path}");
    let t = Instant::now();
    drop(Db::connect(&url).await?); // created and migrated
    let pool = AnyPool::connect(&url).await?;
    let mut tx = pool.begin().await?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64;
    let span = hours * 3_600_000;
    let sessions = keys * 50;
    let fingerprints = keys * 5;

    tx.execute("CREATE TEMP TABLE gen_keys (k BIGINT PRIMARY KEY, device_key TEXT, arch_key TEXT, vendor_key TEXT, target TEXT)").await?;
    for k in 0..keys {
        let (vendor, target, archs) = VENDORS[(k % 5) as usize];
        let arch = format!("{vendor}-{}", archs[((k / 5) % 3) as usize]);
        let device = format!("{arch}-d{:03}.{}", k, ["1011", "0111", "1111"][(k % 3) as usize]);
        sqlx::query("INSERT INTO gen_keys VALUES ($1, $2, $3, $4, $5)")
            .bind(k)
            .bind(device)
            .bind(arch)
            .bind(vendor)
            .bind(target)
            .execute(&mut *tx)
            .await?;
    }
    // Two kinds per target (j = 0, 1), forty kernels each.
    tx.execute("CREATE TEMP TABLE gen_kinds (target TEXT, j BIGINT, shape TEXT, base_us DOUBLE PRECISION)").await?;
    for (t_i, target) in ["wasm", "wgsl"].iter().enumerate() {
        for (j, shape) in SHAPES.iter().enumerate() {
            let base = if *target == "wasm" { 40_000.0 / (j as f64 * 8.0 + 1.0) } else { 900.0 / (j as f64 * 4.0 + 1.0) };
            sqlx::query("INSERT INTO gen_kinds VALUES ($1, $2, $3, $4)")
                .bind(*target)
                .bind(j as i64)
                .bind(*shape)
                .bind(base)
                .execute(&mut *tx)
                .await?;
            for x in 0..KERNELS_PER_KIND {
                let sha = format!("{:064x}", (t_i as i64) * 10_000 + (j as i64) * 1000 + x);
                sqlx::query(
                    "INSERT INTO kernels (sha256, op, shape, target, schedule, meta, bytes, created_at) \
                     VALUES ($1, 'matmul', $2, $3, '{}', '{}', $4, $5) ON CONFLICT DO NOTHING",
                )
                .bind(sha)
                .bind(*shape)
                .bind(*target)
                .bind(vec![0u8])
                .bind(now - span)
                .execute(&mut *tx)
                .await?;
            }
        }
    }
    tx.execute("CREATE TEMP TABLE gen_n (i BIGINT PRIMARY KEY)").await?;
    sqlx::query("INSERT INTO gen_n WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < $1) SELECT i FROM c")
        .bind(n.max(sessions))
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO devices (fingerprint_sha256, fingerprint, device_key, arch_key, vendor_key, rho, first_seen, last_seen) \
         SELECT printf('%064x', i), '{\"generated\":' || i || '}', g.device_key, g.arch_key, g.vendor_key, substr(g.device_key, -4), \
         $2 - $3, $2 - (i * 7919) % $3 FROM gen_n JOIN gen_keys g ON g.k = i % $4 WHERE i < $1",
    )
    .bind(fingerprints)
    .bind(now)
    .bind(span)
    .bind(keys)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO sessions (id, fingerprint_sha256, device_key, arch_key, vendor_key, rho, created_at) \
         SELECT printf('%032x', i), printf('%064x', i % $2), g.device_key, g.arch_key, g.vendor_key, substr(g.device_key, -4), $3 - $4 \
         FROM gen_n JOIN gen_keys g ON g.k = i % $5 WHERE i < $1",
    )
    .bind(sessions)
    .bind(fingerprints)
    .bind(now)
    .bind(span)
    .bind(keys)
    .execute(&mut *tx)
    .await?;
    // Report i: session (i * 7919) mod S, so key (that mod K); kind j
    // alternates in runs of 7; times even over the span.
    tx.execute(
        "CREATE TEMP TABLE gen_r AS SELECT n.i AS i, (n.i * 7919) % s.sessions AS s, ((n.i / 7) % 2) AS j FROM gen_n n, \
         (SELECT COUNT(*) AS sessions FROM sessions) s",
    )
    .await?;
    sqlx::query("DELETE FROM gen_r WHERE i >= $1").bind(n).execute(&mut *tx).await?;
    sqlx::query(
        "INSERT INTO reports (id, session_id, op, shape, target, space_checksum, device_key, arch_key, vendor_key, rho, created_at) \
         SELECT printf('%032x', r.i), printf('%032x', r.s), 'matmul', kd.shape, g.target, 'generated', g.device_key, g.arch_key, \
         g.vendor_key, substr(g.device_key, -4), $1 - $2 + (r.i * $2) / $3 \
         FROM gen_r r JOIN gen_keys g ON g.k = r.s % $4 JOIN gen_kinds kd ON kd.target = g.target AND kd.j = r.j",
    )
    .bind(now)
    .bind(span)
    .bind(n)
    .bind(keys)
    .execute(&mut *tx)
    .await?;
    // Ranks 1..3; the fastest time falls from 3x the kind's base to ~1x as
    // the crowd converges, with up to 10% noise; each key has its own speed.
    for rank in 1..=3i64 {
        sqlx::query(
            "INSERT INTO measurements (report_id, rank, kernel_sha256, ticket, median_us, runs, output_ok, weight) \
             SELECT printf('%032x', r.i), $1, \
             printf('%064x', (CASE g.target WHEN 'wasm' THEN 0 ELSE 10000 END) + r.j * 1000 + (r.i * 31 + $1 * 17) % $2), \
             printf('gen-%x-%d', r.i, $1), \
             kd.base_us * (1.0 + (r.s % $3) / (5.0 * $3)) * (1.0 + 2.0 / (1.0 + 30.0 * r.i / $4)) \
               * (1.0 + ((r.i * 37) % 100) / 1000.0) * (1.0 + ($1 - 1) * 0.12), \
             10, CASE WHEN $1 = 3 AND r.i % 97 = 0 THEN 0 ELSE 1 END, CASE WHEN $1 = 3 AND r.i % 97 = 0 THEN 0 ELSE 6 - $1 END \
             FROM gen_r r JOIN gen_keys g ON g.k = r.s % $3 JOIN gen_kinds kd ON kd.target = g.target AND kd.j = r.j",
        )
        .bind(rank)
        .bind(KERNELS_PER_KIND)
        .bind(keys)
        .bind(n as f64)
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query(
        "INSERT INTO flags (kernel_sha256, op, shape, target, device_key, arch_key, vendor_key, session_id, reason, created_at, ticket) \
         SELECT m.kernel_sha256, r.op, r.shape, r.target, r.device_key, r.arch_key, r.vendor_key, r.session_id, \
         CASE WHEN m.rank = 3 THEN 'client-check' ELSE 'server-check: samples differ from the reference' END, r.created_at, \
         CASE WHEN m.rank = 3 THEN NULL ELSE 'gen-flag-' || r.id END \
         FROM gen_r g JOIN reports r ON r.id = printf('%032x', g.i) JOIN measurements m ON m.report_id = r.id \
         WHERE (m.rank = 3 AND g.i % 97 = 0) OR (m.rank = 2 AND g.i % 211 = 0)",
    )
    .execute(&mut *tx)
    .await?;
    // Winners: per (kind, key) the kernel ranked first most often is not
    // recounted here; the key's best kernel stands in, with the key's count.
    for (level, column) in [("device", "device_key"), ("arch", "arch_key"), ("vendor", "vendor_key")] {
        sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO winners (op, shape, target, level, level_key, space_checksum, kernel_sha256, votes, total_votes, reports, best_median_us, updated_at) \
             SELECT r.op, r.shape, r.target, '{level}', r.{column}, 'generated', \
             printf('%064x', (CASE r.target WHEN 'wasm' THEN 0 ELSE 10000 END) + (CASE r.shape WHEN '{s1}' THEN 1000 ELSE 0 END)), \
             COUNT(*) * 3, COUNT(*) * 12, COUNT(*), MIN(m.median_us), MAX(r.created_at) \
             FROM reports r JOIN measurements m ON m.report_id = r.id AND m.rank = 1 GROUP BY r.op, r.shape, r.target, r.{column}",
            s1 = SHAPES[1]
        )))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM reports").fetch_one(&pool).await?;
    println!("{path}: {count} reports, {keys} device keys, over {hours} h, in {:.1} s", t.elapsed().as_secs_f64());
    Ok(())
}
