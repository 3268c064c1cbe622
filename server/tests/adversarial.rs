//! The service under attack (issue 23), against a real `webtune serve` on
//! loopback: slow bodies, half-open connections, reports that try to get
//! good kernels flagged, sessions that report for the other target, junk in
//! fingerprints, and pages of other origins. Each test asserts the outcome:
//! honest clients keep being served while the attack runs, no kernel is
//! flagged by a bad report, and memory stays bounded.
//!
//! Attackers connect from other loopback addresses (127.0.0.2 and up), as
//! an attacker on another machine would, so that the per-address caps meet
//! them and not the honest client on 127.0.0.1. Timeouts are shortened by
//! flags so that the suite runs in seconds.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use webtune_compiler::Op;
use webtune_kernel_db::KernelKind;

fn addr(url: &str) -> SocketAddr {
    url.trim_start_matches("http://").parse().unwrap()
}

/// A connection to `to` from the loopback address `from`.
async fn connect_from(from: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(SocketAddr::new(from.parse::<IpAddr>().unwrap(), 0))?;
    s.connect(to).await
}

/// The server's resident memory, KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A counter from `/metrics`.
async fn metric(http: &reqwest::Client, url: &str, name: &str) -> u64 {
    let m = http.get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap();
    let line = m.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("no {name} in\n{m}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Whether the server closed `s` (EOF or reset, possibly after a response)
/// within `within`.
async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue, // a 408 before the close
        }
    }
}

/// An honest client on 127.0.0.1: health and a lookup, again and again,
/// until `until`; returns (requests, failures, slowest).
async fn honest_until(url: String, until: Instant) -> (usize, usize, Duration) {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let (mut n, mut bad, mut slowest) = (0, 0, Duration::ZERO);
    while Instant::now() < until {
        for path in ["/healthz", "/v1/kernels/best?op=matmul&shape=8,16,8&target=wasm"] {
            let t = Instant::now();
            let ok = matches!(http.get(format!("{url}{path}")).send().await, Ok(r) if r.status() == 200);
            slowest = slowest.max(t.elapsed());
            n += 1;
            bad += usize::from(!ok);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (n, bad, slowest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_and_half_open_connections_cost_a_bounded_amount() {
    // A small in-flight limit: without the timeouts and caps, 40 slow
    // bodies alone would take every slot and answer everyone 503.
    let srv = Server::start(
        &sqlite_url(),
        &["--max-in-flight", "32", "--header-timeout-ms", "1000", "--request-timeout-ms", "1500", "--max-connections-per-address", "16"],
    );
    let to = addr(&srv.url);
    let pid = srv.child.id();
    let http = client();
    // Warm up (the default kernel compiled and cached), then a baseline.
    let (_, bad, _) = honest_until(srv.url.clone(), Instant::now() + Duration::from_millis(500)).await;
    assert_eq!(bad, 0);
    let rss0 = rss_kib(pid);

    // Slow bodies from 127.0.0.2: each POST promises 1000 bytes and sends
    // one every 100 ms, reopening as the server closes them.
    let attack_end = Instant::now() + Duration::from_secs(4);
    let mut slow = Vec::new();
    for _ in 0..40 {
        slow.push(tokio::spawn(async move {
            let (mut opened, mut cut) = (0usize, 0usize);
            while Instant::now() < attack_end {
                let Ok(mut s) = connect_from("127.0.0.2", to).await else { continue };
                opened += 1;
                let head = "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n";
                if s.write_all(head.as_bytes()).await.is_err() {
                    cut += 1;
                    continue;
                }
                let t = Instant::now();
                loop {
                    if Instant::now() >= attack_end {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if s.write_all(b" ").await.is_err() || closed_within(&mut s, Duration::from_millis(1)).await {
                        // Cut by the request timeout (or refused at the cap).
                        assert!(t.elapsed() < Duration::from_millis(3000), "a slow body was held {:?}", t.elapsed());
                        cut += 1;
                        break;
                    }
                }
            }
            (opened, cut)
        }));
    }
    // Half-open connections from 127.0.0.3: half a request line, then silence.
    let mut half_open = Vec::new();
    for _ in 0..200 {
        if let Ok(mut s) = connect_from("127.0.0.3", to).await {
            let _ = s.write_all(b"GET /healthz HT").await;
            half_open.push(s);
        }
    }
    let (n, bad, slowest) = honest_until(srv.url.clone(), attack_end).await;
    let rss_during = rss_kib(pid);
    assert!(n >= 40, "the honest client made only {n} requests");
    assert_eq!(bad, 0, "{bad} of {n} honest requests failed during the attack (slowest {slowest:?})");
    let (mut opened, mut cut) = (0, 0);
    for t in slow {
        let (o, c) = t.await.unwrap();
        opened += o;
        cut += c;
    }
    assert!(cut >= 40, "the server cut only {cut} of {opened} slow bodies");
    // Every half-open connection is closed: past the cap at once, the rest
    // at the header timeout.
    for s in &mut half_open {
        assert!(closed_within(s, Duration::from_secs(3)).await, "a half-open connection stayed open");
    }
    assert!(metric(&http, &srv.url, "webtune_connections_refused_total").await >= 150, "the per-address cap did not refuse");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(metric(&http, &srv.url, "webtune_requests_in_flight").await, 1, "slots stayed taken (1 is this request)");
    assert!(metric(&http, &srv.url, "webtune_connections_open").await <= 2);
    let rss1 = rss_kib(pid);
    eprintln!(
        "RSS KiB: before {rss0}, during {rss_during}, after {rss1}; slow bodies opened {opened}, cut {cut}; honest {n} requests, slowest {slowest:?}"
    );
    assert!(rss_during < rss0 + 64 * 1024, "RSS rose from {rss0} to {rss_during} KiB");
    assert!(rss1 < rss0 + 32 * 1024, "RSS stayed at {rss1} KiB after the attack (baseline {rss0})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_when_every_slot_is_taken() {
    let srv = Server::start(&sqlite_url(), &["--max-in-flight", "2", "--max-connections-per-address", "8"]);
    let to = addr(&srv.url);
    // Two slow bodies from two addresses hold both slots.
    let mut held = Vec::new();
    for from in ["127.0.0.4", "127.0.0.5"] {
        let mut s = connect_from(from, to).await.unwrap();
        s.write_all(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{").await.unwrap();
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let http = client();
    let r = http.get(format!("{}/v1/kernels/best?op=matmul&shape=8,8,8&target=wasm", srv.url)).send().await.unwrap();
    assert_eq!(r.status(), 503, "the slots are taken, so a lookup is refused");
    let r = http.get(format!("{}/healthz", srv.url)).send().await.unwrap();
    assert_eq!(r.status(), 200, "/healthz must answer at the limit");
}

/// A GPU session's queue for `shape`, and its device key.
async fn gpu_queue(http: &reqwest::Client, url: &str, shape: &str) -> (String, String, Vec<Value>) {
    let (sid, v) = open_session(http, url, &gpu_fingerprint("nvidia", "hopper", "h100")).await;
    let q = queue(http, url, &sid, "matmul", shape, "wgsl").await;
    (sid, v["device_key"].as_str().unwrap().to_string(), q)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_are_bound_to_their_tickets() {
    let srv = Server::start(&sqlite_url(), &["--rate-per-address", "100000"]);
    let http = client();
    let shape = "16,32,24";
    let op = Op::parse("matmul", shape).unwrap();
    let wrong = Op::parse("matmul", "16,32,25").unwrap();
    let kind = KernelKind { op: "matmul".into(), shape: shape.into(), target: "wgsl".into() };
    let (sid, key, q) = gpu_queue(&http, &srv.url, shape).await;
    let db = webtune_kernel_db::Db::connect(&srv.db_url).await.unwrap();
    let flags = |i: usize| {
        let (db, sha, kind, key) = (&db, q[i]["sha256"].as_str().unwrap().to_string(), kind.clone(), key.clone());
        async move { db.flags_for(&sha, &kind, &key).await.unwrap() }
    };

    // A report that names another shape than its tickets: refused, and
    // nothing is recomputed for the wrong shape, so nothing is flagged.
    let (st, body) = report(&http, &srv.url, &sid, &wrong, "wgsl", vec![entry(&op, &q[0], 50.0)]).await;
    assert_eq!(st, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("its ticket was issued for matmul 16,32,24"), "{body}");
    assert!(!body["error"].as_str().unwrap().contains("flagged"), "{body}");
    assert_eq!(flags(0).await, 0);
    assert_eq!(metric(&http, &srv.url, "webtune_samples_rejected_total").await, 0);

    // A used ticket: first an honest report of q[0], then wrong samples
    // under the same ticket: 409 before any sample is looked at.
    let (st, body) = report(&http, &srv.url, &sid, &op, "wgsl", vec![entry(&op, &q[0], 50.0)]).await;
    assert_eq!(st, 200, "{body}");
    let mut lie = entry(&op, &q[0], 50.0);
    lie["samples"] = json!(vec![123.0; lie["samples"].as_array().unwrap().len()]);
    let (st, body) = report(&http, &srv.url, &sid, &op, "wgsl", vec![lie]).await;
    assert_eq!(st, 409, "{body}");
    assert_eq!(flags(0).await, 0, "a used ticket flagged a kernel");
    assert_eq!(metric(&http, &srv.url, "webtune_samples_rejected_total").await, 0);

    // A fresh ticket with wrong samples flags, once; its ticket is spent.
    let mut lie = entry(&op, &q[1], 60.0);
    lie["samples"] = json!(vec![123.0; lie["samples"].as_array().unwrap().len()]);
    let (st, body) = report(&http, &srv.url, &sid, &op, "wgsl", vec![lie.clone()]).await;
    assert_eq!(st, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("flagged"), "{body}");
    assert_eq!(flags(1).await, 1);
    let (st, body) = report(&http, &srv.url, &sid, &op, "wgsl", vec![lie]).await;
    assert_eq!(st, 409, "{body}");
    let (st, body) = report(&http, &srv.url, &sid, &op, "wgsl", vec![entry(&op, &q[1], 60.0)]).await;
    assert_eq!(st, 409, "the ticket that flagged cannot vote: {body}");
    assert_eq!(flags(1).await, 1);
    assert_eq!(metric(&http, &srv.url, "webtune_samples_rejected_total").await, 1);

    // Another session's ticket is no ticket here.
    let (other, _, _) = gpu_queue(&http, &srv.url, "8,8,8").await;
    let (st, body) = report(&http, &srv.url, &other, &op, "wgsl", vec![entry(&op, &q[2], 60.0)]).await;
    assert_eq!(st, 403, "{body}");
    assert_eq!(flags(2).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_serves_one_target() {
    let srv = Server::start(&sqlite_url(), &[]);
    let http = client();
    let (wasm, v) = open_session(&http, &srv.url, &json!({"target": "wasm", "hardwareConcurrency": 2, "simd": true})).await;
    assert!(v["device_key"].as_str().unwrap().starts_with("cpu-"));
    let r = http
        .get(format!("{}/v1/sessions/{wasm}/queue", srv.url))
        .query(&[("op", "matmul"), ("shape", "8,8,8"), ("target", "wgsl")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    assert!(r.text().await.unwrap().contains("this session is for wasm kernels"));
    // A WGSL report to the Wasm session: refused for its target, before its
    // tickets (from a GPU session) are even looked at.
    let op = Op::parse("matmul", "8,8,8").unwrap();
    let (_, _, q) = gpu_queue(&http, &srv.url, "8,8,8").await;
    let (st, body) = report(&http, &srv.url, &wasm, &op, "wgsl", vec![entry(&op, &q[0], 50.0)]).await;
    assert_eq!(st, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("not wgsl"), "{body}");
    // Its own target works.
    assert!(!queue(&http, &srv.url, &wasm, "matmul", "8,8,8", "wasm").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fingerprints_keep_known_fields_only() {
    let srv = Server::start(&sqlite_url(), &[]);
    let http = client();
    let mut fp = gpu_fingerprint("nvidia", "hopper", "h100");
    fp["junk"] = json!("J".repeat(50_000));
    fp["adapter"]["description"] = json!("D".repeat(5_000));
    let (_, v) = open_session(&http, &srv.url, &fp).await;
    assert_eq!(v["device_key"], "gpu-nvidia/hopper/h100/-");
    let page = http.get(format!("{}/dashboard", srv.url)).send().await.unwrap().text().await.unwrap();
    assert!(!page.contains("JJJJ"), "an unknown field reached the dashboard");
    // The 5,000-character description is cut to its bound, and the page
    // (tables and charts of one device) stays small.
    assert!(page.contains("hopper") && !page.contains(&"D".repeat(1_000)), "the description reached the dashboard whole");
    assert!(page.len() < 100_000, "dashboard of {} bytes", page.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_allows_only_the_given_origins_without_credentials() {
    let srv = Server::start(&sqlite_url(), &["--allow-origin", "http://app.example:5173"]);
    let http = client();
    let preflight = |origin: &'static str| {
        http.request(reqwest::Method::OPTIONS, format!("{}/v1/sessions", srv.url))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let r = preflight("http://app.example:5173").await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let h = r.headers();
    assert_eq!(h.get("access-control-allow-origin").unwrap(), "http://app.example:5173");
    assert!(h.get("access-control-allow-methods").unwrap().to_str().unwrap().contains("POST"));
    assert!(h.get("access-control-allow-headers").unwrap().to_str().unwrap().to_ascii_lowercase().contains("content-type"));
    assert!(h.get("access-control-allow-credentials").is_none());
    // The session itself, as the page's fetch sends it.
    let r = http
        .post(format!("{}/v1/sessions", srv.url))
        .header("origin", "http://app.example:5173")
        .json(&json!({"fingerprint": {"target": "wasm"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(r.headers().get("access-control-allow-origin").unwrap(), "http://app.example:5173");
    // Any other origin gets no permission.
    let r = preflight("http://evil.example").await.unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // A server without --allow-origin allows none.
    let plain = Server::start(&sqlite_url(), &[]);
    let r = http
        .request(reqwest::Method::OPTIONS, format!("{}/v1/sessions", plain.url))
        .header("origin", "http://app.example:5173")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
}
