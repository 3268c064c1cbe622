//! A real `webtune serve` on loopback, and simulated devices that talk to it
//! over HTTP exactly as clients do: open a session, read the candidate queue
//! (Server-Sent Events), compute the outputs the server asks to check, and
//! report a top 5.
#![allow(dead_code)]

pub mod sim;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use webtune_compiler::Op;
use webtune_compiler::reference::output_at;

/// A server process; killed when dropped.
#[derive(Debug)]
pub struct Server {
    pub child: Child,
    pub url: String,
    pub db_url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `webtune serve` on a free port with `extra` arguments and waits
    /// until it listens.
    pub fn start(db_url: &str, extra: &[&str]) -> Server {
        let mut child = Command::new(webtune_bin())
            .args(["serve", "--addr", "127.0.0.1:0", "--database-url", db_url])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("webtune serve starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().expect("the server prints its address").expect("utf-8");
        let url =
            first.split_whitespace().find(|w| w.starts_with("http://")).unwrap_or_else(|| panic!("no address in `{first}`")).to_string();
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server { child, url, db_url: db_url.to_string() }
    }
}

/// The `webtune` binary: cargo names it for the server's integration tests;
/// the research crate's programs (in `target/PROFILE/`) find it beside
/// themselves and its tests (in `target/PROFILE/deps/`) in the directory
/// above, once `cargo build -p webtune` (with the same profile) made it.
pub fn webtune_bin() -> std::path::PathBuf {
    if let Some(p) = option_env!("CARGO_BIN_EXE_webtune") {
        return p.into();
    }
    let exe = std::env::current_exe().expect("current exe");
    let beside = exe.parent().expect("target/PROFILE").to_path_buf();
    let found = [beside.join("webtune"), beside.parent().map(|d| d.join("webtune")).unwrap_or_default()].into_iter().find(|p| p.is_file());
    found.unwrap_or_else(|| panic!("no webtune binary beside or above {}: build it first (cargo build -p webtune)", beside.display()))
}

/// A fresh SQLite database URL in a temporary directory.
pub fn sqlite_url() -> String {
    let dir = std::env::temp_dir().join(format!("webtune-srv-{}", webtune_kernel_db::random_id().unwrap()));
    std::fs::create_dir_all(&dir).unwrap();
    format!("sqlite://{}", dir.join("db.sqlite").display())
}

/// A fresh PostgreSQL database on the test cluster at `WEBTUNE_TEST_PG_URL`.
/// Tests that call it are `#[ignore = "needs PostgreSQL ..."]`: a plain
/// `cargo test` shows them as ignored, and `scripts/test.sh` runs them.
pub async fn postgres_url() -> String {
    let base = std::env::var("WEBTUNE_TEST_PG_URL")
        .expect("WEBTUNE_TEST_PG_URL must be set: scripts/test.sh starts PostgreSQL and runs this test");
    let admin = webtune_kernel_db::Db::connect(&base).await.unwrap();
    let name = format!("srv_{}", webtune_kernel_db::random_id().unwrap());
    admin.create_database(&name).await.unwrap();
    admin.close().await;
    format!("{}/{name}", base.rsplit_once('/').unwrap().0)
}

/// A WebGPU fingerprint in the browser's own field names.
pub fn gpu_fingerprint(vendor: &str, architecture: &str, device: &str) -> Value {
    json!({
        "adapter": {"vendor": vendor, "architecture": architecture, "device": device, "description": format!("{vendor} {device}")},
        "limits": {"maxComputeInvocationsPerWorkgroup": 256, "maxComputeWorkgroupStorageSize": 16384},
        "features": ["timestamp-query"],
        "browser": {"name": "chromium", "version": "156"},
        "os": "linux",
        // The flat fields of the first fingerprint format.
        "vendor": vendor, "architecture": architecture, "device": device,
    })
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap()
}

/// A session: (id, the session response).
pub async fn open_session(http: &reqwest::Client, url: &str, fp: &Value) -> (String, Value) {
    let r = http.post(format!("{url}/v1/sessions")).json(&json!({ "fingerprint": fp })).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap_or_default());
    let v: Value = r.json().await.unwrap();
    (v["session_id"].as_str().unwrap().to_string(), v)
}

/// Every candidate event of a session's queue, in order.
pub async fn queue(http: &reqwest::Client, url: &str, sid: &str, op: &str, shape: &str, target: &str) -> Vec<Value> {
    let r =
        http.get(format!("{url}/v1/sessions/{sid}/queue")).query(&[("op", op), ("shape", shape), ("target", target)]).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    read_queue(r).await
}

/// The queue, or `None` when the server refuses it (e.g. 429).
pub async fn try_queue(http: &reqwest::Client, url: &str, sid: &str, op: &str, shape: &str, target: &str) -> Option<Vec<Value>> {
    let r =
        http.get(format!("{url}/v1/sessions/{sid}/queue")).query(&[("op", op), ("shape", shape), ("target", target)]).send().await.unwrap();
    if r.status() != 200 {
        return None;
    }
    Some(read_queue(r).await)
}

async fn read_queue(r: reqwest::Response) -> Vec<Value> {
    let mut stream = r.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let event = block.lines().find_map(|l| l.strip_prefix("event: ")).unwrap_or("");
            let data: String = block.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            match event {
                "candidate" => out.push(serde_json::from_str(&data).unwrap()),
                "done" => return out,
                _ => {}
            }
        }
    }
    panic!("the queue ended without a done event");
}

/// The output values a correct kernel produces at a candidate's check positions.
pub fn true_samples(op: &Op, candidate: &Value) -> Vec<f32> {
    let seed = candidate["seed"].as_u64().unwrap();
    candidate["check"].as_array().unwrap().iter().map(|p| output_at(op, seed, p.as_u64().unwrap()).0 as f32).collect()
}

/// A report entry for `candidate` claiming `median_us`.
pub fn entry(op: &Op, candidate: &Value, median_us: f64) -> Value {
    json!({
        "sha256": candidate["sha256"],
        "ticket": candidate["ticket"],
        "median_us": median_us,
        "runs": 20,
        "output_ok": true,
        "samples": true_samples(op, candidate),
    })
}

/// Posts a report; returns (status, body).
pub async fn report(http: &reqwest::Client, url: &str, sid: &str, op: &Op, target: &str, entries: Vec<Value>) -> (u16, Value) {
    let body = json!({ "op": op.name(), "shape": op.shape(), "target": target, "entries": entries });
    let r = http.post(format!("{url}/v1/sessions/{sid}/reports")).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// `GET /v1/kernels/best`.
pub async fn best(http: &reqwest::Client, url: &str, device_key: &str, op: &str, shape: &str, target: &str) -> Value {
    let r = http
        .get(format!("{url}/v1/kernels/best"))
        .query(&[("device_key", device_key), ("op", op), ("shape", shape), ("target", target)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    r.json().await.unwrap()
}
