//! The tuning service: HTTP API over the kernel database (axum + tokio).
//!
//! A device opens a session with its fingerprint, asks for the best known
//! kernel of each op it runs, and, while it infers, takes candidates from its
//! queue (Server-Sent Events), times them and reports its top N. Every report
//! is stored with its raw measurements and moves the votes; the next lookup of
//! any device with the same key (or, failing that, architecture or vendor)
//! gets the new winner.
//!
//! Invariants:
//! - Only this module knows HTTP and JSON; SQL stays in `webtune-kernel-db`,
//!   kernels come from `webtune-compiler`, keys and spaces from [`device`].
//! - Every input is validated before it reaches the database; every failure
//!   is an [`error::ApiError`]: a 4xx that says what to fix, or a 500 whose
//!   detail is logged, never sent.
//! - A report is acknowledged (200) only after its transaction committed.
//! - Compilation runs on the rayon pool, never on a tokio worker.

pub(crate) mod charts;
pub mod conn;
pub mod cors;
pub mod device;
pub mod error;
pub mod limits;
mod models;
pub mod openapi;
mod pages;
mod plausible;
pub mod protocol;
mod queue;
mod reports;
mod rho;
pub mod ticket;
mod web;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::handler::Handler;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use webtune_compiler::{Op, Schedule, Target, compile};
use webtune_kernel_db::{Db, DeviceKeys, KernelKind, Level, NewKernel, VotePolicy, random_id};

use error::{ApiError, ApiResult};
use protocol::*;
use ticket::Signer;

/// Largest request body accepted, bytes. A top-5 report is under 2 KiB and
/// a fingerprint a few hundred bytes.
pub const BODY_LIMIT: usize = 64 * 1024;
/// Longest device key accepted in a query.
const MAX_KEY_LEN: usize = 512;
/// Entries of the compile, session and lookup caches before they are emptied.
const CACHE_LIMIT: usize = 50_000;

/// Inserts into one of the server's caches, emptying it first when it
/// holds [`CACHE_LIMIT`] entries (a cache is only ever a shortcut).
fn cache_insert<K: std::hash::Hash + Eq, V>(cache: &mut HashMap<K, V>, key: K, value: V) {
    if cache.len() >= CACHE_LIMIT {
        cache.clear();
    }
    cache.insert(key, value);
}

/// Counters exported at `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    pub sessions: AtomicU64,
    pub best: [AtomicU64; 4],
    pub best_cache_hits: AtomicU64,
    pub reports_accepted: AtomicU64,
    pub reports_rejected: AtomicU64,
    pub measurements_accepted: AtomicU64,
    pub candidates_streamed: AtomicU64,
    pub kernels_compiled: AtomicU64,
    pub compile_us_total: AtomicU64,
    pub kernel_downloads: AtomicU64,
    pub not_modified: AtomicU64,
    pub rate_limited: AtomicU64,
    pub overloaded: AtomicU64,
    pub samples_rejected: AtomicU64,
    pub implausible_rejected: AtomicU64,
    /// Stored winners whose kernel metadata did not parse as a schedule.
    pub unreadable_winners: AtomicU64,
    pub connections_refused: AtomicU64,
}

/// How a server runs: vote policy, admission limits, cache lifetime.
#[derive(Clone, Debug)]
pub struct Config {
    pub policy: VotePolicy,
    pub limits: limits::Limits,
    /// How long a cached best-kernel answer may be served. Reports to this
    /// server invalidate it at once; reports to another server sharing the
    /// database are seen after at most this long.
    pub cache_ttl: std::time::Duration,
    /// The model store served at `/v1/models`; `None` serves no models.
    pub models_dir: Option<std::path::PathBuf>,
    /// Timeouts and caps on connections.
    pub connections: conn::ConnLimits,
    /// Origins other than the server's own whose pages may call the API.
    pub cors: cors::Origins,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policy: VotePolicy::default(),
            limits: limits::Limits::default(),
            cache_ttl: std::time::Duration::from_millis(1000),
            models_dir: None,
            connections: conn::ConnLimits::default(),
            cors: cors::Origins::default(),
        }
    }
}

/// Fewest timed runs behind a reported median.
pub const MIN_RUNS: u32 = 3;

/// A kernel compiled and stored by this server.
#[derive(Debug)]
pub struct Compiled {
    pub sha256: String,
    pub meta: serde_json::Value,
}

/// Shared state of all handlers.
#[derive(Debug)]
pub struct App {
    pub db: Db,
    pub signer: Signer,
    pub metrics: Metrics,
    pub config: Config,
    /// Write requests per client address.
    pub per_address: limits::Buckets,
    /// Reports and queues per session.
    pub per_session: limits::Buckets,
    /// Requests being handled.
    pub in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// Candidate queues streaming.
    pub queues: Arc<std::sync::atomic::AtomicUsize>,
    /// Connections open, per address and in all.
    pub open: Arc<conn::Open>,
    /// Candidate queues streaming, per session.
    pub session_queues: Mutex<HashMap<String, Arc<std::sync::atomic::AtomicUsize>>>,
    /// (op, shape, target, schedule JSON) → compiled kernel.
    compiled: Mutex<HashMap<String, Arc<Compiled>>>,
    /// Sessions already read: a session row never changes, so any server
    /// may keep it (a miss is never cached: the session may have been
    /// opened on another server since).
    sessions: Mutex<HashMap<String, webtune_kernel_db::Session>>,
    /// Lookup answers, valid while `generation` is unchanged and younger than the TTL.
    best_cache: RwLock<HashMap<String, (u64, Instant, Bytes)>>,
    /// Bumped by every accepted report that changed a seat: cached lookups are then stale.
    generation: AtomicU64,
    started: Instant,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding a cache lock leaves a usable map behind.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl App {
    /// Connects to (and migrates) the database and loads the ticket secret.
    pub async fn new(database_url: &str, config: Config) -> anyhow::Result<Arc<App>> {
        let db = Db::connect(database_url).await?;
        let secret = db.setting_or_init("ticket_secret", &(random_id()? + &random_id()?)).await?;
        Ok(Arc::new(App {
            db,
            signer: Signer::new(secret.as_bytes()),
            metrics: Metrics::default(),
            per_address: limits::Buckets::per_minute(config.limits.per_address_per_min),
            per_session: limits::Buckets::with_burst(config.limits.per_session_per_min, config.limits.per_session_burst()),
            in_flight: Arc::default(),
            queues: Arc::default(),
            open: Arc::default(),
            session_queues: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            config,
            compiled: Mutex::new(HashMap::new()),
            best_cache: RwLock::new(HashMap::new()),
            generation: AtomicU64::new(0),
            started: Instant::now(),
        }))
    }

    /// Compiles `schedule` for `op` on `target` on the rayon pool, stores the
    /// kernel, and caches it by its inputs (compilation is deterministic).
    pub async fn compile_and_store(&self, op: &Op, target: Target, schedule: &Schedule) -> ApiResult<Arc<Compiled>> {
        let schedule_json = serde_json::to_string(schedule).map_err(ApiError::internal)?;
        let cache_key = format!("{}|{}|{}", op.slug(), target, schedule_json);
        if let Some(c) = lock(&self.compiled).get(&cache_key) {
            return Ok(c.clone());
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (op2, schedule2) = (op.clone(), schedule.clone());
        rayon::spawn(move || {
            let t = Instant::now();
            let r = compile(&op2, target, &schedule2);
            let _ = tx.send((r, t.elapsed()));
        });
        let (kernel, took) = rx.await.map_err(|_| ApiError::internal("compile worker vanished"))?;
        let kernel = kernel.map_err(|e| match e {
            webtune_compiler::CompileError::Schedule(e) => ApiError::unprocessable(e.to_string()),
            e => ApiError::internal(e),
        })?;
        self.metrics.kernels_compiled.fetch_add(1, Ordering::Relaxed);
        self.metrics.compile_us_total.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        let meta_json = serde_json::to_string(&kernel.meta).map_err(ApiError::internal)?;
        self.db
            .put_kernel(&NewKernel {
                sha256: kernel.meta.sha256.clone(),
                kind: kind_of(op, target),
                schedule_json,
                meta_json,
                bytes: kernel.bytes,
            })
            .await?;
        let meta = serde_json::to_value(&kernel.meta).map_err(ApiError::internal)?;
        let c = Arc::new(Compiled { sha256: kernel.meta.sha256, meta });
        cache_insert(&mut lock(&self.compiled), cache_key, c.clone());
        Ok(c)
    }

    /// The keys of a device key: as recorded from its fingerprint, else as
    /// implied by the key's own structure.
    async fn keys_of(&self, device_key: &str) -> ApiResult<Option<DeviceKeys>> {
        if let Some(d) = self.db.device(device_key).await? {
            return Ok(Some(d.keys));
        }
        Ok(device::keys_from_device_key(device_key))
    }
}

pub fn kind_of(op: &Op, target: Target) -> KernelKind {
    let shape: Vec<String> = op.shape().iter().map(|d| d.to_string()).collect();
    KernelKind { op: op.name(), shape: shape.join(","), target: target.name().to_string() }
}

pub fn kernel_url(sha256: &str) -> String {
    format!("/v1/kernels/{sha256}")
}

/// Parses and validates op, shape and target.
pub fn parse_kind(op: &str, shape: &[u32], target: &str) -> ApiResult<(Op, Target)> {
    // The name may carry an epilogue suffix (`matmul+bias+gelu`) and `+f16`.
    let (kind, epilogue, dtype) = webtune_compiler::op::parse_name(op).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let op = Op::with_epilogue(kind, epilogue, shape)
        .and_then(|o| o.with_dtype(dtype))
        .map_err(|e| ApiError::bad_request(format!("shape: {e}")))?;
    let target: Target = target.parse().map_err(|e: String| ApiError::bad_request(e))?;
    if !op.runs_on(target) {
        let only = if kind.runs_on(target) { "f16 ops run on wgsl only" } else { "it runs on wasm only" };
        return Err(ApiError::bad_request(format!("{} has no {} kernels: {only}", op.name(), target.name())));
    }
    Ok((op, target))
}

fn parse_shape(s: &str) -> ApiResult<Vec<u32>> {
    if s.len() > 64 {
        return Err(ApiError::bad_request("shape is too long: give up to 4 comma-separated dimensions, e.g. 384,768,768"));
    }
    webtune_compiler::op::parse_shape(s)
        .map_err(|e| ApiError::bad_request(format!("shape `{s}`: {e}; give comma-separated positive integers, e.g. 384,768,768")))
}

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

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

async fn session_of(app: &App, id: &str) -> ApiResult<webtune_kernel_db::Session> {
    let unknown = || ApiError::not_found(format!("unknown session `{id}`: open one with POST /v1/sessions"));
    if !is_hex(id, 32) {
        return Err(unknown());
    }
    if let Some(s) = lock(&app.sessions).get(id) {
        return Ok(s.clone());
    }
    let s = app.db.session(id).await?.ok_or_else(unknown)?;
    cache_insert(&mut lock(&app.sessions), id.to_string(), s.clone());
    Ok(s)
}

// ---------------------------------------------------------------- handlers

/// Open a tuning session for a device fingerprint.
#[utoipa::path(post, path = "/v1/sessions", request_body = SessionRequest, responses(
    (status = 201, description = "Session opened", body = SessionResponse),
    (status = 400, response = ErrorBody), (status = 413, response = ErrorBody), (status = 422, response = ErrorBody), (status = 429, response = ErrorBody), (status = 503, response = ErrorBody)))]
async fn create_session(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let req: SessionRequest = json_body(body)?;
    let keys = device::keys_for(&req.fingerprint).map_err(ApiError::unprocessable)?;
    // Known fields only, bounded (docs/device-keys.md: unknown fields are ignored).
    let canonical = device::stored_fingerprint(&req.fingerprint).map_err(ApiError::unprocessable)?;
    let fp_sha = app.db.upsert_device(&canonical, &keys).await?;
    let s = app.db.create_session(&fp_sha, &keys).await?;
    app.metrics.sessions.fetch_add(1, Ordering::Relaxed);
    let body = SessionResponse {
        session_id: s.id,
        device_key: keys.device_key,
        arch_key: keys.arch_key,
        vendor_key: keys.vendor_key,
        rho: keys.rho,
    };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// The best known kernel for a device key, with the fallback level that answered.
#[utoipa::path(get, path = "/v1/kernels/best", params(KernelQuery), responses(
    (status = 200, description = "Winner or portable default", body = BestResponse),
    (status = 400, response = ErrorBody)))]
async fn best(State(app): State<Arc<App>>, q: Result<Query<KernelQuery>, QueryRejection>) -> ApiResult<Response> {
    let q = query(q)?;
    let device_key = q.device_key.unwrap_or_default();
    if device_key.len() > MAX_KEY_LEN {
        return Err(ApiError::bad_request(format!("device_key is longer than {MAX_KEY_LEN} bytes")));
    }
    let cache_key = format!("{device_key}\n{}\n{}\n{}", q.op, q.shape, q.target);
    let generation = app.generation.load(Ordering::Acquire);
    let cached = app.best_cache.read().unwrap_or_else(|p| p.into_inner()).get(&cache_key).cloned();
    if let Some((g, at, body)) = cached
        && g == generation
        && at.elapsed() < app.config.cache_ttl
    {
        app.metrics.best_cache_hits.fetch_add(1, Ordering::Relaxed);
        return Ok(json_bytes(body));
    }
    let (op, target) = parse_kind(&q.op, &parse_shape(&q.shape)?, &q.target)?;
    let kind = kind_of(&op, target);
    let keys = if device_key.is_empty() { None } else { app.keys_of(&device_key).await? };
    let mut answer = None;
    if let Some(keys) = &keys {
        let space = device::space_for(&op, target, keys);
        // The most specific winner of this space's rules that the client can
        // run: arch and vendor keys are shared by clients with and without
        // Wasm threads.
        let limit = device::max_threads(keys) as u64;
        let mut found = None;
        for b in app.db.winners_for(&kind, keys).await? {
            let meta: serde_json::Value = serde_json::from_str(&b.meta_json).map_err(ApiError::internal)?;
            if b.winner.space_checksum == space.checksum && meta.get("threads").and_then(|t| t.as_u64()).unwrap_or(1) <= limit {
                found = Some((b, meta));
                break;
            }
        }
        if let Some((b, meta)) = found {
            answer = Some(BestResponse {
                level: b.winner.level,
                level_key: Some(b.winner.level_key),
                meta,
                url: kernel_url(&b.winner.kernel_sha256),
                votes: b.winner.votes,
                reports: b.winner.reports,
                space_checksum: Some(b.winner.space_checksum),
            });
        }
    }
    let answer = match answer {
        Some(a) => a,
        None => {
            let c = app.compile_and_store(&op, target, &Schedule::default_for(&op, target)).await?;
            BestResponse {
                level: Level::Default,
                level_key: None,
                meta: c.meta.clone(),
                url: kernel_url(&c.sha256),
                votes: 0,
                reports: 0,
                space_checksum: None,
            }
        }
    };
    let i = match answer.level {
        Level::Device => 0,
        Level::Arch => 1,
        Level::Vendor => 2,
        Level::Default => 3,
    };
    app.metrics.best[i].fetch_add(1, Ordering::Relaxed);
    let body = Bytes::from(serde_json::to_vec(&answer).map_err(ApiError::internal)?);
    cache_insert(&mut app.best_cache.write().unwrap_or_else(|p| p.into_inner()), cache_key, (generation, Instant::now(), body.clone()));
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
        if app.db.kernel_meta(&sha).await?.is_some() {
            app.metrics.not_modified.fetch_add(1, Ordering::Relaxed);
            return Ok((StatusCode::NOT_MODIFIED, cache).into_response());
        }
    }
    let Some((bytes, target)) = app.db.kernel_bytes(&sha).await? else {
        return Err(ApiError::not_found(format!("no kernel with hash {sha}; hashes come from /v1/kernels/best or the queue")));
    };
    let ctype = if target == "wasm" { "application/wasm" } else { "text/wgsl; charset=utf-8" };
    app.metrics.kernel_downloads.fetch_add(1, Ordering::Relaxed);
    Ok((cache, [(header::CONTENT_TYPE, HeaderValue::from_static(ctype))], bytes).into_response())
}

/// A session serves the one target its device key is for (`gpu-` keys
/// WGSL, `cpu-` keys Wasm): the key, and so the candidate space and the
/// votes, would be wrong for the other.
fn wrong_target(device_key: &str, own: Target, asked: Target) -> ApiError {
    ApiError::unprocessable(format!(
        "this session is for {own} kernels (device key {device_key}), not {asked}; \
         open another session with \"target\": \"{asked}\" in its fingerprint to tune {asked} kernels"
    ))
}

/// Liveness and database reachability.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "OK"), (status = 503, response = ErrorBody)))]
async fn healthz(State(app): State<Arc<App>>) -> Response {
    match app.db.ping().await {
        Ok(()) => Json(serde_json::json!({"status": "ok", "database": app.db.backend()})).into_response(),
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
        at("/v1/kernels/best", Method::GET, best),
        at("/v1/kernels/{sha256}", Method::GET, kernel_bytes),
        at("/v1/rho", Method::GET, rho::rho),
        at("/v1/models", Method::GET, models::list),
        at("/v1/models/{name}", Method::GET, models::manifest),
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
    app.db.close().await;
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
