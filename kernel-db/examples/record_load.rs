//! The database's share of a report's cost, without HTTP: `concurrency`
//! tasks call `Db::record_report` (top-5 reports, one session each, every
//! one durable before it returns) and the rate, the writer's groups and the
//! process's CPU time are printed.
//!
//! ```text
//! cargo run --release -p webtune-kernel-db --example record_load -- sqlite:///tmp/r.sqlite 3000 64 [agreed|contested]
//! ```
//!
//! `agreed`: every session ranks the same five kernels in the same order
//! (the steady state of a key). `contested`: eight rankings in rotation, so
//! the vote is split and elections compare the leader with the incumbent
//! over the sessions that timed both.

use std::sync::Arc;
use std::time::Instant;

use webtune_kernel_db::{Db, DeviceKeys, KernelKind, NewKernel, NewMeasurement, NewReport, VotePolicy, random_id, sha256_hex};

fn cpu_seconds() -> f64 {
    // utime + stime of this process, in clock ticks (100 per second on Linux).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("database URL");
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let concurrency: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(64);
    let contested = args.next().as_deref() == Some("contested");
    let db = Arc::new(Db::connect(&url).await.expect("connect"));
    let kind = KernelKind { op: "matmul".into(), shape: "64,64,64".into(), target: "wgsl".into() };
    let mut kernels = Vec::new();
    for i in 0..8u8 {
        let bytes = vec![i; 32];
        let sha = sha256_hex(&bytes);
        db.put_kernel(&NewKernel { sha256: sha.clone(), kind: kind.clone(), schedule_json: "{}".into(), meta_json: "{}".into(), bytes })
            .await
            .expect("kernel");
        kernels.push(sha);
    }
    eprintln!("preparing {n} sessions...");
    let mut jobs = Vec::with_capacity(n);
    for i in 0..n {
        let keys = DeviceKeys {
            device_key: format!("gpu-nvidia/hopper/h{}/-", i % 4),
            arch_key: "gpu-nvidia/hopper".into(),
            vendor_key: "gpu-nvidia".into(),
            rho: "-".into(),
        };
        let fp = db.upsert_device(&format!("{{\"d\":{}}}", i % 4), &keys).await.expect("device");
        let session = db.create_session(&fp, &keys).await.expect("session").id;
        let entries = (0..5)
            .map(|r| NewMeasurement {
                kernel_sha256: kernels[if contested { (i + r) % 8 } else { r }].clone(),
                ticket: random_id().unwrap(),
                median_us: 100.0 + r as f64,
                runs: 10,
                output_ok: true,
            })
            .collect();
        jobs.push((NewReport { session_id: session, kind: kind.clone(), space_checksum: "sp".into(), entries }, keys));
    }
    let jobs = Arc::new(tokio::sync::Mutex::new(jobs));
    let policy = VotePolicy::default();
    let (t0, c0) = (Instant::now(), cpu_seconds());
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (db, jobs) = (db.clone(), jobs.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            loop {
                let Some((report, keys)) = jobs.lock().await.pop() else { break };
                let t = Instant::now();
                db.record_report(&report, &keys, &policy).await.expect("report");
                lat.push(t.elapsed().as_secs_f64() * 1e3);
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let (secs, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    lat.sort_by(f64::total_cmp);
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q).round() as usize];
    let g = db.group_stats();
    println!(
        "{{\"reports\":{},\"concurrency\":{concurrency},\"reports_per_s\":{:.1},\"p50_ms\":{:.2},\"p99_ms\":{:.2},\"cpu_ms_per_report\":{:.3},\"groups\":{},\"largest_group\":{},\"writer_busy_ms_per_report\":{:.3}}}",
        lat.len(),
        lat.len() as f64 / secs,
        p(0.5),
        p(0.99),
        cpu * 1e3 / lat.len() as f64,
        g.groups,
        g.largest,
        g.busy_us as f64 / 1e3 / g.reports.max(1) as f64
    );
}
