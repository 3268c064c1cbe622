//! A crowd of simulated clients on loopback, a share of which lie. Used by
//! the robustness test (`tests/crowd.rs`) and by the sweep that finds the
//! largest share of liars the votes survive (the research crate's `src/bin/crowd_sim.rs`).
//!
//! Every client opens a session with the same fingerprint and reads the real
//! candidate queue. The kernels have hidden true times: one is the true best,
//! one is a slow kernel the liars promote. Honest clients report their top 5
//! by true time with ±10% noise and correct output samples. Liars, in turn:
//! - **fake**: rank the slow kernel first with a faked fast (but plausible)
//!   time and correct samples: the strongest lie, since the server cannot
//!   tell a fake time from a real one;
//! - **wrong**: report the true best kernel with wrong output samples, to
//!   get it flagged and excluded;
//! - **replay**: post an honest client's entries (tickets of another session);
//! - **flood**: take the queue again and again and report each time.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Mutex;
use webtune_compiler::Op;

use super::*;

pub const OP: &str = "matmul";
pub const SHAPE: &str = "16,32,16";
pub const TARGET: &str = "wgsl";

/// What the crowd did and what the server decided.
#[derive(Debug)]
pub struct Outcome {
    pub sessions: usize,
    pub liars: usize,
    pub accepted: usize,
    /// Refusals by status code.
    pub refused: std::collections::BTreeMap<u16, usize>,
    pub winner_is_best: bool,
    pub winner_level: String,
    pub seconds: f64,
}

/// Deterministic noise in [-1, 1).
fn noise(seed: u64) -> f64 {
    let u = webtune_compiler::reference::draw_at(seed, 0);
    (u >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// Runs `sessions` clients, `liar_share` of them liars, `parallel` at a time.
pub async fn run(url: &str, sessions: usize, liar_share: f64, parallel: usize, seed: u64) -> Outcome {
    let t0 = std::time::Instant::now();
    let http = client();
    let op = Op::parse(OP, SHAPE).unwrap();
    let fp = gpu_fingerprint("NVIDIA", "hopper", "H100 80GB HBM3");
    // The truth: learned from one queue (the lite space's order is the same
    // for every session of this key).
    let (probe, pv) = open_session(&http, url, &fp).await;
    let key = pv["device_key"].as_str().unwrap().to_string();
    let q = queue(&http, url, &probe, OP, SHAPE, TARGET).await;
    assert!(q.len() >= 8, "the queue is too short for the simulation: {}", q.len());
    let shas: Vec<String> = q.iter().map(|c| c["sha256"].as_str().unwrap().to_string()).collect();
    let best = shas[q.len() / 3].clone();
    let slow = shas[q.len() - 1].clone();
    let true_us = |sha: &str| -> f64 {
        if sha == best {
            60.0
        } else if sha == slow {
            400.0
        } else {
            100.0 + 10.0 * shas.iter().position(|s| s == sha).unwrap_or(0) as f64
        }
    };
    let liars = (sessions as f64 * liar_share).round() as usize;
    let honest_entries: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let results: Arc<Mutex<(usize, std::collections::BTreeMap<u16, usize>)>> = Arc::default();
    let sem = Arc::new(tokio::sync::Semaphore::new(parallel));
    let mut tasks = Vec::new();
    // Spread liars evenly through the arrival order (every k-th client), so
    // they are among the first as well as the last.
    let is_liar = |i: usize| liars > 0 && (i * liars) / sessions != ((i + 1) * liars) / sessions;
    for i in 0..sessions {
        let liar = is_liar(i);
        let (http, url, op, fp, sem) = (http.clone(), url.to_string(), op.clone(), fp.clone(), sem.clone());
        let (honest_entries, results) = (honest_entries.clone(), results.clone());
        let (best, slow) = (best.clone(), slow.clone());
        let shas = shas.clone();
        let truth: Vec<(String, f64)> = shas.iter().map(|s| (s.clone(), true_us(s))).collect();
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire().await.unwrap();
            let t = |sha: &str| truth.iter().find(|(s, _)| s == sha).map(|x| x.1).unwrap();
            let (sid, _) = open_session(&http, &url, &fp).await;
            let mut posts: Vec<Vec<Value>> = Vec::new();
            let q = queue(&http, &url, &sid, OP, SHAPE, TARGET).await;
            let find = |sha: &str| q.iter().find(|c| c["sha256"] == sha).unwrap().clone();
            let kind = if liar { i % 4 } else { usize::MAX };
            match kind {
                usize::MAX => {
                    // Honest: every candidate timed with noise, top 5 reported.
                    let mut timed: Vec<(f64, &Value)> = q
                        .iter()
                        .enumerate()
                        .map(|(j, c)| (t(c["sha256"].as_str().unwrap()) * (1.0 + 0.1 * noise(seed ^ (i * 1000 + j) as u64)), c))
                        .collect();
                    timed.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let entries: Vec<Value> = timed.iter().take(5).map(|(us, c)| entry(&op, c, *us)).collect();
                    honest_entries.lock().await.push((sid.clone(), entries[0].clone()));
                    posts.push(entries);
                }
                0 | 1 => {
                    // Fake fast time for the slow kernel; the true best pushed down.
                    let mut e = vec![entry(&op, &find(&slow), 40.0)];
                    for s in shas.iter().filter(|s| **s != slow && **s != best).take(3) {
                        e.push(entry(&op, &find(s), t(s)));
                    }
                    e.push(entry(&op, &find(&best), 200.0));
                    e.sort_by(|a, b| a["median_us"].as_f64().unwrap().total_cmp(&b["median_us"].as_f64().unwrap()));
                    posts.push(e);
                }
                2 => {
                    // Wrong outputs for the true best, to get it excluded.
                    let mut e = entry(&op, &find(&best), 40.0);
                    let s: Vec<f32> = serde_json::from_value(e["samples"].clone()).unwrap();
                    e["samples"] = serde_json::json!(s.iter().map(|x| x * 1.5 + 0.25).collect::<Vec<f32>>());
                    posts.push(vec![e]);
                    // And a replay of someone else's honest entry, if there is one yet.
                    if let Some((_, other)) = honest_entries.lock().await.first().cloned() {
                        posts.push(vec![other]);
                    }
                }
                _ => {
                    // Flood: many queues, many reports, all for the slow kernel
                    // (twice a session's burst of requests, so the limit bites).
                    for _ in 0..20 {
                        let Some(q2) = try_queue(&http, &url, &sid, OP, SHAPE, TARGET).await else { continue };
                        let c = q2.iter().find(|c| c["sha256"] == slow.as_str()).unwrap();
                        posts.push(vec![entry(&op, c, 40.0)]);
                    }
                }
            }
            for p in posts {
                let (st, _) = report(&http, &url, &sid, &op, TARGET, p).await;
                let mut r = results.lock().await;
                if st == 200 {
                    r.0 += 1;
                } else {
                    *r.1.entry(st).or_default() += 1;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Reports to this server invalidate its cache at once.
    let b = best_of(&http, url, &key).await;
    let r = results.lock().await;
    Outcome {
        sessions,
        liars,
        accepted: r.0,
        refused: r.1.clone(),
        winner_is_best: b["meta"]["sha256"] == best.as_str(),
        winner_level: b["level"].as_str().unwrap_or("").to_string(),
        seconds: t0.elapsed().as_secs_f64(),
    }
}

async fn best_of(http: &reqwest::Client, url: &str, key: &str) -> Value {
    best(http, url, key, OP, SHAPE, TARGET).await
}
