//! Load on the write path: how many top-5 reports a server accepts per
//! second, durably (each is acknowledged only after its transaction
//! committed), and their latency. Sessions and tickets are prepared first;
//! then `concurrency` clients post one report each until all are sent.
//!
//! ```text
//! cargo run --release -p webtune-research --bin report_load -- http://127.0.0.1:8080 400 16
//! cargo run --release -p webtune-research --bin report_load -- http://127.0.0.1:8080,http://127.0.0.1:8081 400 16
//! ```
//!
//! With several servers (comma-separated, sharing one database), session
//! `i` is opened and queued on server `i mod n` and reports to the next
//! one, so every report crosses servers: sessions and tickets must be valid
//! on all of them.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use webtune_compiler::Op;
use webtune_research::clients::*;

fn main() {
    let mut args = std::env::args().skip(1);
    let urls: Vec<String> = args.next().unwrap_or_else(|| "http://127.0.0.1:8080".into()).split(',').map(str::to_string).collect();
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(400);
    let concurrency: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(16);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let http = client();
        let op = Op::parse("matmul", "64,64,64").unwrap();
        eprintln!("preparing {n} sessions and their queues...");
        let prep_t0 = std::time::Instant::now();
        // Prepared by as many tasks as there will be clients (one after
        // another, 20,000 sessions took minutes); the order is kept.
        let mut prep = Vec::with_capacity(concurrency);
        let urls = Arc::new(urls);
        for w in 0..concurrency.max(1) {
            let (http, op, urls) = (http.clone(), op.clone(), urls.clone());
            prep.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                for i in (w..n).step_by(concurrency.max(1)) {
                    let fp = gpu_fingerprint("nvidia", "hopper", &format!("h{}", i % 4));
                    let url = &urls[i % urls.len()];
                    let (sid, _) = open_session(&http, url, &fp).await;
                    let q = queue(&http, url, &sid, "matmul", "64,64,64", "wgsl").await;
                    let entries: Vec<_> = q.iter().take(5).enumerate().map(|(r, c)| entry(&op, c, 100.0 + r as f64)).collect();
                    let to = urls[(i + 1) % urls.len()].clone();
                    mine.push((i, (to, sid, json!({"op": "matmul", "shape": [64, 64, 64], "target": "wgsl", "entries": entries}))));
                }
                mine
            }));
        }
        let mut bodies = Vec::with_capacity(n);
        for p in prep {
            bodies.extend(p.await.unwrap());
        }
        let prep_s = prep_t0.elapsed().as_secs_f64();
        eprintln!("prepared {n} sessions and their queues in {prep_s:.2} s ({:.0} a second, {concurrency} at a time)", n as f64 / prep_s);
        bodies.sort_by_key(|b| b.0);
        let bodies: Vec<_> = bodies.into_iter().rev().map(|b| b.1).collect();
        let bodies = Arc::new(tokio::sync::Mutex::new(bodies));
        let lat = Arc::new(tokio::sync::Mutex::new(Vec::new()));
        eprintln!("sending {n} reports from {concurrency} clients...");
        let t0 = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let (http, bodies, lat) = (http.clone(), bodies.clone(), lat.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let Some((url, sid, body)) = bodies.lock().await.pop() else { break };
                    let t = Instant::now();
                    // A refusal (408, 503 at a limit) or a dropped connection is
                    // counted, not fatal: an old version under load is measured too.
                    let status = match http.post(format!("{url}/v1/sessions/{sid}/reports")).json(&body).send().await {
                        Ok(r) => r.status().as_u16(),
                        Err(_) => 0,
                    };
                    lat.lock().await.push((status, t.elapsed().as_secs_f64() * 1e3));
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let secs = t0.elapsed().as_secs_f64();
        let all = lat.lock().await.clone();
        let mut refused = std::collections::BTreeMap::new();
        for (status, _) in all.iter().filter(|(s, _)| *s != 200) {
            *refused.entry(status.to_string()).or_insert(0) += 1;
        }
        let mut l: Vec<f64> = all.iter().filter(|(s, _)| *s == 200).map(|(_, ms)| *ms).collect();
        l.sort_by(f64::total_cmp);
        let p = |q: f64| if l.is_empty() { f64::NAN } else { l[((l.len() - 1) as f64 * q).round() as usize] };
        println!(
            "{}",
            json!({"reports": l.len(), "servers": urls.len(), "concurrency": concurrency, "seconds": secs, "reports_per_s": l.len() as f64 / secs,
                   "p50_ms": p(0.5), "p99_ms": p(0.99), "max_ms": p(1.0), "refused": refused})
        );
    });
}
