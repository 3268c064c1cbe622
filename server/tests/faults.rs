//! Faults and limits: a killed server loses no acknowledged report (alone
//! on SQLite, or one of three on PostgreSQL), two
//! servers on one PostgreSQL agree (and a winner elected through one is
//! answered by the other within its cache's lifetime), two on one SQLite
//! file refuse no report, a client that
//! disconnects mid-queue leaves nothing behind, overload is answered
//! with 4xx, not a crash, and a batch of reports costs a session one
//! request of its rate (each report answered on its own; every 429 says
//! when to come back).

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use webtune_compiler::Op;

const OP: &str = "matmul";
const SHAPE: &str = "8,16,8";
const TARGET: &str = "wgsl";

/// One client: session, queue, a report of its first candidate; the report
/// id when the server acknowledged it.
async fn one_report(http: &reqwest::Client, url: &str, i: usize) -> Option<String> {
    let op = Op::parse(OP, SHAPE).unwrap();
    let r = http
        .post(format!("{url}/v1/sessions"))
        .json(&json!({"fingerprint": gpu_fingerprint("nvidia", "hopper", &format!("dev{}", i % 3))}))
        .send()
        .await
        .ok()?;
    let sid = r.json::<serde_json::Value>().await.ok()?["session_id"].as_str()?.to_string();
    let q = try_queue(http, url, &sid, OP, SHAPE, TARGET).await?;
    let body = json!({"op": OP, "shape": op.shape(), "target": TARGET, "entries": [entry(&op, &q[i % q.len()], 50.0 + i as f64)]});
    let r = http.post(format!("{url}/v1/sessions/{sid}/reports")).json(&body).send().await.ok()?;
    if r.status() != 200 {
        return None;
    }
    Some(r.json::<serde_json::Value>().await.ok()?["report_id"].as_str()?.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_acknowledged_report() {
    let db_url = sqlite_url();
    let mut srv = Server::start(&db_url, &["--rate-per-address", "1000000"]);
    let http = client();
    let acked = std::sync::Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for w in 0..8 {
        let (http, url, acked) = (http.clone(), srv.url.clone(), acked.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                if let Some(id) = one_report(&http, &url, w * 1000 + i).await {
                    acked.lock().await.push(id);
                }
            }
        }));
    }
    // Let reports stream in, then kill the server without warning.
    let t = Instant::now();
    while acked.lock().await.len() < 40 && t.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    srv.child.kill().unwrap(); // SIGKILL
    srv.child.wait().unwrap();
    for t in &tasks {
        t.abort();
    }
    let acked: HashSet<String> = acked.lock().await.iter().cloned().collect();
    assert!(acked.len() >= 40, "only {} reports were acknowledged", acked.len());
    // After a restart every acknowledged report is there.
    let db = webtune_kernel_db::Db::connect(&db_url).await.unwrap();
    let stored: HashSet<String> = db.recent_reports(1_000_000).await.unwrap().into_iter().map(|r| r.id).collect();
    let missing: Vec<_> = acked.difference(&stored).collect();
    assert!(missing.is_empty(), "{} acknowledged reports were lost: {missing:?}", missing.len());
    let srv2 = Server::start(&db_url, &[]);
    let metrics = http.get(format!("{}/metrics", srv2.url)).send().await.unwrap().text().await.unwrap();
    let rows = metrics.lines().find(|l| l.starts_with("webtune_db_rows{table=\"reports\"}")).unwrap();
    let n: usize = rows.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(n, stored.len());
}

/// Three servers on one PostgreSQL take reports at once, writing without a
/// global lock (a report locks no key; the electors lock the keys they
/// count at); one is killed with SIGKILL in the middle of the burst. Two
/// answer reports once durable (the killed one among them, so its
/// elector may die mid-pass), one once counted. Every report any of them
/// acknowledged is stored, and once the electors caught up every stored
/// report is counted and the tallies are a recount of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn kill_9_of_one_of_three_servers_on_postgres_loses_no_acknowledged_report() {
    let pg = postgres_url().await;
    let answer = ["durable", "durable", "counted"];
    let mut servers: Vec<Server> =
        answer.iter().map(|a| Server::start(&pg, &["--rate-per-address", "1000000", "--report-answer", a])).collect();
    let http = client();
    let acked = std::sync::Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for w in 0..12 {
        let (http, url, acked) = (http.clone(), servers[w % 3].url.clone(), acked.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                if let Some(id) = one_report(&http, &url, w * 1000 + i).await {
                    acked.lock().await.push(id);
                }
            }
        }));
    }
    let t = Instant::now();
    while acked.lock().await.len() < 60 && t.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    servers[0].child.kill().unwrap(); // SIGKILL, mid-burst
    servers[0].child.wait().unwrap();
    // The other two go on for a while.
    let before = acked.lock().await.len();
    let t = Instant::now();
    while acked.lock().await.len() < before + 30 && t.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for t in &tasks {
        t.abort();
    }
    drop(servers);
    let acked: HashSet<String> = acked.lock().await.iter().cloned().collect();
    assert!(acked.len() >= 90, "only {} reports were acknowledged", acked.len());
    let db = webtune_kernel_db::Db::connect(&pg).await.unwrap();
    let stored: HashSet<String> = db.recent_reports(1_000_000).await.unwrap().into_iter().map(|r| r.id).collect();
    let missing: Vec<_> = acked.difference(&stored).collect();
    assert!(missing.is_empty(), "{} acknowledged reports were lost: {missing:?}", missing.len());
    db.flush_elections().await.unwrap();
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&pg).await.unwrap();
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM uncounted").fetch_one(&pool).await.unwrap();
    assert_eq!(left, 0, "every stored report counted");
    let running = tally_rows(&pool).await;
    assert!(running.len() > 10, "{running:?}");
    sqlx::raw_sql(webtune_kernel_db::RECOUNT_SQL).execute(&pool).await.unwrap();
    assert_eq!(tally_rows(&pool).await, running, "the running tallies are a recount of the stored reports");
}

/// `ballots` and `tallies`, row by row.
async fn tally_rows(pool: &sqlx::AnyPool) -> Vec<String> {
    use sqlx::Row;
    let mut out = Vec::new();
    let ballots = "SELECT level, level_key, session_id, kernel_sha256, report_id, weight FROM ballot_levels \
                   ORDER BY level, level_key, session_id, kernel_sha256";
    for r in sqlx::query(ballots).fetch_all(pool).await.unwrap() {
        let text: Vec<String> = (0..5).map(|i| r.get::<String, _>(i)).collect();
        out.push(format!("ballot {} {}", text.join(" "), r.get::<i64, _>(5)));
    }
    let tallies = "SELECT level, level_key, kernel_sha256, votes, sessions FROM tallies WHERE sessions > 0 \
                   ORDER BY level, level_key, kernel_sha256";
    for r in sqlx::query(tallies).fetch_all(pool).await.unwrap() {
        let text: Vec<String> = (0..3).map(|i| r.get::<String, _>(i)).collect();
        out.push(format!("tally {} {} {}", text.join(" "), r.get::<i64, _>(3), r.get::<i64, _>(4)));
    }
    out
}

/// `--report-answer durable`: a report is answered once durable, before it
/// is counted. The server's elector counts it in its next pass, and the
/// pass that seats a winner forgets the server's cached lookups at once
/// (here the cache would otherwise keep its answer for a minute).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_answered_once_durable_reaches_the_lookups_with_the_next_pass() {
    let srv = Server::start(&sqlite_url(), &["--quorum", "1", "--report-answer", "durable", "--cache-ttl-ms", "60000"]);
    let http = client();
    let op = Op::parse(OP, SHAPE).unwrap();
    let (sid, v) = open_session(&http, &srv.url, &gpu_fingerprint("nvidia", "hopper", "durable")).await;
    let key = v["device_key"].as_str().unwrap().to_string();
    let q = queue(&http, &srv.url, &sid, OP, SHAPE, TARGET).await;
    let before = best(&http, &srv.url, &key, OP, SHAPE, TARGET).await;
    assert_eq!(before["level"], "default", "{before}");
    let pick = q[q.len() - 1]["sha256"].as_str().unwrap().to_string();
    assert_ne!(before["meta"]["sha256"], pick.as_str());
    let (st, body) = report(&http, &srv.url, &sid, &op, TARGET, vec![entry(&op, &q[q.len() - 1], 50.0)]).await;
    assert_eq!(st, 200, "{body}");
    let t = Instant::now();
    loop {
        let b = best(&http, &srv.url, &key, OP, SHAPE, TARGET).await;
        if b["level"] == "device" && b["source"] == "elected" {
            assert_eq!(b["meta"]["sha256"], pick.as_str(), "{b}");
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "the report never reached the lookups: {b}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!("counted and seen {} ms after the answer", t.elapsed().as_millis());
    let metrics = http.get(format!("{}/metrics", srv.url)).send().await.unwrap().text().await.unwrap();
    let counted = metrics.lines().find(|l| l.starts_with("webtune_db_election_reports_total ")).unwrap();
    assert_eq!(counted, "webtune_db_election_reports_total 1", "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn two_servers_on_one_postgres_agree() {
    let pg = postgres_url().await;
    let a = Server::start(&pg, &["--quorum", "2", "--cache-ttl-ms", "0"]);
    let b = Server::start(&pg, &["--quorum", "2", "--cache-ttl-ms", "0"]);
    let http = client();
    let op = Op::parse(OP, SHAPE).unwrap();
    let fp = gpu_fingerprint("nvidia", "hopper", "h100");
    let mut key = String::new();
    let mut favourite = String::new();
    // Sessions open on one server and report to the other, concurrently:
    // the ticket secret and the votes live in the shared database.
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (http, fp, op) = (http.clone(), fp.clone(), op.clone());
        let (open_on, report_to) = if i % 2 == 0 { (a.url.clone(), b.url.clone()) } else { (b.url.clone(), a.url.clone()) };
        tasks.push(tokio::spawn(async move {
            let (sid, v) = open_session(&http, &open_on, &fp).await;
            let q = queue(&http, &open_on, &sid, OP, SHAPE, TARGET).await;
            let (st, body) = report(&http, &report_to, &sid, &op, TARGET, vec![entry(&op, &q[1], 10.0), entry(&op, &q[0], 20.0)]).await;
            assert_eq!(st, 200, "{body}");
            (v["device_key"].as_str().unwrap().to_string(), q[1]["sha256"].as_str().unwrap().to_string())
        }));
    }
    for t in tasks {
        (key, favourite) = t.await.unwrap();
    }
    let from_a = best(&http, &a.url, &key, OP, SHAPE, TARGET).await;
    let from_b = best(&http, &b.url, &key, OP, SHAPE, TARGET).await;
    assert_eq!(from_a["meta"]["sha256"], favourite.as_str());
    assert_eq!(from_a["meta"]["sha256"], from_b["meta"]["sha256"]);
    assert_eq!(from_a["votes"], from_b["votes"]);
    assert_eq!(from_a["votes"], 30, "six sessions' first places, each counted once");
}

/// Two processes on one SQLite file, reports from 16 clients crossing
/// between them: every one is acknowledged. (A deferred transaction that
/// reads before it writes cannot take the write lock while the other
/// process holds it and failed at once with "database is locked": 272 of
/// 400 reports were refused with 500 before writers began `IMMEDIATE`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_sqlite_file_refuse_no_report() {
    let db_url = sqlite_url();
    let limits = ["--rate-per-address", "1000000000", "--rate-per-session", "1000000000", "--max-connections-per-address", "1000"];
    let a = Server::start(&db_url, &limits);
    let b = Server::start(&db_url, &limits);
    let http = client();
    let mut tasks = Vec::new();
    for w in 0..16 {
        let (http, urls) = (http.clone(), [a.url.clone(), b.url.clone()]);
        tasks.push(tokio::spawn(async move {
            let mut acked = 0;
            for i in 0..12 {
                acked += usize::from(one_report(&http, &urls[(w + i) % 2], w * 100 + i).await.is_some());
            }
            acked
        }));
    }
    let mut acked = 0;
    for t in tasks {
        acked += t.await.unwrap();
    }
    assert_eq!(acked, 16 * 12, "reports refused by two servers sharing one SQLite file");
    let db = webtune_kernel_db::Db::connect(&db_url).await.unwrap();
    assert_eq!(db.recent_reports(1_000_000).await.unwrap().len(), 16 * 12);
}

/// docs/service.md's bound: a server's cached lookup answer is at most
/// `--cache-ttl-ms` old, so a winner elected through another server sharing
/// the database is answered within that time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn a_winner_elected_through_one_server_is_answered_by_another_within_the_cache_ttl() {
    const TTL_MS: u64 = 400;
    let pg = postgres_url().await;
    let ttl = TTL_MS.to_string();
    let a = Server::start(&pg, &["--quorum", "2", "--cache-ttl-ms", &ttl]);
    let b = Server::start(&pg, &["--quorum", "2", "--cache-ttl-ms", &ttl]);
    let http = client();
    let op = Op::parse(OP, SHAPE).unwrap();
    let fp = gpu_fingerprint("nvidia", "hopper", "ttl");
    let (s1, v) = open_session(&http, &a.url, &fp).await;
    let key = v["device_key"].as_str().unwrap().to_string();
    let (s2, _) = open_session(&http, &a.url, &fp).await;
    let q1 = queue(&http, &a.url, &s1, OP, SHAPE, TARGET).await;
    let q2 = queue(&http, &a.url, &s2, OP, SHAPE, TARGET).await;
    // b answers (and caches) the portable default.
    let before = best(&http, &b.url, &key, OP, SHAPE, TARGET).await;
    assert_eq!(before["level"], "default", "{before}");
    let (st, body) = report(&http, &a.url, &s1, &op, TARGET, vec![entry(&op, &q1[1], 10.0)]).await;
    assert_eq!(st, 200, "{body}");
    let (st, body) = report(&http, &a.url, &s2, &op, TARGET, vec![entry(&op, &q2[1], 11.0)]).await;
    assert_eq!(st, 200, "{body}");
    let elected = Instant::now();
    let want = q1[1]["sha256"].as_str().unwrap();
    loop {
        let now = best(&http, &b.url, &key, OP, SHAPE, TARGET).await;
        if now["meta"]["sha256"] == want {
            break;
        }
        // The cache's lifetime, and scheduling slack on a loaded machine.
        assert!(elected.elapsed() < Duration::from_millis(TTL_MS + 1500), "b still answers {now} after {:?}", elected.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_queue_leaves_nothing_stuck() {
    let srv = Server::start(&sqlite_url(), &[]);
    let http = client();
    let (sid, _) = open_session(&http, &srv.url, &gpu_fingerprint("nvidia", "hopper", "h100")).await;
    for _ in 0..3 {
        let r = http
            .get(format!("{}/v1/sessions/{sid}/queue", srv.url))
            .query(&[("op", "matmul"), ("shape", "64,64,64"), ("target", "wgsl")])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let mut s = r.bytes_stream();
        use futures_util::StreamExt;
        let first = s.next().await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&first).contains("candidate"));
        drop(s); // hang up after one candidate
    }
    // The producers notice at their next send and release their slots.
    let t = Instant::now();
    loop {
        let m = http.get(format!("{}/metrics", srv.url)).send().await.unwrap().text().await.unwrap();
        if m.lines().any(|l| l == "webtune_queues_active 0") {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "queues stayed open:\n{m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // And the session can take a queue again.
    let q = queue(&http, &srv.url, &sid, "matmul", "64,64,64", "wgsl").await;
    assert!(!q.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_is_refused_with_4xx_not_a_crash() {
    let srv = Server::start(&sqlite_url(), &["--rate-per-address", "30"]);
    let http = client();
    // An oversized body.
    let big = "x".repeat(200 * 1024);
    let r = http.post(format!("{}/v1/sessions", srv.url)).body(big).header("content-type", "application/json").send().await.unwrap();
    assert_eq!(r.status(), 413);
    // The unread body makes the connection unusable: the server says so,
    // so that the pool does not hand it to the next request.
    assert_eq!(r.headers().get("connection").and_then(|v| v.to_str().ok()), Some("close"));
    assert!(r.text().await.unwrap().contains("larger than"));
    // A flood of sessions from one address meets the rate limit.
    let mut limited = None;
    for _ in 0..40 {
        let r = http
            .post(format!("{}/v1/sessions", srv.url))
            .json(&json!({"fingerprint": gpu_fingerprint("a", "b", "c")}))
            .send()
            .await
            .unwrap();
        if r.status() == 429 {
            limited = Some(r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string()));
            break;
        }
        assert_eq!(r.status(), 201);
    }
    let retry = limited.expect("40 sessions in a burst from one address must meet the limit of 30 a minute");
    assert!(retry.is_some_and(|s| s.parse::<u64>().unwrap() >= 1));
    // Reads are not rate limited and the server is still healthy.
    let r = http.get(format!("{}/healthz", srv.url)).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_reports_costs_the_session_one_request_and_answers_each_report() {
    // 6 a minute: a session's burst of 20, then one request every 10 s.
    let srv = Server::start(&sqlite_url(), &["--rate-per-session", "6", "--quorum", "1"]);
    let http = client();
    let (sid, _) = open_session(&http, &srv.url, &gpu_fingerprint("nvidia", "hopper", "h100")).await;
    let batch_url = format!("{}/v1/sessions/{sid}/reports/batch", srv.url);
    // Eight kernels' queues (8 requests), reported in one batch (1 request).
    let mut reports = Vec::new();
    for m in 1..=8 {
        let shape = format!("{},16,8", 8 * m);
        let op = Op::parse(OP, &shape).unwrap();
        let q = queue(&http, &srv.url, &sid, OP, &shape, TARGET).await;
        reports.push(json!({"op": OP, "shape": op.shape(), "target": TARGET, "entries": [entry(&op, &q[0], 50.0)]}));
    }
    let r = http.post(&batch_url).json(&json!({ "reports": reports })).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 8, "{v}");
    for (i, x) in results.iter().enumerate() {
        assert_eq!(x["status"], 200, "report {i}: {x}");
        assert_eq!(x["report"]["accepted"], 1, "report {i}: {x}");
        assert!(x["report"]["winners"].as_array().is_some_and(|w| !w.is_empty()), "report {i} elected nothing: {x}");
    }
    // Each report of a batch stands alone: spent tickets are refused one by
    // one (409) while a fresh one in the same batch is stored.
    let shape = "72,16,8";
    let op = Op::parse(OP, shape).unwrap();
    let q = queue(&http, &srv.url, &sid, OP, shape, TARGET).await;
    let fresh = json!({"op": OP, "shape": op.shape(), "target": TARGET, "entries": [entry(&op, &q[0], 50.0)]});
    let r = http.post(&batch_url).json(&json!({ "reports": [reports[0].clone(), fresh, reports[1].clone()] })).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    let status: Vec<u64> = v["results"].as_array().unwrap().iter().map(|x| x["status"].as_u64().unwrap()).collect();
    assert_eq!(status, [409, 200, 409], "{v}");
    assert!(v["results"][0]["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
    // An empty batch, and one over the limit, are refused whole.
    for n in [0, 17] {
        let r = http.post(&batch_url).json(&json!({ "reports": vec![fresh_placeholder(); n] })).send().await.unwrap();
        assert_eq!(r.status(), 422, "a batch of {n}");
    }
    // 8 + 1 + 1 + 1 + 2 = 13 requests so far. The session's burst runs out
    // within the next eight, and the refusal says when to come back.
    let mut retry = None;
    for _ in 0..8 {
        let r = http.post(format!("{}/v1/sessions/{sid}/reports", srv.url)).json(&json!({})).send().await.unwrap();
        if r.status() == 429 {
            retry = r.headers().get("retry-after").map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
            break;
        }
        assert_eq!(r.status(), 400);
    }
    let retry = retry.expect("a report past the session's burst must be answered 429 with Retry-After");
    assert!((1..=10).contains(&retry), "Retry-After {retry} s at 6 a minute");
    let r = http.post(&batch_url).json(&json!({ "reports": reports })).send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));
    // Latency reports count apart: the kernel reports' empty bucket does not
    // refuse one (this server has no models, so it answers 404).
    let body = json!({"session_id": sid, "target": "webgpu", "batch": 1, "seq_len": 16, "median_ms": 5.0, "runs": 5});
    let r = http.post(format!("{}/v1/models/m/latency", srv.url)).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 404);
}

/// A well-formed report of no real kernel (for batches refused before any is read).
fn fresh_placeholder() -> serde_json::Value {
    json!({"op": OP, "shape": [8, 16, 8], "target": TARGET, "entries": [{"sha256": "0".repeat(64), "ticket": "t", "median_us": 1.0, "runs": 3, "output_ok": false}]})
}
