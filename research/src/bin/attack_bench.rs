//! Honest clients under attack (issue 23), in one run against a real
//! `webtune serve` (default flags) on loopback: 16 honest clients, each from
//! its own loopback address (127.0.1.N), do lookups and reports for PHASE
//! seconds with no attack, then under each attack from 127.0.0.2: slow
//! bodies (11 new POSTs a second, one byte every 5 s each), half-open
//! connections (half a request line, then silence, up to 2000 at a time),
//! and a flood of sessions (32 connections posting sessions back to back).
//! Prints per phase the honest success rate and p99 latency, /healthz
//! availability (a probe every 100 ms) and the server's RSS; then the RSS a
//! minute after the last attack. All traffic goes to 127.0.0.1, bounded in
//! count and time.
//!
//! ```text
//! cargo build -p webtune && cargo run -p webtune-research --bin attack_bench -- 15 [60] [control]
//! ```
//!
//! `control` runs the same phases with no attack in any of them: the RSS
//! the honest traffic alone leaves after the same time (the sessions,
//! reports and kernels it writes, the caches over them), against which the
//! RSS after the attacks is compared.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use webtune_compiler::Op;
use webtune_research::clients::*;

const SHAPE: &str = "8,16,8";

fn rss_mib(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        / 1024.0
}

async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(SocketAddr::new(from, 0))?;
    s.connect(to).await
}

/// One honest client until `until`: a lookup every 100 ms and a report of
/// a fresh candidate every tenth; (latencies of successes, failures).
async fn honest(url: String, i: u8, until: Instant) -> (Vec<Duration>, usize) {
    let http = reqwest::Client::builder().local_address(IpAddr::from([127, 0, 1, i + 1])).timeout(Duration::from_secs(10)).build().unwrap();
    let op = Op::parse("matmul", SHAPE).unwrap();
    let (mut lat, mut bad) = (Vec::new(), 0);
    let (sid, v) = open_session(&http, &url, &gpu_fingerprint("nvidia", "hopper", &format!("h{i}"))).await;
    let key = v["device_key"].as_str().unwrap().to_string();
    let mut cands = Vec::new();
    let mut n = 0usize;
    while Instant::now() < until {
        n += 1;
        let t = Instant::now();
        let ok = if n.is_multiple_of(10) {
            if cands.is_empty() {
                cands = try_queue(&http, &url, &sid, "matmul", SHAPE, "wgsl").await.unwrap_or_default();
            }
            match cands.pop() {
                Some(c) => {
                    let body =
                        json!({"op": "matmul", "shape": op.shape(), "target": "wgsl", "entries": [entry(&op, &c, 40.0 + f64::from(i))]});
                    matches!(http.post(format!("{url}/v1/sessions/{sid}/reports")).json(&body).send().await, Ok(r) if r.status() == 200)
                }
                None => false,
            }
        } else {
            let r = http
                .get(format!("{url}/v1/kernels/best"))
                .query(&[("device_key", key.as_str()), ("op", "matmul"), ("shape", SHAPE), ("target", "wgsl")])
                .send()
                .await;
            match r {
                Ok(r) if r.status() == 200 => r.bytes().await.is_ok(),
                _ => false,
            }
        };
        if ok {
            lat.push(t.elapsed());
        } else {
            bad += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (lat, bad)
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Attack {
    None,
    SlowBodies,
    HalfOpen,
    SessionFlood,
}

async fn attack(kind: Attack, url: String, to: SocketAddr, until: Instant) -> usize {
    let from = IpAddr::from([127, 0, 0, 2]);
    let sent = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    match kind {
        Attack::None => {}
        Attack::SlowBodies => {
            while Instant::now() < until {
                for _ in 0..11 {
                    let sent = sent.clone();
                    tasks.push(tokio::spawn(async move {
                        let Ok(mut s) = connect_from(from, to).await else { return };
                        sent.fetch_add(1, Ordering::Relaxed);
                        let head =
                            "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n";
                        if s.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        while Instant::now() < until {
                            tokio::time::sleep(Duration::from_secs(5)).await;
                            if s.write_all(b" ").await.is_err() {
                                return;
                            }
                        }
                    }));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        Attack::HalfOpen => {
            let open = Arc::new(tokio::sync::Semaphore::new(2000));
            while Instant::now() < until {
                let Ok(permit) = open.clone().acquire_owned().await else { break };
                let sent = sent.clone();
                tasks.push(tokio::spawn(async move {
                    let _permit = permit;
                    let Ok(mut s) = connect_from(from, to).await else { return };
                    sent.fetch_add(1, Ordering::Relaxed);
                    let _ = s.write_all(b"GET /healthz HT").await;
                    let mut buf = [0u8; 512];
                    let left = until.saturating_duration_since(Instant::now());
                    let _ = tokio::time::timeout(left, async { while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {} }).await;
                }));
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        Attack::SessionFlood => {
            for _ in 0..32 {
                let (url, sent) = (url.clone(), sent.clone());
                tasks.push(tokio::spawn(async move {
                    let http = reqwest::Client::builder().local_address(from).timeout(Duration::from_secs(5)).build().unwrap();
                    while Instant::now() < until {
                        let _ = http.post(format!("{url}/v1/sessions")).json(&json!({"fingerprint": {"target": "wasm"}})).send().await;
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                }));
            }
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    sent.load(Ordering::Relaxed)
}

fn p99(lat: &mut [Duration]) -> f64 {
    lat.sort();
    if lat.is_empty() {
        return f64::NAN;
    }
    lat[((lat.len() as f64 * 0.99).ceil() as usize).clamp(1, lat.len()) - 1].as_secs_f64() * 1e3
}

fn main() {
    let phase: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(15);
    let after: u64 = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(60);
    let control = std::env::args().nth(3).is_some_and(|a| a == "control");
    let kinds = if control { [Attack::None; 4] } else { [Attack::None, Attack::SlowBodies, Attack::HalfOpen, Attack::SessionFlood] };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let srv = Server::start(&sqlite_url(), &[]);
        let url = srv.url.clone();
        let to: SocketAddr = url.trim_start_matches("http://").parse().unwrap();
        let pid = srv.child.id();
        // Warm up: compile the default and the queue's kernels once.
        let _ = honest(url.clone(), 200, Instant::now() + Duration::from_secs(2)).await;
        let rss0 = rss_mib(pid);
        println!("| phase | honest requests | success | p99 ms | /healthz ok | attacker connections or requests | RSS MiB at end |");
        println!("|---|---|---|---|---|---|---|");
        for kind in kinds {
            let until = Instant::now() + Duration::from_secs(phase);
            let probe = {
                let url = url.clone();
                tokio::spawn(async move {
                    let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().unwrap();
                    let (mut ok, mut n) = (0, 0);
                    while Instant::now() < until {
                        n += 1;
                        ok += usize::from(matches!(http.get(format!("{url}/healthz")).send().await, Ok(r) if r.status() == 200));
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    (ok, n)
                })
            };
            let clients: Vec<_> = (0..16u8).map(|i| tokio::spawn(honest(url.clone(), i, until))).collect();
            let sent = attack(kind, url.clone(), to, until).await;
            let (mut lat, mut bad) = (Vec::new(), 0);
            for c in clients {
                let (l, b) = c.await.unwrap();
                lat.extend(l);
                bad += b;
            }
            let (hok, hn) = probe.await.unwrap();
            let total = lat.len() + bad;
            println!(
                "| {kind:?} | {total} | {:.2}% | {:.1} | {hok}/{hn} | {sent} | {:.1} |",
                100.0 * lat.len() as f64 / total.max(1) as f64,
                p99(&mut lat),
                rss_mib(pid)
            );
        }
        tokio::time::sleep(Duration::from_secs(after)).await;
        let what = if control { "the last phase (control: no attacks)" } else { "the last attack" };
        println!("\nRSS: {rss0:.1} MiB after warm-up, {:.1} MiB {after} s after {what}", rss_mib(pid));
    });
}
