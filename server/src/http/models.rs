//! The model store over HTTP (README.md, "Models"): the list, each
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
use webtune_models::{Manifest, Store, is_blob_name, is_model_name};

use super::App;
use super::error::{ApiError, ApiResult};
use super::protocol::{ModelList, ModelSummary};

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

/// A model's manifest (bytes and content), or 404.
async fn read_manifest(app: &App, name: &str) -> ApiResult<(Vec<u8>, Manifest)> {
    if !is_model_name(name) {
        return Err(unknown_model(name));
    }
    let Some(store) = store(app) else { return Err(unknown_model(name)) };
    let n = name.to_string();
    blocking(move || store.manifest(&n)).await?.ok_or_else(|| unknown_model(name))
}

/// `GET /v1/models`
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
                    name: l.manifest.name,
                    architecture: l.manifest.architecture,
                    hidden_size: l.manifest.config.hidden_size,
                    layers: l.manifest.config.num_hidden_layers,
                    max_seq_length: l.manifest.max_seq_length,
                    manifest_sha256: l.manifest_sha256,
                })
                .collect()
        }
    };
    Ok(([cors(), (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"))], Json(ModelList { models })).into_response())
}

/// `GET /v1/models/{name}`
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

/// `GET /v1/models/{name}/blobs/{sha256}`
pub async fn blob(State(app): State<Arc<App>>, Path((name, sha)): Path<(String, String)>, headers: HeaderMap) -> ApiResult<Response> {
    if !is_blob_name(&sha) {
        return Err(ApiError::bad_request(format!(
            "`{sha}` is not a blob hash: give the 64 lower-case hex digits the manifest lists"
        )));
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
    let ctype = if sha == m.tokenizer.sha256 { "application/json" } else { "application/octet-stream" };
    let body = Body::from_stream(tokio_util::io::ReaderStream::with_capacity(file, CHUNK));
    Ok((
        common,
        [(header::CONTENT_TYPE, HeaderValue::from_static(ctype)), (header::CONTENT_LENGTH, HeaderValue::from(len))],
        body,
    )
        .into_response())
}
