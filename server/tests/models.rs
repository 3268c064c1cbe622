//! The model endpoints on the in-process router over a store holding a
//! small generated BERT: the list, the manifest (ETag, 304), the blobs
//! (immutable, ETag, 304, CORS, streamed whole), and clear 404s. Then the
//! command line: `webtune model import` and `model list`, and `webtune
//! serve --models-dir` serving what was imported.

mod common;

use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;
use webtune::http::{App, Config, router};
use webtune_models::Store;
use webtune_models::fixture::{config, model_files, temp_dir, tensors, write_files};

async fn app(models_dir: Option<std::path::PathBuf>) -> Arc<App> {
    let db = temp_dir("db").join("db.sqlite");
    App::new(&format!("sqlite://{}", db.display()), Config { models_dir, ..Config::default() }).await.unwrap()
}

/// (status, headers, body) of one GET with optional If-None-Match.
async fn get(app: &Arc<App>, path: &str, if_none_match: Option<&str>) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let mut req = Request::get(path);
    if let Some(tag) = if_none_match {
        req = req.header("if-none-match", tag);
    }
    let res = router(app.clone()).oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
    let (parts, body) = res.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap().to_vec();
    (parts.status, parts.headers, bytes)
}

fn error_of(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap();
    v["error"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_store_is_served_with_etags_and_clear_404s() {
    let src = temp_dir("src").join("tiny");
    write_files(&src, &model_files(&config(), &tensors(), true));
    let store = Store::new(temp_dir("store"));
    let imported = webtune_models::import(&src, Some("tiny-bert"), &store, &mut |_: &str| {}).unwrap();
    let app = app(Some(store.dir().to_path_buf())).await;

    // The list.
    let (st, h, body) = get(&app, "/v1/models", None).await;
    assert_eq!(st, 200);
    assert_eq!(h["access-control-allow-origin"], "*");
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        list,
        serde_json::json!({"models": [{"name": "tiny-bert", "architecture": "bert", "task": "feature-extraction", "hidden_size": 32, "layers": 2,
                                       "max_seq_length": 32, "manifest_sha256": imported.manifest_sha256}]})
    );

    // The manifest: the file's bytes, its hash as ETag, revalidated.
    let (st, h, body) = get(&app, "/v1/models/tiny-bert", None).await;
    assert_eq!(st, 200);
    assert_eq!(body, std::fs::read(&imported.manifest_path).unwrap());
    let etag = h["etag"].to_str().unwrap().to_string();
    assert_eq!(etag, format!("\"{}\"", imported.manifest_sha256));
    assert_eq!(h["cache-control"], "no-cache");
    assert_eq!(h["content-type"], "application/json");
    let m: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(m["format"], 1);
    let (st, _, body) = get(&app, "/v1/models/tiny-bert", Some(&etag)).await;
    assert_eq!((st, body.len()), (StatusCode::NOT_MODIFIED, 0));
    let (st, _, _) = get(&app, "/v1/models/tiny-bert", Some("\"0000\"")).await;
    assert_eq!(st, 200, "a stale ETag gets the manifest");

    // The blobs, from the URLs the manifest gives.
    for (key, ctype) in [("weights", "application/octet-stream"), ("tokenizer", "application/json")] {
        let url = m[key]["url"].as_str().unwrap();
        let sha = m[key]["sha256"].as_str().unwrap();
        let (st, h, body) = get(&app, url, None).await;
        assert_eq!(st, 200, "{url}");
        assert_eq!(body, std::fs::read(store.blob_path(sha).unwrap()).unwrap());
        assert_eq!(body.len() as u64, m[key]["bytes"].as_u64().unwrap());
        assert_eq!(h["content-length"].to_str().unwrap(), body.len().to_string());
        assert_eq!(h["content-type"], ctype);
        assert_eq!(h["cache-control"], "public, max-age=31536000, immutable");
        assert_eq!(h["access-control-allow-origin"], "*");
        assert_eq!(h["etag"].to_str().unwrap(), format!("\"{sha}\""));
        let (st, h, body) = get(&app, url, Some(&format!("\"{sha}\""))).await;
        assert_eq!((st, body.len()), (StatusCode::NOT_MODIFIED, 0));
        assert_eq!(h["access-control-allow-origin"], "*");
    }
    let weights_sha = m["weights"]["sha256"].as_str().unwrap().to_string();

    // 404s that say what to do.
    let (st, _, body) = get(&app, "/v1/models/no-such-model", None).await;
    assert_eq!(st, 404);
    assert_eq!(error_of(&body), "no model `no-such-model` on this server; GET /v1/models lists them, `webtune model import` adds one");
    let (st, _, body) = get(&app, &format!("/v1/models/no-such-model/blobs/{weights_sha}"), None).await;
    assert_eq!((st, error_of(&body).starts_with("no model `no-such-model`")), (StatusCode::NOT_FOUND, true));
    // A blob in the store that this manifest does not list is never served under its name.
    let other = "ab".repeat(32);
    std::fs::write(store.blob_path(&other).unwrap(), b"not listed").unwrap();
    let (st, _, body) = get(&app, &format!("/v1/models/tiny-bert/blobs/{other}"), None).await;
    assert_eq!(st, 404);
    assert_eq!(
        error_of(&body),
        format!("model `tiny-bert` has no blob {other}; its manifest (GET /v1/models/tiny-bert) lists the weights and tokenizer blobs")
    );
    let (st, _, body) = get(&app, "/v1/models/tiny-bert/blobs/..%2F..%2Fetc%2Fpasswd", None).await;
    assert_eq!(st, 400, "{}", String::from_utf8_lossy(&body));
    let (st, _, _) = get(&app, "/v1/models/..%2Fmodels%2Ftiny-bert", None).await;
    assert_eq!(st, 404);

    // A re-import under the same name replaces the manifest: a new ETag.
    let mut c = config();
    c["layer_norm_eps"] = serde_json::json!(1e-5);
    write_files(&src, &model_files(&c, &tensors(), true));
    webtune_models::import(&src, Some("tiny-bert"), &store, &mut |_: &str| {}).unwrap();
    let (st, h, _) = get(&app, "/v1/models/tiny-bert", Some(&etag)).await;
    assert_eq!(st, 200);
    assert_ne!(h["etag"].to_str().unwrap(), etag);

    // The OpenAPI document describes the three endpoints.
    let (_, _, body) = get(&app, "/v1/openapi.json", None).await;
    let spec: Value = serde_json::from_slice(&body).unwrap();
    for path in ["/v1/models", "/v1/models/{name}", "/v1/models/{name}/blobs/{sha256}", "/v1/models/{name}/plan"] {
        assert!(spec["paths"][path]["get"]["responses"]["200"].is_object(), "{path} is not in the OpenAPI document");
    }
    assert!(spec["paths"]["/v1/models/{name}/latency"]["post"]["responses"]["201"].is_object());

    // A server without a store lists nothing and finds nothing.
    let bare = app_without_store().await;
    let (st, _, body) = get(&bare, "/v1/models", None).await;
    assert_eq!((st, serde_json::from_slice::<Value>(&body).unwrap()), (StatusCode::OK, serde_json::json!({"models": []})));
    let (st, _, _) = get(&bare, "/v1/models/tiny-bert", None).await;
    assert_eq!(st, 404);
    let _ = std::fs::remove_dir_all(store.dir());
}

/// A GGUF decoder imported beside a BERT encoder: both listed with their
/// task, the decoder's format-2 manifest and blobs served, and its plan
/// (a_decoder_reports_its_decode_step_latency_and_gets_a_plan has more).
#[tokio::test]
async fn a_decoder_is_listed_and_served_beside_an_encoder() {
    let store = Store::new(temp_dir("store"));
    let src = temp_dir("src").join("tiny");
    write_files(&src, &model_files(&config(), &tensors(), true));
    webtune_models::import(&src, Some("tiny-bert"), &store, &mut |_: &str| {}).unwrap();
    let gguf = temp_dir("gguf").join("tiny.gguf");
    std::fs::write(&gguf, webtune_models::gguf_fixture::tiny_llama(true).bytes()).unwrap();
    let imported = webtune_models::import(&gguf, Some("tiny-llama"), &store, &mut |_: &str| {}).unwrap();
    let app = app(Some(store.dir().to_path_buf())).await;

    let (st, _, body) = get(&app, "/v1/models", None).await;
    assert_eq!(st, 200);
    let list: Value = serde_json::from_slice(&body).unwrap();
    let kinds: Vec<(&str, &str, &str)> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m["architecture"].as_str().unwrap(), m["task"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [("tiny-bert", "bert", "feature-extraction"), ("tiny-llama", "llama", "text-generation")]);
    assert_eq!(list["models"][1]["max_seq_length"], 256);
    assert_eq!(list["models"][1]["manifest_sha256"], imported.manifest_sha256.as_str());

    let (st, _, body) = get(&app, "/v1/models/tiny-llama", None).await;
    assert_eq!((st, body.clone()), (StatusCode::OK, std::fs::read(&imported.manifest_path).unwrap()));
    let m: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((m["format"].as_u64(), m["task"].as_str()), (Some(2), Some("text-generation")));
    for (key, ctype) in [("weights", "application/octet-stream"), ("tokenizer", "application/json")] {
        let (st, h, body) = get(&app, m[key]["url"].as_str().unwrap(), None).await;
        assert_eq!((st, h["content-type"].to_str().unwrap()), (StatusCode::OK, ctype));
        assert_eq!(body, std::fs::read(store.blob_path(m[key]["sha256"].as_str().unwrap()).unwrap()).unwrap());
    }
    let (st, _, body) = get(&app, "/v1/models/tiny-llama/plan?device_key=cpu-x", None).await;
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
    // The decoder graph: derived from the manifest, the same JSON the
    // models crate makes; an encoder has none, an unknown name is a 404.
    let (st, _, body) = get(&app, "/v1/models/tiny-llama/graph", None).await;
    assert_eq!(st, 200);
    let g: webtune_models::graph::DecoderGraph = serde_json::from_slice(&body).unwrap();
    let (_, manifest) = store.manifest("tiny-llama").unwrap().unwrap();
    let webtune_models::ModelManifest::Decoder(manifest) = manifest else { panic!("a decoder") };
    assert_eq!(g, webtune_models::graph::graph_of(&manifest).unwrap());
    assert!(g.steps.iter().any(|s| matches!(s, webtune_models::graph::Step::Attention { .. })));
    let (st, _, body) = get(&app, "/v1/models/tiny-bert/graph", None).await;
    assert_eq!(st, 422);
    assert!(error_of(&body).contains("is an encoder"), "{}", error_of(&body));
    let (st, _, _) = get(&app, "/v1/models/nope/graph", None).await;
    assert_eq!(st, 404);
    let _ = std::fs::remove_dir_all(store.dir());
}

async fn app_without_store() -> Arc<App> {
    app(None).await
}

/// `webtune model import` and `model list` through the binary, and `serve
/// --models-dir` serving the result.
#[tokio::test]
async fn the_command_line_imports_lists_and_serves() {
    let src = temp_dir("cli-src").join("Tiny_BERT");
    write_files(&src, &model_files(&config(), &tensors(), true));
    let work = temp_dir("cli");
    let db_url = format!("sqlite://{}", work.join("db.sqlite").display());
    let run = |args: &[&str]| std::process::Command::new(common::webtune_bin()).args(args).output().unwrap();

    // The default store is next to the SQLite file.
    let out = run(&["model", "import", src.to_str().unwrap(), "--database-url", &db_url]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("imported tiny-bert (2 layers, hidden 32, 29 tensors"), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("checking model.safetensors"), "progress goes to stderr");
    assert!(work.join("webtune-models/models/tiny-bert.json").is_file());
    let out = run(&["model", "list", "--database-url", &db_url]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("tiny-bert\tbert\tfeature-extraction\tlayers 2\thidden 32\tmax_seq_length 32\t"), "{stdout}");

    // A bad model: status 1 and one line on stderr.
    let mut c = config();
    c["architectures"] = serde_json::json!(["GPT2Model"]);
    c["model_type"] = serde_json::json!("gpt2");
    let bad = temp_dir("cli-bad");
    write_files(&bad, &model_files(&c, &tensors(), true));
    let out = run(&["model", "import", bad.to_str().unwrap(), "--models-dir", work.join("other").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.lines().last().unwrap(),
        "webtune: config.json: architecture `GPT2Model` is not supported; webtune imports BERT-family encoders (architectures [\"BertModel\"] or model_type \"bert\")"
    );

    // `serve --models-dir` serves the store.
    let srv = common::Server::start(&db_url, &["--models-dir", work.join("webtune-models").to_str().unwrap()]);
    let list: Value = common::client().get(format!("{}/v1/models", srv.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(list["models"][0]["name"], "tiny-bert");
    drop(srv);
    let _ = std::fs::remove_dir_all(&work);
}

/// A request with a JSON body; (status, body as JSON).
async fn send(app: &Arc<App>, method: &str, path: &str, body: Value) -> (StatusCode, Value) {
    let req =
        Request::builder().method(method).uri(path).header("content-type", "application/json").body(Body::from(body.to_string())).unwrap();
    let res = router(app.clone()).oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = to_bytes(res.into_body(), usize::MAX).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn session(app: &Arc<App>, device: &str) -> (String, String) {
    let (st, v) =
        send(app, "POST", "/v1/sessions", serde_json::json!({"fingerprint": common::gpu_fingerprint("NVIDIA", "hopper", device)})).await;
    assert_eq!(st, 201, "{v}");
    (v["session_id"].as_str().unwrap().to_string(), v["device_key"].as_str().unwrap().to_string())
}

async fn report_latency(app: &Arc<App>, sid: &str, target: &str, ms: f64) -> (StatusCode, Value) {
    send(
        app,
        "POST",
        "/v1/models/tiny-bert/latency",
        serde_json::json!({"session_id": sid, "target": target, "batch": 2, "seq_len": 16, "median_ms": ms, "runs": 10}),
    )
    .await
}

async fn plan(app: &Arc<App>, key: &str) -> Value {
    let (st, _, body) = get(app, &format!("/v1/models/tiny-bert/plan?device_key={key}&batch=2&seq_len=16"), None).await;
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn the_plan_follows_the_measured_latencies_per_device_class() {
    let src = temp_dir("plan-src").join("tiny");
    write_files(&src, &model_files(&config(), &tensors(), true));
    let store = Store::new(temp_dir("plan-store"));
    webtune_models::import(&src, Some("tiny-bert"), &store, &mut |_: &str| {}).unwrap();
    let app = app(Some(store.dir().to_path_buf())).await; // quorum 2 (the default)
    let (s1, key) = session(&app, "H100 80GB HBM3").await;
    let (s2, key2) = session(&app, "H100 80GB HBM3").await;
    assert_eq!(key, key2);

    // Nothing measured: no target, and why; the kernels of one layer.
    let p = plan(&app, &key).await;
    assert_eq!(p["target"], Value::Null);
    assert!(p["reason"].as_str().unwrap().starts_with("no latency reports for tiny-bert at batch 2, seq_len 16"), "{p}");
    let kernels: Vec<(String, Value)> =
        p["kernels"].as_array().unwrap().iter().map(|k| (k["name"].as_str().unwrap().to_string(), k["shape"].clone())).collect();
    assert_eq!(
        kernels,
        [
            ("qkv", [32, 32, 96].as_slice()),
            ("scores", &[8, 16, 8, 16]),
            ("context", &[8, 16, 16, 8]),
            ("attn_out", &[32, 32, 32]),
            ("ffn_in", &[32, 32, 64]),
            ("ffn_out", &[32, 64, 32])
        ]
        .map(|(n, s)| (n.to_string(), serde_json::json!(s)))
    );
    assert_eq!(p["layers"], 2);
    assert_eq!(p["kernels"][1]["best"]["webgpu"], format!("/v1/kernels/best?device_key={key}&op=batch_matmul&shape=8,16,8,16&target=wgsl"));
    // The FFN's first product is the fused kernel the runtime runs, its `+` escaped.
    assert_eq!(p["kernels"][4]["op"], "matmul+bias+gelu");
    assert_eq!(
        p["kernels"][4]["best"]["wasm"],
        format!("/v1/kernels/best?device_key={key}&op=matmul%2Bbias%2Bgelu&shape=32,32,64&target=wasm")
    );

    // Reports: the device key comes from the session.
    let (st, v) = report_latency(&app, &s1, "wasm", 60.0).await;
    assert_eq!((st, v["device_key"].as_str()), (StatusCode::CREATED, Some(key.as_str())), "{v}");
    report_latency(&app, &s1, "webgpu", 30.0).await;
    // One session per target is below the quorum of 2.
    let p = plan(&app, &key).await;
    assert_eq!(p["target"], Value::Null);
    assert!(p["reason"].as_str().unwrap().starts_with("not enough measurements at batch 2, seq_len 16 on device"), "{p}");
    report_latency(&app, &s2, "wasm", 70.0).await;
    // Session 2's webgpu is slow; a session reporting many times counts once.
    for _ in 0..5 {
        report_latency(&app, &s2, "webgpu", 500.0).await;
    }
    let p = plan(&app, &key).await;
    assert_eq!((p["target"].as_str(), p["level"].as_str()), (Some("wasm"), Some("device")), "{p}");
    let t: Vec<(String, f64, u64, u64)> = p["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["target"].as_str().unwrap().into(),
                t["median_ms"].as_f64().unwrap(),
                t["sessions"].as_u64().unwrap(),
                t["reports"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(t, [("wasm".to_string(), 65.0, 2, 2), ("webgpu".to_string(), 265.0, 2, 6)]);
    assert_eq!(p["reason"], format!("wasm is faster at batch 2, seq_len 16 on device `{key}`: median 65.0 ms against 265.0 ms"));

    // Another device of the same architecture falls back to the arch key.
    let (_, other) = session(&app, "H100 PCIe").await;
    assert_ne!(other, key);
    let p = plan(&app, &other).await;
    assert_eq!((p["target"].as_str(), p["level"].as_str()), (Some("wasm"), Some("arch")), "{p}");
    // Another batch or length has its own measurements.
    let (_, _, body) = get(&app, &format!("/v1/models/tiny-bert/plan?device_key={key}&batch=1&seq_len=16"), None).await;
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["target"], Value::Null);

    // Refusals that say what to fix.
    let body = |extra: Value| {
        let mut b = serde_json::json!({"session_id": s1, "target": "wasm", "batch": 2, "seq_len": 16, "median_ms": 10.0, "runs": 10});
        b.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        b
    };
    for (extra, status, text) in [
        (serde_json::json!({"device_key": "gpu-x/y/z/-"}), 400, "unknown field `device_key`"),
        (serde_json::json!({"session_id": "0".repeat(32)}), 404, "unknown session"),
        (serde_json::json!({"target": "cuda"}), 422, "target must be `wasm` or `webgpu`, got `cuda`"),
        (serde_json::json!({"seq_len": 33}), 422, "seq_len must be from 1 to the model's max_seq_length 32, got 33"),
        (serde_json::json!({"batch": 0}), 422, "batch must be from 1 to 256 texts, got 0"),
        (serde_json::json!({"median_ms": -1.0}), 422, "median_ms must be a positive number"),
        (serde_json::json!({"runs": 1}), 422, "runs must be from 3"),
    ] {
        let (st, v) = send(&app, "POST", "/v1/models/tiny-bert/latency", body(extra.clone())).await;
        assert_eq!(st.as_u16(), status, "{extra}: {v}");
        assert!(v["error"].as_str().unwrap().contains(text), "{extra}: {v}");
    }
    let (st, v) = send(&app, "POST", "/v1/models/nope/latency", body(serde_json::json!({}))).await;
    assert_eq!(st, 404, "{v}");
    let (st, _, body) = get(&app, "/v1/models/tiny-bert/plan", None).await;
    assert_eq!(st, 400);
    assert!(error_of(&body).starts_with("device_key is required"));
    let _ = std::fs::remove_dir_all(store.dir());
}

/// A decoder's decode-step latencies (batch 1, seq_len the position
/// bucket) are stored and decide its plan like an encoder's; the plan lists
/// the products of one decode step; a batch other than 1 or a bucket past
/// the context is refused in one line.
#[tokio::test]
async fn a_decoder_reports_its_decode_step_latency_and_gets_a_plan() {
    let store = Store::new(temp_dir("dec-plan-store"));
    let gguf = temp_dir("dec-plan-gguf").join("tiny.gguf");
    std::fs::write(&gguf, webtune_models::gguf_fixture::tiny_llama(true).bytes()).unwrap();
    webtune_models::import(&gguf, Some("tiny-llama"), &store, &mut |_: &str| {}).unwrap();
    let app = app(Some(store.dir().to_path_buf())).await; // quorum 2
    let (s1, key) = session(&app, "H100 80GB HBM3").await;
    let (s2, _) = session(&app, "H100 80GB HBM3").await;
    let step = |sid: &str, target: &str, ms: f64| serde_json::json!({"session_id": sid, "target": target, "batch": 1, "seq_len": 64, "median_ms": ms, "runs": 5});
    let plan_url = format!("/v1/models/tiny-llama/plan?device_key={key}&batch=1&seq_len=64");

    let (st, _, body) = get(&app, &plan_url, None).await;
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
    let p: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(p["target"], Value::Null);
    assert!(p["reason"].as_str().unwrap().starts_with("no latency reports for tiny-llama at batch 1, seq_len 64"), "{p}");
    // The products of one decode step, as the graph derives them, once each.
    let (_, manifest) = store.manifest("tiny-llama").unwrap().unwrap();
    let webtune_models::ModelManifest::Decoder(manifest) = manifest else { panic!("a decoder") };
    let g = webtune_models::graph::graph_of(&manifest).unwrap();
    let want: Vec<(String, Value)> = g.products(1).into_iter().map(|k| (k.op, serde_json::json!(k.shape))).collect();
    let got: Vec<(String, Value)> =
        p["kernels"].as_array().unwrap().iter().map(|k| (k["op"].as_str().unwrap().to_string(), k["shape"].clone())).collect();
    assert_eq!(got, want);
    let names: Vec<&str> = p["kernels"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"attn_qkv") && names.contains(&"ffn_down"), "{names:?}");
    assert_eq!(p["layers"].as_u64(), Some(manifest.config.num_layers as u64));

    for (sid, wasm, webgpu) in [(&s1, 20.0, 30.0), (&s2, 22.0, 40.0)] {
        for (target, ms) in [("wasm", wasm), ("webgpu", webgpu)] {
            let (st, v) = send(&app, "POST", "/v1/models/tiny-llama/latency", step(sid, target, ms)).await;
            assert_eq!((st, v["device_key"].as_str()), (StatusCode::CREATED, Some(key.as_str())), "{v}");
        }
    }
    let (_, _, body) = get(&app, &plan_url, None).await;
    let p: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((p["target"].as_str(), p["level"].as_str()), (Some("wasm"), Some("device")), "{p}");
    assert_eq!(p["reason"], format!("wasm is faster at batch 1, seq_len 64 on device `{key}`: median 21.0 ms against 35.0 ms"));

    let context = manifest.config.context_length;
    for (extra, text) in [
        (
            serde_json::json!({"batch": 2}),
            "batch must be 1 for the text-generation model `tiny-llama` (a decode step runs one sequence), got 2".to_string(),
        ),
        (
            serde_json::json!({"seq_len": context + 1}),
            format!(
                "seq_len must be from 1 to the model's context_length {context} (the decode step's position bucket), got {}",
                context + 1
            ),
        ),
        (serde_json::json!({"seq_len": 0}), format!("seq_len must be from 1 to the model's context_length {context}")),
    ] {
        let mut b = step(&s1, "wasm", 10.0);
        b.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let (st, v) = send(&app, "POST", "/v1/models/tiny-llama/latency", b).await;
        assert_eq!(st, 422, "{extra}: {v}");
        assert!(v["error"].as_str().unwrap().starts_with(&text), "{extra}: {v}");
    }
    let (st, _, body) = get(&app, &format!("/v1/models/tiny-llama/plan?device_key={key}&batch=3&seq_len=64"), None).await;
    assert_eq!(st, 422);
    assert!(error_of(&body).starts_with("batch must be 1"), "{}", error_of(&body));
    let _ = std::fs::remove_dir_all(store.dir());
}
