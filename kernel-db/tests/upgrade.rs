//! Upgrading a database an older webtune filled (issue 39): migration 0009
//! stores a session's ballot once instead of once per level. A database at
//! schema 0008 gets a history written as the code of that schema wrote it
//! (reports, measurements, the per-level ballots and tallies of
//! migration 0005's recount, a report still uncounted, and one session's
//! reports folded away by retention, so that only its ballots remember
//! it); after the upgrade the ballots, seen per level (`ballot_levels`),
//! and the tallies are exactly what they were, the winners untouched, the
//! backlog is counted, and a new report replaces its session's ballot at
//! all three keys.

mod common;

use common::*;
use sqlx::Row;
use webtune_kernel_db::{Db, NewMeasurement, NewReport, VotePolicy, random_id};

const POLICY: VotePolicy = VotePolicy { quorum: 2, min_margin: 0.03, vote_margin: 0.25 };

/// Ballots per level and tallies, row by row, from `ballots` (0008) or
/// `ballot_levels` (0009).
async fn rows(pool: &sqlx::AnyPool, ballots: &str) -> Vec<String> {
    let mut out = Vec::new();
    let q = format!(
        "SELECT op, shape, target, space_checksum, level, level_key, session_id, kernel_sha256, report_id, weight, median_us, created_at \
         FROM {ballots} ORDER BY op, shape, target, space_checksum, level, level_key, session_id, kernel_sha256"
    );
    for r in sqlx::query(sqlx::AssertSqlSafe(q)).fetch_all(pool).await.unwrap() {
        let text: Vec<String> = (0..9).map(|i| r.get::<String, _>(i)).collect();
        out.push(format!("ballot {} {} {} {}", text.join(" "), r.get::<i64, _>(9), r.get::<f64, _>(10), r.get::<i64, _>(11)));
    }
    let tallies = "SELECT op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, sessions FROM tallies \
                   WHERE sessions > 0 ORDER BY op, shape, target, space_checksum, level, level_key, kernel_sha256";
    for r in sqlx::query(tallies).fetch_all(pool).await.unwrap() {
        let text: Vec<String> = (0..7).map(|i| r.get::<String, _>(i)).collect();
        out.push(format!("tally {} {} {}", text.join(" "), r.get::<i64, _>(7), r.get::<i64, _>(8)));
    }
    out
}

async fn count(pool: &sqlx::AnyPool, q: &'static str) -> i64 {
    sqlx::query_scalar(q).fetch_one(pool).await.unwrap()
}

async fn upgrade(url: String) {
    let old = webtune_kernel_db::migrate_to(&url, 8).await.unwrap();
    let k = kind();
    let shas: Vec<String> = (0..3).map(|i| format!("{i:064x}")).collect();
    // Sessions on three devices of two architectures of one vendor.
    let devices =
        [("v/a1/d1", "v/a1"), ("v/a1/d1", "v/a1"), ("v/a1/d2", "v/a1"), ("v/a2/d3", "v/a2"), ("v/a1/d1", "v/a1"), ("v/a2/d3", "v/a2")];
    let mut statements = vec![
        "INSERT INTO devices (fingerprint_sha256, fingerprint, device_key, arch_key, vendor_key, rho, first_seen, last_seen) \
         VALUES ('fp', '{}', 'v/a1/d1', 'v/a1', 'v', '101', 0, 0)"
            .to_string(),
    ];
    for sha in &shas {
        statements.push(format!(
            "INSERT INTO kernels (sha256, op, shape, target, schedule, meta, bytes, created_at) \
             VALUES ('{sha}', '{}', '{}', '{}', '{{}}', '{{}}', '', 0)",
            k.op, k.shape, k.target
        ));
    }
    // Each session reports twice (the later report is its ballot), session
    // 4 in two spaces, some entries failing their check (weight 0).
    let mut t = 1_000i64;
    for (s, (device, arch)) in devices.iter().enumerate() {
        statements.push(format!(
            "INSERT INTO sessions (id, fingerprint_sha256, device_key, arch_key, vendor_key, rho, created_at) \
             VALUES ('s{s}', 'fp', '{device}', '{arch}', 'v', '101', 0)"
        ));
        for rep in 0..2usize {
            let space = if s == 4 && rep == 1 { "sp2" } else { "sp" };
            t += 10;
            statements.push(format!(
                "INSERT INTO reports (id, session_id, op, shape, target, space_checksum, device_key, arch_key, vendor_key, rho, created_at) \
                 VALUES ('r{s}-{rep}', 's{s}', '{}', '{}', '{}', '{space}', '{device}', '{arch}', 'v', '101', {t})",
                k.op, k.shape, k.target
            ));
            for rank in 0..(1 + (s + rep) % 3) {
                let sha = &shas[(s + rep + rank) % 3];
                let ok = (s + rank) % 4 != 3;
                let weight = if ok { 5 - rank as i64 } else { 0 };
                statements.push(format!(
                    "INSERT INTO measurements (report_id, rank, kernel_sha256, ticket, median_us, runs, output_ok, weight) \
                     VALUES ('r{s}-{rep}', {}, '{sha}', 't{s}-{rep}-{rank}', {}, 10, {}, {weight})",
                    rank + 1,
                    50 + 7 * s + rank,
                    i64::from(ok)
                ));
            }
        }
    }
    for s in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe(s)).execute(&old).await.unwrap();
    }
    // The ballots and tallies as 0005's recount built them (and the
    // elector of 0008 kept them).
    let migration = include_str!("../../migrations/0005_running_tallies.sql");
    let backfill = &migration[migration.find("-- The ballots of the history so far").expect("the backfill's heading")..];
    sqlx::raw_sql(sqlx::AssertSqlSafe(backfill)).execute(&old).await.unwrap();
    // Session 5's reports are folded away (its ballots stay), and a
    // report of session 0 waits uncounted.
    sqlx::raw_sql(
        "DELETE FROM measurements WHERE report_id IN ('r5-0', 'r5-1'); DELETE FROM reports WHERE id IN ('r5-0', 'r5-1'); \
         INSERT INTO winners (op, shape, target, level, level_key, space_checksum, kernel_sha256, votes, total_votes, reports, \
           best_median_us, updated_at) VALUES ('matmul', '64,64,64', 'wasm', 'arch', 'v/a1', 'sp', \
           '0000000000000000000000000000000000000000000000000000000000000001', 9, 20, 4, 57.0, 5)",
    )
    .execute(&old)
    .await
    .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO reports (id, session_id, op, shape, target, space_checksum, device_key, arch_key, vendor_key, rho, created_at) \
         VALUES ('r0-2', 's0', 'matmul', '64,64,64', 'wasm', 'sp', 'v/a1/d1', 'v/a1', 'v', '101', 9000); \
         INSERT INTO measurements (report_id, rank, kernel_sha256, ticket, median_us, runs, output_ok, weight) \
         VALUES ('r0-2', 1, '{}', 't0-2-0', 40, 10, 1, 5); \
         INSERT INTO uncounted (report_id, created_at) VALUES ('r0-2', 9000)",
        shas[2]
    )))
    .execute(&old)
    .await
    .unwrap();
    let before = rows(&old, "ballots").await;
    assert!(before.iter().any(|r| r.contains(" s5 ")), "session 5's ballots before: {before:?}");
    assert!(before.iter().filter(|r| r.starts_with("ballot")).count() > 30, "{before:?}");
    old.close().await;

    let db = Db::connect(&url).await.unwrap();
    // The elector may count the backlog at once: hold it while looking.
    let held = db.hold_elections().await;
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    assert_eq!(rows(&pool, "ballot_levels").await, before, "the ballots at every level and the tallies, as they were");
    let s5 = before.iter().filter(|r| r.starts_with("ballot") && r.contains(" s5 ")).count() as i64;
    assert_eq!(3 * count(&pool, "SELECT COUNT(*) FROM ballots WHERE session_id = 's5'").await, s5, "a folded session's ballot, once");
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM winners").await, 1, "winners untouched");
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM uncounted").await, 1, "the backlog waits");
    drop(held);
    db.flush_elections().await.unwrap();
    let s0: Vec<String> = sqlx::query_scalar("SELECT report_id FROM ballots WHERE session_id = 's0'").fetch_all(&pool).await.unwrap();
    assert_eq!(s0, ["r0-2"], "the uncounted report became session 0's ballot");
    // A new report replaces its session's ballot at its three keys.
    let report = NewReport {
        session_id: "s2".into(),
        kind: k.clone(),
        space_checksum: "sp".into(),
        entries: [1, 0]
            .iter()
            .map(|&i| NewMeasurement {
                kernel_sha256: shas[i].clone(),
                ticket: random_id().unwrap(),
                median_us: 30.0 + i as f64,
                runs: 10,
                output_ok: true,
            })
            .collect(),
    };
    let rec = db.record_report(&report, &keys("v/a1/d2", "v/a1", "v"), &POLICY).await.unwrap();
    let s2 = rows(&pool, "ballot_levels").await.into_iter().filter(|r| r.contains(" s2 ")).collect::<Vec<_>>();
    assert_eq!(s2.len(), 6, "{s2:?}");
    assert!(s2.iter().all(|r| r.contains(&rec.report_id)), "{s2:?}");
    // Every tally is its ballots' sum.
    // (Tallies are per space: the key's space goes with it.)
    let sums = "SELECT b.space_checksum || ' ' || b.level, b.level_key, b.kernel_sha256, CAST(SUM(b.weight) AS BIGINT), COUNT(*) \
                FROM ballot_levels b GROUP BY b.space_checksum, b.level, b.level_key, b.kernel_sha256 ORDER BY 1, 2, 3";
    let tallies = "SELECT space_checksum || ' ' || level, level_key, kernel_sha256, votes, sessions FROM tallies WHERE sessions > 0 \
                   ORDER BY 1, 2, 3";
    let text = |rs: Vec<sqlx::any::AnyRow>| -> Vec<String> {
        rs.iter()
            .map(|r| {
                format!(
                    "{} {} {} {} {}",
                    r.get::<String, _>(0),
                    r.get::<String, _>(1),
                    r.get::<String, _>(2),
                    r.get::<i64, _>(3),
                    r.get::<i64, _>(4)
                )
            })
            .collect()
    };
    let want = text(sqlx::query(sums).fetch_all(&pool).await.unwrap());
    assert!(want.len() > 10, "{want:?}");
    assert_eq!(text(sqlx::query(tallies).fetch_all(&pool).await.unwrap()), want);
}

#[tokio::test]
async fn sqlite_upgrade_keeps_every_ballot() {
    upgrade(sqlite_url()).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn postgres_upgrade_keeps_every_ballot() {
    upgrade(postgres_url().await).await;
}
