//! The kernel database on both engines: SQLite in a temporary file, and
//! PostgreSQL at `WEBTUNE_TEST_PG_URL` (started by `scripts/test.sh`). Each
//! PostgreSQL test creates its own database, so tests run in parallel.
//! The PostgreSQL tests are `#[ignore = "needs PostgreSQL"]`, so that a
//! plain `cargo test` lists them as ignored instead of passing them unrun;
//! `scripts/test.sh` starts a cluster and runs them with `--include-ignored`,
//! and without `WEBTUNE_TEST_PG_URL` they fail.

use webtune_kernel_db::{Db, Level, NewMeasurement, NewReport, VotePolicy, random_id};

mod common;

use common::*;

fn report(session: &str, space: &str, ranked: &[&str]) -> NewReport {
    NewReport {
        session_id: session.into(),
        kind: kind(),
        space_checksum: space.into(),
        entries: ranked
            .iter()
            .enumerate()
            .map(|(i, sha)| NewMeasurement {
                kernel_sha256: sha.to_string(),
                ticket: random_id().unwrap(),
                median_us: 100.0 + i as f64,
                runs: 10,
                output_ok: true,
            })
            .collect(),
    }
}

const POLICY: VotePolicy = VotePolicy { quorum: 2, min_margin: 0.03, vote_margin: 0.25 };

async fn votes_and_fallback(db: Db) {
    let (a, b, c) = (kernel(&db, 1).await, kernel(&db, 2).await, kernel(&db, 3).await);
    let k1 = keys("v/a/d1/101", "v/a", "v");
    assert!(db.best(&kind(), &k1, None).await.unwrap().is_none());

    // One session is below the quorum: no winner yet.
    let s1 = session(&db, &k1).await;
    let s2 = session(&db, &k1).await;
    let rec = db.record_report(&report(&s1, "sp", &[&a, &b, &c]), &k1, &POLICY).await.unwrap();
    assert!(rec.winners.is_empty());
    assert!(db.best(&kind(), &k1, Some("sp")).await.unwrap().is_none());
    // A second session agrees: a wins at every level, 5 + 5 votes of 24.
    let rec = db.record_report(&report(&s2, "sp", &[&a, &b, &c]), &k1, &POLICY).await.unwrap();
    assert_eq!(rec.winners.len(), 3);
    assert!(
        rec.winners.iter().all(|w| w.kernel_sha256 == a && w.votes == 10 && w.total_votes == 24 && w.reports == 2),
        "{:?}",
        rec.winners
    );
    let best = db.best(&kind(), &k1, Some("sp")).await.unwrap().unwrap();
    assert_eq!((best.winner.level, best.winner.kernel_sha256.as_str()), (Level::Device, a.as_str()));
    assert_eq!(best.meta_json, "{\"n\":1}");

    // A session's weight is capped: s1 reporting b first five more times
    // still counts as one vote (its latest), so a keeps the lead.
    for _ in 0..5 {
        let mut r = report(&s1, "sp", &[&b, &a]);
        r.entries[0].median_us = 50.0;
        db.record_report(&r, &k1, &POLICY).await.unwrap();
    }
    let best = db.best(&kind(), &k1, Some("sp")).await.unwrap().unwrap();
    assert_eq!(best.winner.kernel_sha256, a, "one session cannot outvote two");

    // Two more sessions find b clearly faster: b leads (5+5+5+4 = 19 against
    // 4+5+4+4 = 17) and is faster beyond noise in every session that timed both.
    for _ in 0..2 {
        let s = session(&db, &k1).await;
        let mut r = report(&s, "sp", &[&b, &a]);
        r.entries[0].median_us = 50.0;
        db.record_report(&r, &k1, &POLICY).await.unwrap();
    }
    let best = db.best(&kind(), &k1, Some("sp")).await.unwrap().unwrap();
    assert_eq!((best.winner.level, best.winner.kernel_sha256.clone()), (Level::Device, b.clone()));

    // A new device of the same architecture gets it at the arch level, of
    // the vendor at the vendor level, of another vendor nothing.
    let best = db.best(&kind(), &keys("v/a/d2/101", "v/a", "v"), Some("sp")).await.unwrap().unwrap();
    assert_eq!(best.winner.level, Level::Arch);
    let best = db.best(&kind(), &keys("v/z/d3/101", "v/z", "v"), Some("sp")).await.unwrap().unwrap();
    assert_eq!(best.winner.level, Level::Vendor);
    assert!(db.best(&kind(), &keys("w/z/d4/1", "w/z", "w"), Some("sp")).await.unwrap().is_none());

    // A changed space makes the winners stale.
    assert!(db.best(&kind(), &k1, Some("other")).await.unwrap().is_none());

    // Failed output checks weigh nothing and flag the kernel; once a quorum
    // of sessions flags b, it stops winning and a takes over again.
    let mut bad = report(&s1, "sp", &[&c]);
    bad.entries[0].output_ok = false;
    db.record_report(&bad, &k1, &POLICY).await.unwrap();
    assert_eq!(db.flags_for(&c, &kind(), &k1.device_key).await.unwrap(), 1);
    db.flag(&b, &kind(), &k1, &s1, "flag-ticket-1", "server-check", &POLICY).await.unwrap();
    assert_eq!(db.best(&kind(), &k1, Some("sp")).await.unwrap().unwrap().winner.kernel_sha256, b, "one flag is not enough");
    db.flag(&b, &kind(), &k1, &s2, "flag-ticket-2", "server-check", &POLICY).await.unwrap();
    // A ticket flags once, and one already spent on a measurement never flags.
    assert!(matches!(
        db.flag(&b, &kind(), &k1, &s2, "flag-ticket-2", "server-check", &POLICY).await,
        Err(webtune_kernel_db::DbError::TicketReused(_))
    ));
    assert!(matches!(
        db.flag(&c, &kind(), &k1, &s1, &bad.entries[0].ticket, "server-check", &POLICY).await,
        Err(webtune_kernel_db::DbError::TicketReused(_))
    ));
    assert!(db.ticket_used("flag-ticket-2").await.unwrap());
    assert!(!db.ticket_used("never-issued").await.unwrap());
    assert_eq!(
        db.best(&kind(), &k1, Some("sp")).await.unwrap().unwrap().winner.kernel_sha256,
        b,
        "two flags against four verified votes do not exclude b"
    );
    for _ in 0..2 {
        let s = session(&db, &k1).await;
        db.flag(&b, &kind(), &k1, &s, &format!("flag-ticket-{s}"), "server-check", &POLICY).await.unwrap();
    }
    assert_eq!(db.flags_for(&b, &kind(), &k1.device_key).await.unwrap(), 4);
    assert_eq!(db.best(&kind(), &k1, Some("sp")).await.unwrap().unwrap().winner.kernel_sha256, a, "as many flags as votes exclude b");

    // Tickets are single use; unknown kernels and kernels of another kind are refused.
    let replay = NewReport { entries: vec![bad.entries[0].clone()], ..bad.clone() };
    assert!(matches!(db.record_report(&replay, &k1, &POLICY).await, Err(webtune_kernel_db::DbError::TicketReused(_))));
    let unknown = report(&s1, "sp", &[&"0".repeat(64)]);
    assert!(matches!(db.record_report(&unknown, &k1, &POLICY).await, Err(webtune_kernel_db::DbError::UnknownKernel(_))));
    let mut other = report(&s1, "sp", &[&a]);
    other.kind.shape = "1,1,1".into();
    assert!(matches!(db.record_report(&other, &k1, &POLICY).await, Err(webtune_kernel_db::DbError::WrongKind { .. })));

    // Nothing acknowledged was lost, and the dashboard queries work.
    let stats = db.stats().await.unwrap();
    assert_eq!((stats.reports, stats.measurements, stats.kernels, stats.sessions, stats.devices), (10, 21, 3, 6, 1));
    assert_eq!(db.recent_reports(20).await.unwrap().len(), 10);
    assert_eq!(db.winners(10).await.unwrap().len(), 3);
    assert_eq!(db.devices(10).await.unwrap()[0].keys, k1);
    assert_eq!(db.kernel_bytes(&a).await.unwrap().unwrap(), (vec![0, 97, 115, 109, 1], "wasm".to_string()));
    assert_eq!(db.setting_or_init("s", "x").await.unwrap(), "x");
    assert_eq!(db.setting_or_init("s", "y").await.unwrap(), "x");
}

#[tokio::test]
async fn sqlite_votes_and_fallback() {
    votes_and_fallback(sqlite().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn postgres_votes_and_fallback() {
    votes_and_fallback(postgres().await).await;
}

/// `Db::open_session`: the device and the session in one transaction. The
/// session reads back with the device's keys, the device row holds the
/// fingerprint, and a second session of the same fingerprint is a new one
/// whose open moves the device's `last_seen` (never its `first_seen`).
async fn sessions_open_in_one_transaction(db: Db) {
    let k = keys("dev-a", "arch-a", "vendor-a");
    let fp = r#"{"device":"dev-a"}"#;
    let (sha, s1) = db.open_session(fp, &k).await.unwrap();
    assert_eq!(sha, webtune_kernel_db::sha256_hex(fp.as_bytes()));
    let back = db.session(&s1.id).await.unwrap().expect("the session reads back");
    assert_eq!((back.keys.clone(), back.created_at), (k.clone(), s1.created_at));
    let d1 = db.device("dev-a").await.unwrap().expect("the device was recorded");
    assert_eq!((d1.fingerprint.as_str(), &d1.keys), (fp, &k));
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let (sha2, s2) = db.open_session(fp, &k).await.unwrap();
    assert_eq!(sha2, sha);
    assert_ne!(s2.id, s1.id);
    let d2 = db.device("dev-a").await.unwrap().unwrap();
    assert_eq!(d2.first_seen, d1.first_seen);
    assert!(d2.last_seen > d1.last_seen, "{} then {}", d1.last_seen, d2.last_seen);
    assert!(db.session(&s2.id).await.unwrap().is_some());
    if db.backend() == webtune_kernel_db::Backend::Sqlite {
        // The sessions went through the writers' connection, which a report finds synchronous (FULL).
        assert_eq!(db.report_synchronous().await.unwrap(), 2);
    }
}

#[tokio::test]
async fn sqlite_sessions_open_in_one_transaction() {
    sessions_open_in_one_transaction(sqlite().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn postgres_sessions_open_in_one_transaction() {
    sessions_open_in_one_transaction(postgres().await).await;
}

/// Issue 40: before the quorum, `Db::provisional` answers the kernel a
/// strict majority of a key's sessions ranked (none flagged), along the
/// device → arch → vendor walk, in the asker's space and thread limit; an
/// election at the quorum stores the winner as before.
async fn provisional_winners(db: Db) {
    let policy = VotePolicy { quorum: 3, ..POLICY };
    let (a, b, c, d) = (kernel(&db, 1).await, kernel(&db, 2).await, kernel(&db, 3).await, kernel(&db, 4).await);
    let k1 = keys("v/a/d1/101", "v/a", "v");
    let k2 = keys("v/a/d2/101", "v/a", "v");
    assert_eq!(db.provisional(&kind(), &k1, "sp", None).await.unwrap(), None, "nobody voted");

    // One session: its top kernel, at its device key, for its twins.
    let s1 = session(&db, &k1).await;
    db.record_report(&report(&s1, "sp", &[&a, &b]), &k1, &policy).await.unwrap();
    assert!(db.best(&kind(), &k1, Some("sp")).await.unwrap().is_none(), "no quorum, no winner");
    let p = db.provisional(&kind(), &k1, "sp", None).await.unwrap().unwrap();
    assert_eq!((p.level, p.kernel_sha256.as_str(), p.sessions, p.voters, p.votes), (Level::Device, a.as_str(), 1, 1, 5));
    assert_eq!(p.meta_json, "{\"n\":1}");
    // Another device of the architecture: at the arch key. Another space: nothing.
    let p = db.provisional(&kind(), &k2, "sp", None).await.unwrap().unwrap();
    assert_eq!((p.level, p.level_key.as_str(), p.kernel_sha256.as_str()), (Level::Arch, "v/a", a.as_str()));
    assert_eq!(db.provisional(&kind(), &k1, "other", None).await.unwrap(), None);

    // A second session disagrees entirely: no majority anywhere.
    let s2 = session(&db, &k1).await;
    db.record_report(&report(&s2, "sp", &[&c, &d]), &k1, &policy).await.unwrap();
    assert_eq!(db.provisional(&kind(), &k1, "sp", None).await.unwrap(), None);
    // A third ranks c too: c has two of three sessions.
    let s3 = session(&db, &k1).await;
    db.record_report(&report(&s3, "sp", &[&c, &a]), &k1, &policy).await.unwrap();
    // (a also has two sessions, and c two: c has more votes, 5 + 5 against 5 + 4.)
    let p = db.provisional(&kind(), &k1, "sp", None).await.unwrap().unwrap();
    assert_eq!((p.kernel_sha256.as_str(), p.sessions, p.voters), (c.as_str(), 2, 3));
    // A flag at the key takes c out of the provisional seat.
    db.flag(&c, &kind(), &k1, &s2, "provisional-flag", "server-check", &policy).await.unwrap();
    let p = db.provisional(&kind(), &k1, "sp", None).await.unwrap().unwrap();
    assert_eq!(p.kernel_sha256, a);

    // The quorum elects: a fourth session ranks a, which has three sessions.
    let s4 = session(&db, &k1).await;
    let rec = db.record_report(&report(&s4, "sp", &[&a]), &k1, &policy).await.unwrap();
    assert!(rec.winners.iter().any(|w| w.level == Level::Device && w.kernel_sha256 == a), "{:?}", rec.winners);
    assert_eq!(db.best(&kind(), &k1, Some("sp")).await.unwrap().unwrap().winner.kernel_sha256, a);

    // Threads: a kernel above the asker's limit is never provisional.
    let k3 = keys("w/b/d/101", "w/b", "w");
    let threaded = {
        let bytes = vec![0, 97, 115, 109, 99];
        let sha = webtune_kernel_db::sha256_hex(&bytes);
        db.put_kernel(&webtune_kernel_db::NewKernel {
            sha256: sha.clone(),
            kind: kind(),
            schedule_json: "{}".into(),
            meta_json: "{\"threads\":4}".into(),
            bytes,
        })
        .await
        .unwrap();
        sha
    };
    let s5 = session(&db, &k3).await;
    db.record_report(&report(&s5, "sp", &[&threaded, &b]), &k3, &policy).await.unwrap();
    assert_eq!(db.provisional(&kind(), &k3, "sp", Some(4)).await.unwrap().unwrap().kernel_sha256, threaded);
    assert_eq!(db.provisional(&kind(), &k3, "sp", Some(1)).await.unwrap().unwrap().kernel_sha256, b);
}

#[tokio::test]
async fn sqlite_provisional_winners() {
    provisional_winners(sqlite().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn postgres_provisional_winners() {
    provisional_winners(postgres().await).await;
}

#[tokio::test]
async fn sqlite_file_is_created_in_wal_mode_and_reopens() {
    let dir = std::env::temp_dir().join(format!("webtune-kdb-{}", random_id().unwrap()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("w.sqlite");
    let url = format!("sqlite://{}", path.display());
    {
        let db = Db::connect(&url).await.unwrap();
        kernel(&db, 9).await;
        assert_eq!(db.journal_mode().await.unwrap(), "wal");
        db.close().await;
    }
    assert!(path.exists());
    let db = Db::connect(&url).await.unwrap(); // migrations already applied: no error
    assert_eq!(db.stats().await.unwrap().kernels, 1);
}

/// SQLite's log is copied into the database file beside the writer (the
/// checkpointer task), not only once it reaches the commits' backstop of
/// 20,000 pages: while the handle stays open, the file itself grows with
/// the reports.
#[tokio::test]
async fn sqlite_log_is_checkpointed_while_open() {
    let dir = std::env::temp_dir().join(format!("webtune-kdb-{}", random_id().unwrap()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.sqlite");
    let db = Db::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    let shas = [kernel(&db, 1).await, kernel(&db, 2).await];
    let s = session(&db, &keys("v/a/d", "v/a", "v")).await;
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let before = std::fs::metadata(&path).unwrap().len();
    for _ in 0..40 {
        db.store_report(&report(&s, "sp", &[&shas[0], &shas[1]]), &keys("v/a/d", "v/a", "v"), &POLICY).await.unwrap();
    }
    db.flush_elections().await.unwrap();
    let t = std::time::Instant::now();
    while std::fs::metadata(&path).unwrap().len() <= before && t.elapsed() < std::time::Duration::from_secs(5) {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let wal = std::fs::metadata(dir.join("c.sqlite-wal")).map(|m| m.len()).unwrap_or(0);
    assert!(std::fs::metadata(&path).unwrap().len() > before, "the file stayed at {before} bytes, the log at {wal}");
}

/// Model-level latency reports: stored under the session's keys, read back
/// per level and per (model, batch, seq_len), never mixed across them.
async fn model_latency(db: Db) {
    use webtune_kernel_db::NewModelLatency;
    let k1 = keys("gpu-a/x/one/-", "gpu-a/x", "gpu-a");
    let k2 = keys("gpu-a/x/two/-", "gpu-a/x", "gpu-a");
    let (s1, s2) = (session(&db, &k1).await, session(&db, &k2).await);
    let row = |s: &str, target: &str, seq_len: i64, ms: f64| NewModelLatency {
        session_id: s.into(),
        model: "m".into(),
        weights_sha256: "w".into(),
        target: target.into(),
        batch: 1,
        seq_len,
        median_ms: ms,
        runs: 5,
    };
    db.record_model_latency(&row(&s1, "wasm", 128, 60.5), &k1).await.unwrap();
    db.record_model_latency(&row(&s1, "webgpu", 128, 20.0), &k1).await.unwrap();
    db.record_model_latency(&row(&s2, "wasm", 128, 70.0), &k2).await.unwrap();
    db.record_model_latency(&row(&s2, "wasm", 64, 30.0), &k2).await.unwrap();
    let mut at_device = db.model_latencies("m", 1, 128, Level::Device, &k1.device_key).await.unwrap();
    at_device.sort_by(|a, b| a.target.cmp(&b.target));
    assert_eq!(at_device.iter().map(|r| (r.target.as_str(), r.median_ms)).collect::<Vec<_>>(), [("wasm", 60.5), ("webgpu", 20.0)]);
    assert!(at_device.iter().all(|r| r.session_id == s1));
    assert_eq!(db.model_latencies("m", 1, 128, Level::Arch, "gpu-a/x").await.unwrap().len(), 3);
    assert_eq!(db.model_latencies("m", 1, 64, Level::Vendor, "gpu-a").await.unwrap().len(), 1);
    assert!(db.model_latencies("other", 1, 128, Level::Vendor, "gpu-a").await.unwrap().is_empty());
    assert!(db.model_latencies("m", 2, 128, Level::Vendor, "gpu-a").await.unwrap().is_empty());
}

#[tokio::test]
async fn sqlite_model_latency() {
    model_latency(sqlite().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn postgres_model_latency() {
    model_latency(postgres().await).await;
}

/// The foreign keys to `kernels` from `measurements` and from `flags`, on
/// PostgreSQL.
async fn keys_to_kernels(url: &str) -> (i64, i64) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let count = |table: &str| {
        format!(
            "SELECT COUNT(*) FROM pg_constraint WHERE contype = 'f' AND conrelid = '{table}'::regclass AND confrelid = 'kernels'::regclass"
        )
    };
    let m: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(count("measurements"))).fetch_one(&pool).await.unwrap();
    let f: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(count("flags"))).fetch_one(&pool).await.unwrap();
    (m, f)
}

/// Issue 39: on PostgreSQL a report's transaction takes no lock on a kernel's
/// row (a foreign key from `measurements` would take `FOR KEY SHARE` on it in
/// every report naming it), while the writer still refuses unknown kernels
/// and flags keep their key; on SQLite the key stays.
#[tokio::test]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn postgres_measurements_lock_no_kernel_row() {
    let url = postgres_url().await;
    let db = Db::connect(&url).await.unwrap();
    assert_eq!(keys_to_kernels(&url).await, (0, 1), "measurements → kernels dropped, flags → kernels kept");
    let k1 = keys("v/a/d", "v/a", "v");
    let s = session(&db, &k1).await;
    let unknown = report(&s, "sp", &[&"0".repeat(64)]);
    assert!(matches!(db.record_report(&unknown, &k1, &POLICY).await, Err(webtune_kernel_db::DbError::UnknownKernel(_))));
    assert_eq!(db.stats().await.unwrap().measurements, 0, "nothing of the refused report was stored");
}

#[tokio::test]
async fn sqlite_measurements_keep_their_key() {
    let url = sqlite_url();
    let _db = Db::connect(&url).await.unwrap();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let parents: Vec<String> =
        sqlx::query_scalar("SELECT \"table\" FROM pragma_foreign_key_list('measurements')").fetch_all(&pool).await.unwrap();
    assert!(parents.iter().any(|t| t == "kernels"), "measurements → kernels kept on SQLite: {parents:?}");
}
