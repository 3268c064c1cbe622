//! Retention: compacting folds old reports and measurements into per-day
//! sums that match what was deleted, keeps recent ones, and leaves the
//! winners and the running tallies as they were.

mod common;

use std::collections::BTreeMap;

use common::*;
use sqlx::Row;
use webtune_kernel_db::{Db, NewMeasurement, NewReport, VotePolicy, random_id, ranked_weight};

const POLICY: VotePolicy = VotePolicy { quorum: 2, min_margin: 0.03, vote_margin: 0.25 };
const DAY_MS: i64 = 86_400_000;

/// A kernel's day: (measurements, passed, first places, weight, min, sum, max median).
type Sums = (i64, i64, i64, i64, f64, f64, f64);

async fn compaction(url: String) {
    let db = Db::connect(&url).await.unwrap();
    let shas = [kernel(&db, 1).await, kernel(&db, 2).await, kernel(&db, 3).await];
    let k = keys("v/a/d1", "v/a", "v");
    let mut sent = Vec::new();
    for i in 0..8usize {
        let s = session(&db, &k).await;
        let order = if i % 3 == 0 { [2, 0, 1] } else { [0, 1, 2] };
        let report = NewReport {
            session_id: s,
            kind: kind(),
            space_checksum: "sp".into(),
            entries: order
                .iter()
                .enumerate()
                .map(|(r, &j)| NewMeasurement {
                    kernel_sha256: shas[j].clone(),
                    ticket: random_id().unwrap(),
                    median_us: 40.0 + (i * 7 + r * 3) as f64,
                    runs: 10,
                    output_ok: (i + r) % 7 != 0,
                })
                .collect(),
        };
        let id = db.record_report(&report, &k, &POLICY).await.unwrap().report_id;
        sent.push((id, report));
    }
    let winners_before = db.winners(100).await.unwrap();
    assert!(!winners_before.is_empty());
    // The first five reports are moved ten days back.
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let old_day = (now - 10 * DAY_MS).div_euclid(DAY_MS);
    for (id, _) in &sent[..5] {
        sqlx::query("UPDATE reports SET created_at = $1 WHERE id = $2")
            .bind(old_day * DAY_MS + 1000)
            .bind(id)
            .execute(&pool)
            .await
            .unwrap();
    }
    let cutoff = now - 3 * DAY_MS;
    assert_eq!(db.reports_before(cutoff).await.unwrap(), 5);
    let mut seen = Vec::new();
    let done = db.compact(cutoff, |day, n| seen.push((day, n))).await.unwrap();
    assert_eq!((done.days, done.reports, done.measurements), (1, 5, 15));
    assert_eq!(seen, [(old_day, 5)]);
    assert_eq!(db.stats().await.unwrap().reports, 3, "recent reports stay");

    // The sums are those of the deleted rows, kernel by kernel.
    let mut want: BTreeMap<String, Sums> = BTreeMap::new();
    for (_, r) in &sent[..5] {
        for (i, e) in r.entries.iter().enumerate() {
            let w = want.entry(e.kernel_sha256.clone()).or_insert((0, 0, 0, 0, f64::INFINITY, 0.0, f64::NEG_INFINITY));
            w.0 += 1;
            w.1 += e.output_ok as i64;
            w.2 += (i == 0) as i64;
            w.3 += ranked_weight(i + 1, e.output_ok);
            w.4 = w.4.min(e.median_us);
            w.5 += e.median_us;
            w.6 = w.6.max(e.median_us);
        }
    }
    let rows = sqlx::query(
        "SELECT kernel_sha256, measurements, passed, first_places, weight, min_median_us, sum_median_us, max_median_us, day, device_key \
         FROM measurement_days ORDER BY kernel_sha256",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let got: BTreeMap<String, Sums> = rows
        .iter()
        .map(|r| {
            assert_eq!((r.get::<i64, _>(8), r.get::<String, _>(9)), (old_day, k.device_key.clone()));
            let v = (r.get(1), r.get(2), r.get(3), r.get(4), r.get(5), r.get(6), r.get(7));
            (r.get::<String, _>(0), v)
        })
        .collect();
    assert_eq!(got, want);
    let r = sqlx::query("SELECT reports, sessions FROM report_days").fetch_one(&pool).await.unwrap();
    assert_eq!((r.get::<i64, _>(0), r.get::<i64, _>(1)), (5, 5));

    // Winners and tallies are untouched, and the crowd goes on.
    assert_eq!(db.winners(100).await.unwrap(), winners_before);
    let again = db.compact(cutoff, |_, _| {}).await.unwrap();
    assert_eq!(again.days, 0, "nothing left to fold");
    let s = session(&db, &k).await;
    let more = NewReport {
        session_id: s,
        kind: kind(),
        space_checksum: "sp".into(),
        entries: vec![NewMeasurement {
            kernel_sha256: shas[0].clone(),
            ticket: random_id().unwrap(),
            median_us: 40.0,
            runs: 10,
            output_ok: true,
        }],
    };
    let rec = db.record_report(&more, &k, &POLICY).await.unwrap();
    assert_eq!(rec.winners.len(), 3);
}

#[tokio::test]
async fn sqlite_compaction_keeps_every_sum() {
    compaction(sqlite_url()).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn postgres_compaction_keeps_every_sum() {
    compaction(postgres_url().await).await;
}
