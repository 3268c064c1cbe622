//! The report endpoint of the real service, in process, on a fresh
//! SQLite database file: arbitrary bytes as the body of
//! `POST /v1/sessions/{id}/reports` for a live session must be answered with
//! a 4xx JSON error (or 200), never a 5xx or a panic. Session creation
//! (`POST /v1/sessions`, the fingerprint decoder) gets the same bytes.
#![no_main]

use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;
use webtune::http::limits::Limits;
use webtune::http::{App, Config, router};

struct World {
    rt: tokio::runtime::Runtime,
    app: Arc<App>,
    session: String,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // Rate limits off: the fuzzer is one very fast client.
        let limits = Limits { per_address_per_min: 1e12, per_session_per_min: 1e12, ..Limits::default() };
        let config = Config { limits, ..Config::default() };
        // A fresh database file per fuzzing process (the service's own URL form).
        let path = std::env::temp_dir().join(format!("webtune-fuzz-{}.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let app = rt.block_on(App::new(&format!("sqlite://{}", path.display()), config)).unwrap();
        let body = r#"{"fingerprint": {"target": "wasm", "hardwareConcurrency": 2, "simd": true, "relaxedSimd": true}}"#;
        let (status, text) = rt.block_on(post(&app, "/v1/sessions", body.as_bytes().to_vec()));
        assert!(status.is_success(), "{status} {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let session = v["session_id"].as_str().expect("session_id").to_string();
        World { rt, app, session }
    })
}

async fn post(app: &Arc<App>, path: &str, body: Vec<u8>) -> (StatusCode, String) {
    let req = Request::post(path).header("content-type", "application/json").body(Body::from(body)).unwrap();
    let res = router(app.clone()).oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fuzz_target!(|data: &[u8]| {
    let w = world();
    for path in [format!("/v1/sessions/{}/reports", w.session), "/v1/sessions".to_string()] {
        let (status, text) = w.rt.block_on(post(&w.app, &path, data.to_vec()));
        assert!(!status.is_server_error(), "{path}: {status} {text}");
        if !status.is_success() {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {status}, body is not JSON ({e}): {text}"));
            assert!(v["error"].is_string(), "{path}: {status} without an error field: {text}");
        }
    }
});
