//! The tuning service end to end on loopback, on SQLite and on PostgreSQL:
//! simulated devices of one key report, the winner follows the votes, a new
//! device of the same key gets the winner on its first request, and devices
//! of new keys fall back to their architecture's, vendor's, then the
//! portable default.

mod common;

use common::*;
use serde_json::{Value, json};
use webtune_compiler::Op;

const OP: &str = "matmul";
const SHAPE: &str = "24,40,20";
const TARGET: &str = "wgsl";

fn find<'a>(q: &'a [Value], sha: &str) -> &'a Value {
    q.iter().find(|c| c["sha256"] == sha).unwrap_or_else(|| panic!("kernel {sha} is not in this queue"))
}

async fn scenario(db_url: String) {
    let srv = Server::start(&db_url, &["--quorum", "2"]);
    let http = client();
    let op = Op::parse(OP, SHAPE).unwrap();
    let fp = gpu_fingerprint("NVIDIA", "hopper", "H100 80GB HBM3");

    // A fresh server answers with the kernel the device's lite space predicts.
    let (s1, v1) = open_session(&http, &srv.url, &fp).await;
    let key = v1["device_key"].as_str().unwrap().to_string();
    let b = best(&http, &srv.url, &key, OP, SHAPE, TARGET).await;
    assert_eq!(
        (b["level"].as_str(), b["source"].as_str(), b["confidence"].as_f64()),
        (Some("default"), Some("predicted"), Some(0.0)),
        "{b}"
    );
    let default_sha = b["meta"]["sha256"].as_str().unwrap().to_string();

    // The kernel is served content-addressed, immutable, with an ETag.
    let r = http.get(format!("{}{}", srv.url, b["url"].as_str().unwrap())).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["cache-control"].to_str().unwrap().contains("immutable"));
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    let bytes = r.bytes().await.unwrap();
    assert_eq!(webtune_compiler::kernel::sha256_hex(&bytes), default_sha);
    let r = http.get(format!("{}{}", srv.url, b["url"].as_str().unwrap())).header("if-none-match", &etag).send().await.unwrap();
    assert_eq!(r.status(), 304);

    // Device 1 tunes: every candidate carries its own ticket and check positions.
    let q1 = queue(&http, &srv.url, &s1, OP, SHAPE, TARGET).await;
    assert!(q1.len() >= 3, "the queue has {} candidates", q1.len());
    let mut tickets: Vec<&str> = q1.iter().map(|c| c["ticket"].as_str().unwrap()).collect();
    tickets.sort_unstable();
    tickets.dedup();
    assert_eq!(tickets.len(), q1.len());
    assert!(q1.iter().all(|c| !c["check"].as_array().unwrap().is_empty()));
    let (x, y) = (q1[1]["sha256"].as_str().unwrap().to_string(), q1[2]["sha256"].as_str().unwrap().to_string());
    let (st, body) = report(&http, &srv.url, &s1, &op, TARGET, vec![entry(&op, &q1[1], 10.0), entry(&op, &q1[2], 20.0)]).await;
    assert_eq!(st, 200, "{body}");
    // One session is below the quorum of 2: its fastest kernel answers
    // provisionally, at its key, with half the quorum's confidence.
    let b = best(&http, &srv.url, &key, OP, SHAPE, TARGET).await;
    assert_eq!(
        (b["level"].as_str(), b["source"].as_str(), b["meta"]["sha256"].as_str()),
        (Some("device"), Some("provisional"), Some(x.as_str())),
        "{b}"
    );
    assert_eq!((b["confidence"].as_f64(), b["reports"].as_i64()), (Some(0.5), Some(1)), "{b}");

    // A replayed report is refused; nothing changes.
    let (st, body) = report(&http, &srv.url, &s1, &op, TARGET, vec![entry(&op, &q1[1], 1.0)]).await;
    assert_eq!(st, 409, "{body}");

    // Device 2, same key, agrees: X wins at the device level.
    let (s2, v2) = open_session(&http, &srv.url, &fp).await;
    assert_eq!(v2["device_key"], key.as_str());
    let q2 = queue(&http, &srv.url, &s2, OP, SHAPE, TARGET).await;
    let (st, body) =
        report(&http, &srv.url, &s2, &op, TARGET, vec![entry(&op, find(&q2, &x), 11.0), entry(&op, find(&q2, &y), 21.0)]).await;
    assert_eq!(st, 200, "{body}");
    let b = best(&http, &srv.url, &key, OP, SHAPE, TARGET).await;
    assert_eq!(b["level"], "device", "{b}");
    assert_eq!(b["meta"]["sha256"], x.as_str());
    assert_eq!((b["source"].as_str(), b["confidence"].as_f64()), (Some("elected"), Some(1.0)), "the quorum elected it: {b}");

    // A third device of the same key gets X on its first request.
    let (_, v3) = open_session(&http, &srv.url, &fp).await;
    let b = best(&http, &srv.url, v3["device_key"].as_str().unwrap(), OP, SHAPE, TARGET).await;
    assert_eq!((b["level"].as_str(), b["meta"]["sha256"].as_str()), (Some("device"), Some(x.as_str())));

    // New keys fall back: same architecture, same vendor, then nothing.
    let (_, va) = open_session(&http, &srv.url, &gpu_fingerprint("NVIDIA", "hopper", "H200")).await;
    assert_ne!(va["device_key"], key.as_str());
    assert_eq!(va["arch_key"], v1["arch_key"]);
    let b = best(&http, &srv.url, va["device_key"].as_str().unwrap(), OP, SHAPE, TARGET).await;
    assert_eq!((b["level"].as_str(), b["meta"]["sha256"].as_str()), (Some("arch"), Some(x.as_str())), "{b}");
    let (_, vv) = open_session(&http, &srv.url, &gpu_fingerprint("NVIDIA", "ampere", "A100")).await;
    assert_ne!(vv["arch_key"], v1["arch_key"]);
    let b = best(&http, &srv.url, vv["device_key"].as_str().unwrap(), OP, SHAPE, TARGET).await;
    assert_eq!((b["level"].as_str(), b["meta"]["sha256"].as_str()), (Some("vendor"), Some(x.as_str())), "{b}");
    let (_, vo) = open_session(&http, &srv.url, &gpu_fingerprint("AMD", "rdna-3", "7900")).await;
    let b = best(&http, &srv.url, vo["device_key"].as_str().unwrap(), OP, SHAPE, TARGET).await;
    assert_eq!((b["level"].as_str(), b["source"].as_str()), (Some("default"), Some("predicted")), "{b}");
    // A device key the server never saw still answers, with the default.
    let b = best(&http, &srv.url, "nobody/knows/this", OP, SHAPE, TARGET).await;
    assert_eq!(b["level"], "default");
    // Without a device key: the portable default.
    let b = best(&http, &srv.url, "", OP, SHAPE, TARGET).await;
    assert_eq!((b["level"].as_str(), b["source"].as_str()), (Some("default"), Some("portable")), "{b}");

    // The winner follows the votes: three more devices find Y clearly faster.
    for i in 0..3 {
        let (s, _) = open_session(&http, &srv.url, &fp).await;
        let q = queue(&http, &srv.url, &s, OP, SHAPE, TARGET).await;
        let (st, body) =
            report(&http, &srv.url, &s, &op, TARGET, vec![entry(&op, find(&q, &y), 5.0 + i as f64 * 0.01), entry(&op, find(&q, &x), 11.0)])
                .await;
        assert_eq!(st, 200, "{body}");
    }
    let b = best(&http, &srv.url, &key, OP, SHAPE, TARGET).await;
    assert_eq!((b["level"].as_str(), b["meta"]["sha256"].as_str()), (Some("device"), Some(y.as_str())), "{b}");

    // The queue of a similar device now starts with the crowd's winners.
    let (s7, _) = open_session(&http, &srv.url, &gpu_fingerprint("NVIDIA", "hopper", "H200")).await;
    let q7 = queue(&http, &srv.url, &s7, OP, SHAPE, TARGET).await;
    let mut seen: Vec<&str> = q7.iter().map(|c| c["sha256"].as_str().unwrap()).collect();
    let n = seen.len();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), n, "the queue repeats a kernel");

    // The dashboard and metrics show what happened.
    let dash = http.get(format!("{}/dashboard", srv.url)).send().await.unwrap().text().await.unwrap();
    assert!(dash.contains(&key), "the dashboard lists the device key");
    let metrics = http.get(format!("{}/metrics", srv.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("webtune_reports_accepted_total 5"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crowd_votes_and_fallback_on_sqlite() {
    scenario(sqlite_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn crowd_votes_and_fallback_on_postgres() {
    scenario(postgres_url().await).await;
}

/// Every kernel of a queue is distinct (issue 20's bug, tried as a new user
/// would): at an odd shape whose schedules compile to identical bytes, from
/// an empty database, and at a key with a winner, whose kernel is in the
/// exploitation set and in the lite space. A report of the whole queue's
/// kernels is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_streams_each_kernel_once() {
    let srv = Server::start(&sqlite_url(), &["--quorum", "1"]);
    let http = client();
    let fp = serde_json::json!({"target": "wasm", "simd": true, "relaxedSimd": true, "hardwareConcurrency": 2, "os": "linux"});
    let distinct = |q: &[Value]| {
        let mut shas: Vec<&str> = q.iter().map(|c| c["sha256"].as_str().unwrap()).collect();
        shas.sort_unstable();
        shas.dedup();
        shas.len()
    };
    for shape in ["61,67,71", "48,64,40"] {
        let op = Op::parse("matmul", shape).unwrap();
        let (s1, _) = open_session(&http, &srv.url, &fp).await;
        let q1 = queue(&http, &srv.url, &s1, "matmul", shape, "wasm").await;
        assert!(q1.len() >= 3, "{shape}: {} candidates", q1.len());
        assert_eq!(distinct(&q1), q1.len(), "{shape}: a kernel streamed twice from an empty database");
        // Report the first three: quorum 1 elects a winner at this key.
        let entries = q1.iter().take(3).enumerate().map(|(i, c)| entry(&op, c, 10.0 + i as f64)).collect();
        let (st, body) = report(&http, &srv.url, &s1, &op, "wasm", entries).await;
        assert_eq!(st, 200, "{shape}: {body}");
        // The next session's queue holds the winner once, not twice.
        let (s2, _) = open_session(&http, &srv.url, &fp).await;
        let q2 = queue(&http, &srv.url, &s2, "matmul", shape, "wasm").await;
        assert_eq!(distinct(&q2), q2.len(), "{shape}: a kernel streamed twice at a key with a winner");
        assert!(q2.iter().any(|c| c["sha256"] == q1[0]["sha256"]), "{shape}: the winner is not in the queue");
        let entries = q2.iter().take(5).enumerate().map(|(i, c)| entry(&op, c, 10.0 + i as f64)).collect();
        let (st, body) = report(&http, &srv.url, &s2, &op, "wasm", entries).await;
        assert_eq!(st, 200, "{shape}: {body}");
    }
}

/// A threaded winner, voted by a client that runs Wasm threads, answers that
/// client and its twins; a client of the same architecture without threads
/// (another arch-key sharer) gets a kernel it can run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_threaded_winner_never_answers_a_client_without_threads() {
    let srv = Server::start(&sqlite_url(), &["--quorum", "1"]);
    let http = client();
    let fp = |threads: bool| {
        json!({ "target": "wasm", "hardwareConcurrency": 4, "simd": true, "relaxedSimd": true, "threads": threads,
                "cpuArchitecture": "x86", "os": "Linux", "browser": { "name": "Chrome", "version": "131.0" } })
    };
    let (mt, mt_session) = open_session(&http, &srv.url, &fp(true)).await;
    let (_, st_session) = open_session(&http, &srv.url, &fp(false)).await;
    let (mt_key, st_key) = (mt_session["device_key"].as_str().unwrap(), st_session["device_key"].as_str().unwrap());
    assert_ne!(mt_key, st_key);
    assert_eq!(mt_session["arch_key"], st_session["arch_key"], "both share the arch key");

    let (opname, shape) = ("matmul", "384,768,768");
    let op = Op::parse(opname, shape).unwrap();
    let cands = queue(&http, &srv.url, &mt, opname, shape, "wasm").await;
    let threaded =
        cands.iter().find(|c| c["meta"]["threads"].as_u64().unwrap_or(1) > 1).expect("a threaded candidate for a 4-thread client");
    // 453 MFLOP in 10 ms: 45 GFLOP/s, plausible for a CPU.
    let (status, body) = report(&http, &srv.url, &mt, &op, "wasm", vec![entry(&op, threaded, 10_000.0)]).await;
    assert_eq!(status, 200, "{body}");

    let b = best(&http, &srv.url, mt_key, opname, shape, "wasm").await;
    assert_eq!(b["level"], "device");
    assert_eq!(b["meta"]["sha256"], threaded["sha256"]);
    let b = best(&http, &srv.url, st_key, opname, shape, "wasm").await;
    assert!(b["meta"]["threads"].as_u64().unwrap_or(1) == 1, "a client without threads was given {b}");
    assert_eq!(b["level"], "default");
}

/// An f16 op is an op of its own: its queue streams f16 kernels with
/// tickets for it, a report of f16-rounded outputs passes the server's check
/// (and one off by more than an f16 rounding is refused), its winner answers
/// the f16 op only, and no Wasm f16 kernel exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f16_ops_are_kernels_of_their_own() {
    let srv = Server::start(&sqlite_url(), &["--quorum", "1"]);
    let http = client();
    let half = Op::parse("matmul+f16", SHAPE).unwrap();
    let (s, v) = open_session(&http, &srv.url, &gpu_fingerprint("NVIDIA", "hopper", "H100 80GB HBM3")).await;
    let key = v["device_key"].as_str().unwrap().to_string();
    let q = queue(&http, &srv.url, &s, "matmul+f16", SHAPE, TARGET).await;
    assert!(q.len() >= 2);
    for c in &q {
        assert!(c["ticket"].as_str().unwrap().starts_with("v2.matmul+f16."), "{}", c["ticket"]);
        let text = http.get(format!("{}{}", srv.url, c["url"].as_str().unwrap())).send().await.unwrap().text().await.unwrap();
        assert!(text.starts_with("enable f16;"), "{}", &text[..40]);
    }
    let f32_shas: Vec<Value> = queue(&http, &srv.url, &s, OP, SHAPE, TARGET).await.iter().map(|c| c["sha256"].clone()).collect();
    assert!(q.iter().all(|c| !f32_shas.contains(&c["sha256"])), "an f16 queue shares a kernel with the f32 one");
    // What an f16 kernel returns: each output rounded to f16.
    let rounded = |c: &Value, off: f32| -> Value {
        let mut e = entry(&half, c, 10.0);
        let samples: Vec<f32> = true_samples(&half, c).iter().map(|&x| webtune_compiler::reference::round_f16(x) * (1.0 + off)).collect();
        e["samples"] = json!(samples);
        e
    };
    let (st, body) = report(&http, &srv.url, &s, &half, TARGET, vec![rounded(&q[0], 0.05)]).await;
    assert_eq!(st, 422, "5% off passed the f16 check: {body}");
    let (st, body) = report(&http, &srv.url, &s, &half, TARGET, vec![rounded(&q[1], 0.0)]).await;
    assert_eq!(st, 200, "{body}");
    let b = best(&http, &srv.url, &key, "matmul+f16", SHAPE, TARGET).await;
    assert_eq!((b["level"].as_str(), &b["meta"]["sha256"]), (Some("device"), &q[1]["sha256"]), "{b}");
    assert_eq!(best(&http, &srv.url, &key, OP, SHAPE, TARGET).await["level"], "default");
    let r = http
        .get(format!("{}/v1/kernels/best", srv.url))
        .query(&[("device_key", key.as_str()), ("op", "matmul+f16"), ("shape", SHAPE), ("target", "wasm")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

/// Issue 37: with no crowd data, a device class's first answer is the first
/// candidate of its own lite space (its queue's first on a fresh database)
/// that every device of its key can load, per class, on WebGPU and on Wasm;
/// compiled once and stored like any other kernel; the portable default
/// only on `--first-answer portable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_device_class_gets_the_kernel_its_lite_space_predicts() {
    let srv = Server::start(&sqlite_url(), &["--quorum", "2"]);
    let http = client();
    // The queue's first candidate that needs no subgroups (a fresh
    // database has no winners, so the queue is the lite space in order).
    let first_loadable = |q: &[Value]| -> String {
        q.iter().find(|c| c["meta"]["min_subgroup_size"].is_null()).expect("a candidate without subgroups")["sha256"]
            .as_str()
            .unwrap()
            .into()
    };
    let mut predicted = std::collections::BTreeMap::new();
    for (name, fp, op, shape) in [
        ("h100", gpu_fingerprint("NVIDIA", "hopper", "H100 80GB HBM3"), "matmul", "128,256,256"),
        ("rdna3", gpu_fingerprint("AMD", "rdna-3", "7900"), "matmul", "128,256,256"),
        // The H100's q4 matrix-vector space leads with a subgroup kernel,
        // which a browser without `subgroups` cannot load: its twin answers.
        ("h100-q4", gpu_fingerprint("NVIDIA", "hopper", "H100 80GB HBM3"), "matmul_q4", "1,1024,256"),
    ] {
        let (s, v) = open_session(&http, &srv.url, &fp).await;
        let key = v["device_key"].as_str().unwrap();
        let b = best(&http, &srv.url, key, op, shape, "wgsl").await;
        assert_eq!((b["level"].as_str(), b["source"].as_str()), (Some("default"), Some("predicted")), "{name}: {b}");
        let q = queue(&http, &srv.url, &s, op, shape, "wgsl").await;
        let sha = b["meta"]["sha256"].as_str().unwrap().to_string();
        assert_eq!(sha, first_loadable(&q), "{name}: not the lite space's first loadable candidate");
        if name == "h100-q4" {
            assert!(!q[0]["meta"]["min_subgroup_size"].is_null(), "the q4 space no longer leads with a subgroup kernel: {}", q[0]["meta"]);
        }
        let text = http.get(format!("{}{}", srv.url, b["url"].as_str().unwrap())).send().await.unwrap().text().await.unwrap();
        assert!(!text.contains("enable subgroups"), "{name}: the prediction needs subgroups");
        webtune_compiler::wgsl::validate(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Asked again (another device of the class): the same kernel.
        assert_eq!(best(&http, &srv.url, key, op, shape, "wgsl").await["meta"]["sha256"], sha.as_str());
        predicted.insert(name, sha);
    }
    assert_ne!(predicted["h100"], predicted["rdna3"], "two architectures whose spaces differ get different first kernels");

    // Wasm: relaxed SIMD only where the key has it, threads only where it runs them.
    let cpu = |relaxed: bool, threads: bool| {
        json!({"target": "wasm", "hardwareConcurrency": 4, "simd": true, "relaxedSimd": relaxed, "threads": threads,
               "cpuArchitecture": "x86", "os": "Linux", "browser": {"name": "Chrome", "version": "131.0"}})
    };
    let (op, shape) = ("matmul", "64,256,256");
    for (relaxed, threads) in [(false, false), (true, false), (true, true)] {
        let (s, v) = open_session(&http, &srv.url, &cpu(relaxed, threads)).await;
        let key = v["device_key"].as_str().unwrap();
        let b = best(&http, &srv.url, key, op, shape, "wasm").await;
        assert_eq!(b["source"], "predicted", "{key}: {b}");
        let q = queue(&http, &srv.url, &s, op, shape, "wasm").await;
        assert_eq!(b["meta"]["sha256"], q[0]["sha256"], "{key}: not its lite space's first candidate");
        let threads_used = b["meta"]["threads"].as_u64().unwrap_or(1);
        assert!(threads || threads_used == 1, "{key}: {threads_used} threads for a client without threads");
        let bytes = http.get(format!("{}{}", srv.url, b["url"].as_str().unwrap())).send().await.unwrap().bytes().await.unwrap();
        let mut features = wasmparser::WasmFeatures::WASM2;
        if relaxed {
            features |= wasmparser::WasmFeatures::RELAXED_SIMD;
        }
        if threads_used > 1 {
            features |= wasmparser::WasmFeatures::THREADS;
        }
        wasmparser::Validator::new_with_features(features)
            .validate_all(&bytes)
            .unwrap_or_else(|e| panic!("{key}: the prediction does not load with this client's features: {e}"));
    }

    // The old answer, on request: the portable default for everyone.
    let old = Server::start(&sqlite_url(), &["--first-answer", "portable"]);
    let (_, v) = open_session(&http, &old.url, &gpu_fingerprint("NVIDIA", "hopper", "H100 80GB HBM3")).await;
    let b = best(&http, &old.url, v["device_key"].as_str().unwrap(), "matmul", "128,256,256", "wgsl").await;
    let portable = best(&http, &old.url, "", "matmul", "128,256,256", "wgsl").await;
    assert_eq!((b["source"].as_str(), &b["meta"]["sha256"]), (Some("portable"), &portable["meta"]["sha256"]), "{b}");
}

/// The GGUF formats' ops (`matmul_q4_1`, `matmul_q8_0`) have WGSL kernels:
/// a WebGPU session gets a queue of them and a predicted first kernel whose
/// text validates and binds the op's arguments in ABI order (A, W, D, Mn,
/// C; A, W, D, C); matmul_i16 on WGSL stays a 400 that says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gguf_ops_are_served_for_webgpu() {
    let srv = Server::start(&sqlite_url(), &[]);
    let http = client();
    let (s, v) = open_session(&http, &srv.url, &gpu_fingerprint("NVIDIA", "hopper", "H100 80GB HBM3")).await;
    let key = v["device_key"].as_str().unwrap();
    for (op, shape, args) in [
        ("matmul_q4_1", "1,576,960", vec!["A", "W", "D", "Mn", "C"]),
        ("matmul_q8_0", "1,576,49152", vec!["A", "W", "D", "C"]),
        ("matmul_q4_1", "64,576,1536", vec!["A", "W", "D", "Mn", "C"]),
    ] {
        let q = queue(&http, &srv.url, &s, op, shape, "wgsl").await;
        assert!(!q.is_empty(), "{op} {shape}: an empty queue");
        let b = best(&http, &srv.url, key, op, shape, "wgsl").await;
        let names: Vec<&str> = b["meta"]["args"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
        assert_eq!(names, args, "{op}: {b}");
        assert_eq!(b["meta"]["target"], "wgsl");
        let text = http.get(format!("{}{}", srv.url, b["url"].as_str().unwrap())).send().await.unwrap().text().await.unwrap();
        webtune_compiler::wgsl::validate(&text).unwrap_or_else(|e| panic!("{op} {shape}: {e}"));
        assert_eq!(text.matches("@group(0) @binding(").count(), args.len(), "{op}: {text}");
    }
    let r = http
        .get(format!("{}/v1/kernels/best", srv.url))
        .query(&[("device_key", key), ("op", "matmul_i16"), ("shape", "1,64,64"), ("target", "wgsl")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("runs on wasm only"));
}
