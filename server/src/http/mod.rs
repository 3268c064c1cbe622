//! The HTTP edge of the tuning service (axum + tokio): it decodes and
//! validates requests, calls the [`crate::service`], and maps its errors to
//! status codes. A kernel request's route: the route table below → one
//! handler (this file, `queue`, `reports`, `models`) → one `Service` method
//! (`crate::service`) → `webtune-kernel-db`.
//!
//! Invariants:
//! - Only this module knows HTTP; the rules (sessions, queues, reports,
//!   lookups, model plans) are the service's, and no handler holds SQL or
//!   an election or fallback rule (`tests/layers.rs` reads these files).
//! - Every failure is an [`error::ApiError`]: a 4xx that says what to fix,
//!   or a 500 whose detail is logged, never sent.
//! - Admission (rate limits, in-flight and queue caps, connection caps) is
//!   counted here, before the service is called.

mod app;
pub(crate) mod charts;
pub mod conn;
pub mod cors;
pub mod error;
pub mod limits;
mod models;
pub mod openapi;
mod pages;
mod queue;
mod reports;
mod rho;
mod web;

/// The wire types, which live with the service that takes and gives them.
pub use crate::service::protocol;
pub use app::{App, Config};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::handler::Handler;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use axum::{Json, Router};
use serde::de::DeserializeOwned;

use crate::service::{Lookup, is_hex};
use error::{ApiError, ApiResult};
use protocol::*;

/// Largest request body accepted, bytes. A top-5 report is under 2 KiB and
/// a fingerprint a few hundred bytes.
pub const BODY_LIMIT: usize = 64 * 1024;

/// Parses a JSON body with an error that names the line, column and field.
fn json_body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> ApiResult<T> {
    let body = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("request body is larger than {BODY_LIMIT} bytes"))
        } else {
            ApiError::new(r.status(), format!("could not read the request body: {}", r.body_text()))
        }
    })?;
    serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

fn query<T>(q: Result<Query<T>, QueryRejection>) -> ApiResult<T> {
    q.map(|Query(t)| t).map_err(|e| {
        ApiError::bad_request(format!("{}; expected ?op=matmul&shape=384,768,768&target=wasm (and device_key= for lookups)", e.body_text()))
    })
}

/// Open a tuning session for a device fingerprint.
#[utoipa::path(post, path = "/v1/sessions", request_body = SessionRequest, responses(
    (status = 201, description = "Session opened", body = SessionResponse),
    (status = 400, response = ErrorBody), (status = 413, response = ErrorBody), (status = 422, response = ErrorBody), (status = 429, response = ErrorBody), (status = 503, response = ErrorBody)))]
async fn create_session(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let req: SessionRequest = json_body(body)?;
    let body = app.service.open_session(&req).await?;
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// The best known kernel for a device key, with the fallback level that answered.
#[utoipa::path(get, path = "/v1/kernels/best", params(KernelQuery), responses(
    (status = 200, description = "Winner or portable default", body = BestResponse),
    (status = 400, response = ErrorBody)))]
async fn best(State(app): State<Arc<App>>, q: Result<Query<KernelQuery>, QueryRejection>) -> ApiResult<Response> {
    let q = query(q)?;
    let device_key = q.device_key.unwrap_or_default();
    let body = app.service.best(&Lookup { device_key: &device_key, op: &q.op, shape: &q.shape, target: &q.target }).await?;
    Ok(json_bytes(body))
}

fn json_bytes(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// Kernel bytes (Wasm binary or WGSL text), content-addressed and immutable.
#[utoipa::path(get, path = "/v1/kernels/{sha256}", params(
    ("sha256" = String, Path, pattern = "^[0-9a-f]{64}$"),
    ("If-None-Match" = Option<String>, Header)), responses(
    (status = 200, description = "The bytes; ETag is the quoted hash", content(
        ("application/wasm"), (String = "text/wgsl"))),
    (status = 304, description = "Not modified"),
    (status = 400, response = ErrorBody), (status = 404, response = ErrorBody)))]
async fn kernel_bytes(State(app): State<Arc<App>>, Path(sha): Path<String>, headers: HeaderMap) -> ApiResult<Response> {
    if !is_hex(&sha, 64) {
        return Err(ApiError::bad_request(format!("`{sha}` is not a kernel hash: give the 64 lower-case hex digits of its SHA-256")));
    }
    let etag = format!("\"{sha}\"");
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == "*" || t.trim().trim_start_matches("W/") == etag));
    let cache = [
        (header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=31536000, immutable")),
        (header::ETAG, HeaderValue::from_str(&etag).map_err(ApiError::internal)?),
        (header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*")),
    ];
    if matches {
        // A content-addressed kernel never changes: the client's copy is good
        // if it exists here at all.
        if app.service.has_kernel(&sha).await? {
            app.service.metrics.not_modified.fetch_add(1, Ordering::Relaxed);
            return Ok((StatusCode::NOT_MODIFIED, cache).into_response());
        }
    }
    let (bytes, target) = app.service.kernel_bytes(&sha).await?;
    let ctype = if target == "wasm" { "application/wasm" } else { "text/wgsl; charset=utf-8" };
    Ok((cache, [(header::CONTENT_TYPE, HeaderValue::from_static(ctype))], bytes).into_response())
}

/// Liveness and database reachability.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "OK"), (status = 503, response = ErrorBody)))]
async fn healthz(State(app): State<Arc<App>>) -> Response {
    match app.service.health().await {
        Ok(backend) => Json(serde_json::json!({"status": "ok", "database": backend})).into_response(),
        Err(e) => {
            eprintln!("webtune serve: health check failed: {e}");
            (StatusCode::SERVICE_UNAVAILABLE, Json(ErrorBody { error: "database unreachable".into() })).into_response()
        }
    }
}

async fn fallback() -> ApiError {
    ApiError::not_found("no such endpoint; GET /v1/openapi.json lists them")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this path; GET /v1/openapi.json lists the methods")
}

/// One route: path, method and the handler that serves it.
type Route = (&'static str, Method, MethodRouter<Arc<App>>);

fn at<H: Handler<T, Arc<App>>, T: 'static>(path: &'static str, method: Method, handler: H) -> Route {
    let filter = MethodFilter::try_from(method.clone()).expect("every route is a GET or a POST");
    (path, method, on(filter, handler))
}

/// Every route the service serves. The router is built from this table
/// alone, so that a test can check that the OpenAPI document lists exactly
/// these paths and methods.
fn routes() -> Vec<Route> {
    vec![
        at("/v1/sessions", Method::POST, create_session),
        at("/v1/sessions/{id}/queue", Method::GET, queue::queue),
        at("/v1/sessions/{id}/reports", Method::POST, reports::report),
        at("/v1/sessions/{id}/reports/batch", Method::POST, reports::report_batch),
        at("/v1/kernels/best", Method::GET, best),
        at("/v1/kernels/{sha256}", Method::GET, kernel_bytes),
        at("/v1/rho", Method::GET, rho::rho),
        at("/v1/models", Method::GET, models::list),
        at("/v1/models/{name}", Method::GET, models::manifest),
        at("/v1/models/{name}/graph", Method::GET, models::graph),
        at("/v1/models/{name}/blobs/{sha256}", Method::GET, models::blob),
        at("/v1/models/{name}/latency", Method::POST, models::latency),
        at("/v1/models/{name}/plan", Method::GET, models::plan),
        at("/v1/openapi.json", Method::GET, openapi::openapi),
        at("/metrics", Method::GET, pages::metrics),
        at("/healthz", Method::GET, healthz),
        isolated(at("/dashboard", Method::GET, pages::dashboard)),
        isolated(at("/", Method::GET, pages::dashboard)),
        isolated(at("/demo", Method::GET, web::demo)),
        isolated(at("/web/{name}", Method::GET, web::file)),
    ]
}

/// A page or runtime file route: every response it gives, errors included,
/// is cross-origin isolated (COOP + COEP, module `web`).
fn isolated((path, method, handler): Route) -> Route {
    (path, method, handler.layer(axum::middleware::map_response(web::isolate)))
}

/// The service's routes over `app`.
pub fn router(app: Arc<App>) -> Router {
    routes()
        .into_iter()
        .fold(Router::new(), |r, (path, _, handler)| r.route(path, handler))
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(app.clone(), limits::admit))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        // Outside admission, so that a request that runs out of time gives
        // its in-flight slot back (module `conn` has the rest of the story).
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, app.config.connections.request_timeout))
        // Inside the CORS layer, so that it sees the handlers' own
        // `Access-Control-Allow-Origin: *` (public resources), not the one
        // `--allow-origin` adds.
        .layer(axum::middleware::map_response_with_state(app.config.cors != cors::Origins::None, cors::resource_policy))
        // Outermost: preflights are answered before any limit is counted.
        .layer(cors::layer(&app.config.cors))
        .with_state(app)
}

/// Serves until Ctrl-C or SIGTERM. Prints the bound address on stdout first,
/// so `--addr 127.0.0.1:0` can be used by tests and scripts.
pub async fn serve(addr: SocketAddr, database_url: &str, config: Config) -> anyhow::Result<()> {
    let app = App::new(database_url, config).await?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    // A closed stdout must not stop the service (the line is for a reader).
    let _ = crate::cli::out(format_args!("webtune: listening on http://{local} (database: {})", redact(database_url)));
    use std::io::Write;
    let _ = std::io::stdout().flush();
    conn::serve(listener, router(app.clone()), app.clone(), shutdown(), std::time::Duration::from_secs(10)).await?;
    app.service.close().await;
    Ok(())
}

/// The URL without its password, for logs.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let user_pass = &url[s + 3..at];
            let user = user_pass.split(':').next().unwrap_or("");
            format!("{}{}@{}", &url[..s + 3], user, &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
