//! The model store over HTTP (docs/model-bundle.md): the list, each
//! bundle's manifest, and its blobs.
//!
//! - The manifest may change (a re-import replaces it), so it is served
//!   `no-cache` with its hash as ETag: clients revalidate and get a 304
//!   while it is unchanged.
//! - Blobs are content-addressed and immutable; a blob is served under a
//!   name only if that name's manifest lists it, and streamed from its file
//!   (the weights are 90 MB), never read whole.
//! - Every answer carries `Access-Control-Allow-Origin: *`, like kernel
//!   bytes: a page on another origin may run the model.
//! - Files are read off the tokio workers (`spawn_blocking`, tokio's file I/O).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use webtune_models::{ModelManifest, Store, is_blob_name, is_model_name};

use super::App;
use super::error::{ApiError, ApiResult};
use super::protocol::{ErrorBody, LatencyRequest, LatencyResponse, ModelList, ModelSummary, PlanQuery, PlanResponse};
use crate::service::models::check_device_key;

/// Bytes read from a blob file per chunk of the response body.
const CHUNK: usize = 256 * 1024;

fn store(app: &App) -> Option<Store> {
    app.config.models_dir.as_ref().map(Store::new)
}

/// Runs store I/O on the blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, webtune_models::ModelError> + Send + 'static) -> ApiResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(ApiError::internal)?.map_err(ApiError::internal)
}

fn unknown_model(name: &str) -> ApiError {
    ApiError::not_found(format!("no model `{name}` on this server; GET /v1/models lists them, `webtune model import` adds one"))
}

/// Whether `If-None-Match` names `etag` (or `*`).
fn matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == "*" || t.trim().trim_start_matches("W/") == etag))
}

fn cors() -> (header::HeaderName, HeaderValue) {
    (header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"))
}

/// A model's manifest (bytes and content, either format), or 404.
async fn read_manifest(app: &App, name: &str) -> ApiResult<(Vec<u8>, ModelManifest)> {
    if !is_model_name(name) {
        return Err(unknown_model(name));
    }
    let Some(store) = store(app) else { return Err(unknown_model(name)) };
    let n = name.to_string();
    blocking(move || store.manifest(&n)).await?.ok_or_else(|| unknown_model(name))
}

/// `GET /v1/models`
/// The model bundles this server serves (docs/model-bundle.md).
#[utoipa::path(get, path = "/v1/models", responses((status = 200, description = "The store's models", body = ModelList)))]
pub async fn list(State(app): State<Arc<App>>) -> ApiResult<Response> {
    let models = match store(&app) {
        None => vec![],
        Some(store) => {
            let (ok, bad) = blocking(move || store.list()).await?;
            for e in bad {
                eprintln!("webtune serve: model store: skipped a manifest: {e}");
            }
            ok.into_iter()
                .map(|l| ModelSummary {
                    name: l.manifest.name().to_string(),
                    architecture: l.manifest.architecture().to_string(),
                    task: l.manifest.task().to_string(),
                    hidden_size: l.manifest.hidden_size(),
                    layers: l.manifest.layers(),
                    max_seq_length: l.manifest.max_seq_length(),
                    manifest_sha256: l.manifest_sha256,
                })
                .collect()
        }
    };
    Ok(([cors(), (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"))], Json(ModelList { models })).into_response())
}

/// `GET /v1/models/{name}`
/// A bundle's manifest (format 1, an encoder; format 2, a decoder): config,
/// blobs and tensor layout; its ETag is the quoted SHA-256 of these bytes,
/// revalidate with If-None-Match.
#[utoipa::path(get, path = "/v1/models/{name}", params(("name" = String, Path, pattern = "^[a-z0-9]([a-z0-9.-]{0,62}[a-z0-9])?$"), ("If-None-Match" = Option<String>, Header)), responses(
    (status = 200, description = "The manifest", body = ModelManifest),
    (status = 304, description = "Not modified"),
    (status = 404, response = ErrorBody)))]
pub async fn manifest(State(app): State<Arc<App>>, Path(name): Path<String>, headers: HeaderMap) -> ApiResult<Response> {
    let (bytes, _) = read_manifest(&app, &name).await?;
    use sha2::Digest;
    let etag = format!("\"{}\"", hex::encode(sha2::Sha256::digest(&bytes)));
    let common = [
        cors(),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::ETAG, HeaderValue::from_str(&etag).map_err(ApiError::internal)?),
    ];
    if matches(&headers, &etag) {
        return Ok((StatusCode::NOT_MODIFIED, common).into_response());
    }
    Ok((common, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response())
}

/// `GET /v1/models/{name}/graph`
/// A decoder's computation as data: the decoder graph (docs/model-bundle.md,
/// format 2) that the browser runtime and `webtune generate` both execute,
/// derived from the manifest.
#[utoipa::path(get, path = "/v1/models/{name}/graph", params(("name" = String, Path, pattern = "^[a-z0-9]([a-z0-9.-]{0,62}[a-z0-9])?$")), responses(
    (status = 200, description = "The decoder graph", body = webtune_models::graph::DecoderGraph),
    (status = 404, response = ErrorBody), (status = 422, response = ErrorBody)))]
pub async fn graph(State(app): State<Arc<App>>, Path(name): Path<String>) -> ApiResult<Response> {
    let (_, m) = read_manifest(&app, &name).await?;
    let ModelManifest::Decoder(m) = m else {
        return Err(ApiError::unprocessable(format!("model `{name}` is an encoder: only decoders (text generation) have a decoder graph")));
    };
    // The importer checked every tensor the graph needs: a failure here is ours.
    let g = webtune_models::graph::graph_of(&m).map_err(ApiError::internal)?;
    Ok(([cors(), (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"))], Json(g)).into_response())
}

/// `GET /v1/models/{name}/blobs/{sha256}`
/// A blob the model's manifest lists (weights: little-endian f32;
/// tokenizer: tokenizer.json), content-addressed and immutable, streamed.
#[utoipa::path(get, path = "/v1/models/{name}/blobs/{sha256}", params(("name" = String, Path, pattern = "^[a-z0-9]([a-z0-9.-]{0,62}[a-z0-9])?$"),
    ("sha256" = String, Path, pattern = "^[0-9a-f]{64}$"), ("If-None-Match" = Option<String>, Header)), responses(
    (status = 200, description = "The bytes; ETag is the quoted hash", content(
        ("application/octet-stream"), (Object = "application/json"))),
    (status = 304, description = "Not modified"),
    (status = 400, response = ErrorBody), (status = 404, response = ErrorBody)))]
pub async fn blob(State(app): State<Arc<App>>, Path((name, sha)): Path<(String, String)>, headers: HeaderMap) -> ApiResult<Response> {
    if !is_blob_name(&sha) {
        return Err(ApiError::bad_request(format!("`{sha}` is not a blob hash: give the 64 lower-case hex digits the manifest lists")));
    }
    let (_, m) = read_manifest(&app, &name).await?;
    let Some(listed) = m.blob(&sha) else {
        return Err(ApiError::not_found(format!(
            "model `{name}` has no blob {sha}; its manifest (GET /v1/models/{name}) lists the weights and tokenizer blobs"
        )));
    };
    let etag = format!("\"{sha}\"");
    let common = [
        cors(),
        (header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=31536000, immutable")),
        (header::ETAG, HeaderValue::from_str(&etag).map_err(ApiError::internal)?),
    ];
    if matches(&headers, &etag) {
        return Ok((StatusCode::NOT_MODIFIED, common).into_response());
    }
    let path = store(&app).and_then(|s| s.blob_path(&sha)).ok_or_else(|| ApiError::internal("blob path of a listed blob"))?;
    let file = tokio::fs::File::open(&path).await.map_err(|e| ApiError::internal(format!("{}: {e}", path.display())))?;
    let len = file.metadata().await.map_err(ApiError::internal)?.len();
    if len != listed.bytes {
        // The store was changed behind the server's back: serving the file
        // would hand out bytes that do not match the hash.
        return Err(ApiError::internal(format!("{}: {len} bytes, the manifest of `{name}` says {}", path.display(), listed.bytes)));
    }
    let ctype = if sha == m.tokenizer().sha256 { "application/json" } else { "application/octet-stream" };
    let body = Body::from_stream(tokio_util::io::ReaderStream::with_capacity(file, CHUNK));
    Ok((common, [(header::CONTENT_TYPE, HeaderValue::from_static(ctype)), (header::CONTENT_LENGTH, HeaderValue::from(len))], body)
        .into_response())
}

/// Report one model-level latency (one call of the model at a batch and
/// padded length, on one target) measured in a session; the device keys
/// come from the session.
#[utoipa::path(post, path = "/v1/models/{name}/latency", params(("name" = String, Path, pattern = "^[a-z0-9]([a-z0-9.-]{0,62}[a-z0-9])?$")), request_body = LatencyRequest, responses(
    (status = 201, description = "Stored", body = LatencyResponse),
    (status = 400, response = ErrorBody), (status = 404, response = ErrorBody), (status = 413, response = ErrorBody), (status = 422, response = ErrorBody), (status = 429, response = ErrorBody), (status = 503, response = ErrorBody)))]
pub async fn latency(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> ApiResult<Response> {
    let req: LatencyRequest = super::json_body(body)?;
    let session = app.service.session(&req.session_id).await?;
    // Latency reports (advice for the model's plan, one row each) have a
    // bucket of their own at the session's rate, so that they never take
    // the requests the session's tuning (queues and kernel reports) needs.
    if let Err(wait) = app.per_session.take(&format!("latency/{}", session.id)) {
        app.service.metrics.rate_limited.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return Err(ApiError::too_many("too many latency reports from this session", wait));
    }
    let m = read_manifest(&app, &name).await?.1;
    let body = app.service.record_latency(&session, &m, req).await?;
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// Which target (wasm or webgpu) runs the model faster on this device
/// class (median per target over sessions, device → arch → vendor key),
/// and the matrix products of one layer with their best-kernel lookups.
#[utoipa::path(get, path = "/v1/models/{name}/plan", params(("name" = String, Path, pattern = "^[a-z0-9]([a-z0-9.-]{0,62}[a-z0-9])?$"), PlanQuery), responses(
    (status = 200, description = "The plan; target is null with a reason when the measurements do not decide", body = PlanResponse),
    (status = 400, response = ErrorBody), (status = 404, response = ErrorBody), (status = 422, response = ErrorBody)))]
pub async fn plan(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    q: Result<axum::extract::Query<PlanQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let q = q
        .map(|axum::extract::Query(q)| q)
        .map_err(|e| ApiError::bad_request(format!("{}; expected ?device_key=KEY&batch=1&seq_len=128", e.body_text())))?;
    let device_key = q.device_key.unwrap_or_default();
    check_device_key(&device_key)?;
    let m = read_manifest(&app, &name).await?.1;
    let body = app.service.model_plan(&m, device_key, q.batch, q.seq_len).await?;
    Ok(([cors(), (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"))], Json(body)).into_response())
}
