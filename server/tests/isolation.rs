//! Cross-origin isolation on the in-process router: the demo page, the
//! dashboard and every runtime file (a 404 included) carry COOP
//! `same-origin` and COEP `require-corp`, which a page needs for
//! `SharedArrayBuffer` and so Wasm threads; public resources (runtime
//! files, kernel bytes) carry `Cross-Origin-Resource-Policy: cross-origin`
//! so that an isolated page of another origin may load them, and under
//! `--allow-origin` every API response does.

use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::http::{HeaderMap, Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;
use webtune::http::cors::Origins;
use webtune::http::{App, Config, router};
use webtune_models::fixture::temp_dir;

async fn app(cors: Origins) -> Arc<App> {
    let db = temp_dir("isolation").join("db.sqlite");
    App::new(&format!("sqlite://{}", db.display()), Config { cors, ..Config::default() }).await.unwrap()
}

async fn get(app: &Arc<App>, path: &str) -> (StatusCode, HeaderMap, Vec<u8>) {
    let res = router(app.clone()).oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
    let (parts, body) = res.into_parts();
    (parts.status, parts.headers, to_bytes(body, usize::MAX).await.unwrap().to_vec())
}

fn isolated(h: &HeaderMap) -> bool {
    h.get("cross-origin-opener-policy").is_some_and(|v| v == "same-origin")
        && h.get("cross-origin-embedder-policy").is_some_and(|v| v == "require-corp")
}

fn corp(h: &HeaderMap) -> Option<&str> {
    h.get("cross-origin-resource-policy").map(|v| v.to_str().unwrap())
}

#[tokio::test]
async fn pages_and_runtime_files_are_served_cross_origin_isolated() {
    let app = app(Origins::None).await;
    for path in ["/demo", "/web/webtune.js", "/web/demo.js", "/web/webtune.d.ts", "/dashboard", "/"] {
        let (st, h, _) = get(&app, path).await;
        assert_eq!(st, 200, "{path}");
        assert!(isolated(&h), "{path}: {h:?}");
    }
    // An unknown runtime file: the 404 too.
    let (st, h, _) = get(&app, "/web/nope.js").await;
    assert_eq!(st, 404);
    assert!(isolated(&h), "{h:?}");

    // Runtime files are public: an isolated page of any origin may load them.
    let (_, h, _) = get(&app, "/web/webtune.js").await;
    assert_eq!(h["access-control-allow-origin"], "*");
    assert_eq!(corp(&h), Some("cross-origin"));

    // So are kernel bytes.
    let (st, _, body) = get(&app, "/v1/kernels/best?op=matmul&shape=8,8,8&target=wasm").await;
    assert_eq!(st, 200);
    let best: Value = serde_json::from_slice(&body).unwrap();
    let (st, h, _) = get(&app, best["url"].as_str().unwrap()).await;
    assert_eq!(st, 200);
    assert_eq!(corp(&h), Some("cross-origin"));
    // The API itself is same-origin only without --allow-origin: no policy
    // to relax, and no isolation headers on data.
    let (_, h, _) = get(&app, "/v1/rho?target=wasm").await;
    assert_eq!(corp(&h), None);
    assert!(!isolated(&h));
}

#[tokio::test]
async fn allowed_origins_may_load_api_responses_from_isolated_pages() {
    let app = app(Origins::parse(&["https://app.example".into()]).unwrap()).await;
    for path in ["/v1/rho?target=wasm", "/v1/kernels/best?op=matmul&shape=8,8,8&target=wasm", "/healthz", "/v1/nope"] {
        let (_, h, _) = get(&app, path).await;
        assert_eq!(corp(&h), Some("cross-origin"), "{path}: {h:?}");
    }
    let (_, h, _) = get(&app, "/demo").await;
    assert!(isolated(&h));
}
