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
use webtune_models::{Manifest, ModelManifest, Store, is_blob_name, is_model_name};

use super::App;
use super::error::{ApiError, ApiResult};
use super::protocol::{ErrorBody, LatencyRequest, LatencyResponse, ModelList, ModelSummary, PlanQuery, PlanResponse};

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

/// An encoder's manifest: latency reports and plans cover encoders so far.
fn encoder(m: ModelManifest) -> ApiResult<Manifest> {
    match m {
        ModelManifest::Encoder(m) => Ok(m),
        ModelManifest::Decoder(m) => Err(ApiError::unprocessable(format!(
            "model `{}` is a {} model; latency reports and plans cover encoders so far",
            m.name, m.task
        ))),
    }
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

/// Model targets a latency may be reported for, and the kernel target each runs.
const TARGETS: [(&str, &str); 2] = [("wasm", "wasm"), ("webgpu", "wgsl")];
/// Largest batch a latency report or plan may name.
const MAX_BATCH: u32 = 256;

fn check_shape(m: &Manifest, batch: u32, seq_len: u32) -> ApiResult<()> {
    if !(1..=MAX_BATCH).contains(&batch) {
        return Err(ApiError::unprocessable(format!("batch must be from 1 to {MAX_BATCH} texts, got {batch}")));
    }
    if !(1..=m.max_seq_length).contains(&seq_len) {
        return Err(ApiError::unprocessable(format!(
            "seq_len must be from 1 to the model's max_seq_length {}, got {seq_len}",
            m.max_seq_length
        )));
    }
    Ok(())
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
    let session = super::session_of(&app, &req.session_id).await?;
    if let Err(wait) = app.per_session.take(&session.id) {
        app.metrics.rate_limited.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("too many reports from this session; retry in {} s", wait.as_secs().max(1)),
        ));
    }
    let m = encoder(read_manifest(&app, &name).await?.1)?;
    if !TARGETS.iter().any(|(t, _)| *t == req.target) {
        return Err(ApiError::unprocessable(format!("target must be `wasm` or `webgpu`, got `{}`", req.target)));
    }
    check_shape(&m, req.batch, req.seq_len)?;
    if !(req.median_ms.is_finite() && req.median_ms > 0.0 && req.median_ms <= 600_000.0) {
        return Err(ApiError::unprocessable(format!(
            "median_ms must be a positive number of milliseconds up to 600000, got {}",
            req.median_ms
        )));
    }
    if req.runs < super::MIN_RUNS || req.runs > 1_000_000 {
        return Err(ApiError::unprocessable(format!(
            "runs must be from {} to 10^6 (a median needs repeated timed calls), got {}",
            super::MIN_RUNS,
            req.runs
        )));
    }
    let row = webtune_kernel_db::NewModelLatency {
        session_id: session.id.clone(),
        model: m.name.clone(),
        weights_sha256: m.weights.sha256.clone(),
        target: req.target,
        batch: req.batch.into(),
        seq_len: req.seq_len.into(),
        median_ms: req.median_ms,
        runs: req.runs.into(),
    };
    let id = app.db.record_model_latency(&row, &session.keys).await?;
    Ok((StatusCode::CREATED, Json(LatencyResponse { id, device_key: session.keys.device_key })).into_response())
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
    use webtune_kernel_db::plan::{faster, summarise};
    use webtune_kernel_db::{DeviceKeys, Level};
    let q = q
        .map(|axum::extract::Query(q)| q)
        .map_err(|e| ApiError::bad_request(format!("{}; expected ?device_key=KEY&batch=1&seq_len=128", e.body_text())))?;
    let device_key = q.device_key.unwrap_or_default();
    if device_key.is_empty() || device_key.len() > super::MAX_KEY_LEN {
        return Err(ApiError::bad_request(format!(
            "device_key is required (1 to {} bytes): the device_key of the session the latencies were reported with",
            super::MAX_KEY_LEN
        )));
    }
    let m = encoder(read_manifest(&app, &name).await?.1)?;
    let batch = q.batch.unwrap_or(1);
    let seq_len = q.seq_len.unwrap_or(m.max_seq_length.min(128));
    check_shape(&m, batch, seq_len)?;
    let keys = app.keys_of(&device_key).await?.unwrap_or_else(|| DeviceKeys {
        device_key: device_key.clone(),
        arch_key: String::new(),
        vendor_key: String::new(),
        rho: String::new(),
    });
    let quorum = app.config.policy.quorum;
    let mut decided = None;
    let mut seen = None;
    for level in Level::STORED {
        let Some(key) = keys.key(level).filter(|k| !k.is_empty()) else { continue };
        let rows = app.db.model_latencies(&m.name, batch.into(), seq_len.into(), level, key).await?;
        let summary = summarise(&rows);
        if let Some(best) = faster(&summary, quorum) {
            decided = Some((level, key.to_string(), best.target.clone(), summary.clone()));
            break;
        }
        if seen.is_none() && !summary.is_empty() {
            seen = Some((level, key.to_string(), summary));
        }
    }
    let at = format!("batch {batch}, seq_len {seq_len}");
    let (target, reason, level, level_key, targets) = match (decided, seen) {
        (Some((level, key, target, summary)), _) => {
            let other = summary
                .iter()
                .filter(|t| t.target != target && t.sessions >= quorum.max(1))
                .map(|t| t.median_ms)
                .fold(f64::INFINITY, f64::min);
            let mine = summary.iter().find(|t| t.target == target).map_or(f64::NAN, |t| t.median_ms);
            let reason = format!("{target} is faster at {at} on {} `{key}`: median {mine:.1} ms against {other:.1} ms", level.name());
            (Some(target), reason, Some(level), Some(key), summary)
        }
        (None, Some((level, key, summary))) => {
            let listed: Vec<String> = summary.iter().map(|t| format!("{} from {} session(s)", t.target, t.sessions)).collect();
            let reason = format!(
                "not enough measurements at {at} on {} `{key}` ({}); each target needs reports from {quorum} session(s): POST /v1/models/{}/latency",
                level.name(),
                listed.join(", "),
                m.name
            );
            (None, reason, Some(level), Some(key), summary)
        }
        (None, None) => (
            None,
            format!(
                "no latency reports for {} at {at} from this device class yet: measure both targets and POST /v1/models/{}/latency",
                m.name, m.name
            ),
            None,
            None,
            vec![],
        ),
    };
    let kernels = webtune_models::matmuls(&m.config, batch, seq_len)
        .ok_or_else(|| ApiError::unprocessable("batch × seq_len is too large"))?
        .into_iter()
        .map(|k| {
            let shape: Vec<String> = k.shape.iter().map(u32::to_string).collect();
            let best = TARGETS
                .iter()
                .map(|(t, kt)| {
                    let url = format!(
                        "/v1/kernels/best?device_key={}&op={}&shape={}&target={kt}",
                        encode_query(&device_key),
                        encode_query(k.op),
                        shape.join(",")
                    );
                    (t.to_string(), url)
                })
                .collect();
            super::protocol::PlanKernel { name: k.name.to_string(), op: k.op.to_string(), shape: k.shape, best }
        })
        .collect();
    let body = super::protocol::PlanResponse {
        model: m.name.clone(),
        device_key,
        batch,
        seq_len,
        target,
        reason,
        level,
        level_key,
        targets,
        layers: m.config.num_hidden_layers,
        kernels,
    };
    Ok(([cors(), (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"))], Json(body)).into_response())
}

/// Percent-encodes a query value (device keys hold `/`, which is safe, and
/// nothing else outside `[a-z0-9.-]`; encode the rest anyway).
fn encode_query(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
