//! The browser side, served from the binary itself: the client runtime
//! (`/web/webtune.js` and its type declarations) and the demo (`/demo`).
//!
//! The files are built by `npm run build` in `client-runtime/web` and
//! committed under its `dist/`, so `webtune serve` on a fresh machine needs
//! no Node.js; `scripts/test.sh` rebuilds them and fails when the committed
//! copy differs from what the sources give.
//!
//! The demo page and the runtime files are served cross-origin isolated
//! (COOP + COEP, added to every response of their routes, errors included,
//! by [`isolate`]): that gives the demo `performance.now()` at 5 µs instead
//! of 100 µs in Chromium, and `SharedArrayBuffer` for Wasm threads, and a
//! worker started from a runtime file the same isolation. Everything the
//! demo loads is same-origin. The runtime files are public to every origin
//! (`Access-Control-Allow-Origin: *`, and so `Cross-Origin-Resource-Policy:
//! cross-origin`, see `cors`).

use axum::extract::Path;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

macro_rules! dist {
    ($name:literal) => {
        ($name, include_str!(concat!("../../../client-runtime/web/dist/", $name)))
    };
}

/// Every file of `client-runtime/web/dist`, by name. A test checks that the
/// list matches the folder.
const DIST: &[(&str, &str)] = &[
    dist!("webtune.js"),
    dist!("demo.js"),
    dist!("webtune.d.ts"),
    dist!("cache.d.ts"),
    dist!("check.d.ts"),
    dist!("fingerprint.d.ts"),
    dist!("ops.d.ts"),
    dist!("quant.d.ts"),
    dist!("rng.d.ts"),
    dist!("sse.d.ts"),
    dist!("stats.d.ts"),
    dist!("timer.d.ts"),
    dist!("tuner.d.ts"),
    dist!("types.d.ts"),
    dist!("wasm.d.ts"),
    dist!("webgpu.d.ts"),
    dist!("eval-worker.d.ts"),
    dist!("remote.d.ts"),
    dist!("reports.d.ts"),
    dist!("rho.d.ts"),
    dist!("http.d.ts"),
    dist!("encoder.d.ts"),
    dist!("latency.d.ts"),
    dist!("threads.d.ts"),
    dist!("pool-worker.d.ts"),
    dist!("batches.d.ts"),
    dist!("encoder-gpu.d.ts"),
    dist!("bundle.d.ts"),
    dist!("index.d.ts"),
    dist!("decoder.d.ts"),
    dist!("decoder-gpu.d.ts"),
    dist!("sampler.d.ts"),
    dist!("text-generator.d.ts"),
    dist!("plan-guard.d.ts"),
];

const DEMO_HTML: &str = include_str!("../../../client-runtime/web/demo/index.html");

/// The headers that make a document (or a worker) cross-origin isolated,
/// which is what gives it `SharedArrayBuffer` and so Wasm threads:
/// `Cross-Origin-Opener-Policy: same-origin` and
/// `Cross-Origin-Embedder-Policy: require-corp`.
pub(super) fn isolation() -> [(HeaderName, HeaderValue); 2] {
    [
        (HeaderName::from_static("cross-origin-opener-policy"), HeaderValue::from_static("same-origin")),
        (HeaderName::from_static("cross-origin-embedder-policy"), HeaderValue::from_static("require-corp")),
    ]
}

/// Adds [`isolation`] to a response: the layer of every page and runtime
/// file route (`/`, `/dashboard`, `/demo`, `/web/{name}`).
pub(super) async fn isolate(mut res: Response) -> Response {
    for (name, value) in isolation() {
        res.headers_mut().insert(name, value);
    }
    res
}

/// The demo app (a cross-origin isolated page that tunes a small model's kernels).
#[utoipa::path(get, path = "/demo", responses((status = 200, description = "HTML", body = String, content_type = "text/html")))]
pub(super) async fn demo() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-cache")], DEMO_HTML).into_response()
}

/// The browser client runtime (webtune.js, demo.js) and its TypeScript declarations (*.d.ts).
#[utoipa::path(get, path = "/web/{name}", params(("name" = String, Path, example = "webtune.js")), responses(
    (status = 200, description = "The file", content((String = "text/javascript"), (String = "application/typescript"))),
    (status = 404, response = super::protocol::ErrorBody)))]
pub(super) async fn file(Path(name): Path<String>) -> Result<Response, ApiError> {
    let Some((_, body)) = DIST.iter().find(|(n, _)| *n == name) else {
        return Err(ApiError::not_found(format!("no file /web/{name}; the client runtime is /web/webtune.js (types: /web/index.d.ts)")));
    };
    let ctype = if name.ends_with(".js") { "text/javascript; charset=utf-8" } else { "application/typescript; charset=utf-8" };
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, ctype),
            // The files change with the server binary, not by name: revalidate.
            (header::CACHE_CONTROL, "no-cache"),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        *body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dist_file_is_served() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../client-runtime/web/dist");
        let mut on_disk: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        on_disk.sort();
        let mut served: Vec<String> = DIST.iter().map(|(n, _)| n.to_string()).collect();
        served.sort();
        assert_eq!(served, on_disk, "update DIST in server/src/http/web.rs to match client-runtime/web/dist");
    }

    #[test]
    fn the_demo_loads_the_served_module() {
        assert!(DEMO_HTML.contains("src=\"/web/demo.js\""));
        let demo = DIST.iter().find(|(n, _)| *n == "demo.js").unwrap().1;
        assert!(demo.contains("from \"/web/webtune.js\""), "demo.js must import the runtime as an app would");
    }
}
