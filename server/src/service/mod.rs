//! The tuning service's rules, apart from HTTP: sessions, candidate queues,
//! reports, best-kernel lookups, model plans and the dashboard's figures,
//! over the kernel database.
//!
//! A device opens a session with its fingerprint, asks for the best known
//! kernel of each op it runs, and, while it infers, takes candidates from its
//! queue, times them and reports its top N. Every report is stored with its
//! raw measurements and moves the votes; the next lookup of any device with
//! the same key (or, failing that, architecture or vendor: kernel-db's
//! `fallback` walk) gets the new winner.
//!
//! One room per concern, each an `impl Service` block: `sessions`,
//! `queues`, `reports`, `lookups`, [`models`] (model plans and
//! latencies), [`dashboard`]; beside them the seams it builds on: [`device`]
//! (keys and spaces from the tuner), [`ticket`], [`plausible`], [`protocol`]
//! (the wire types, which the service takes and gives), [`error`], [`time`].
//!
//! Invariants:
//! - It knows no HTTP (no axum, no status codes): the edge (`crate::http`)
//!   decodes requests, calls it, and maps its [`Error`]s to statuses. No
//!   arrow points from here (or from `bundle` and `cli::db`) into `http`.
//! - SQL stays in `webtune-kernel-db`, kernels come from `webtune-compiler`,
//!   keys and spaces from [`device`]. The database handle is private to
//!   this module: the edge cannot reach it.
//! - Every input is validated before it reaches the database.
//! - A report is acknowledged only after its transaction committed.
//! - Compilation runs on the rayon pool, never on a tokio worker.

pub mod dashboard;
pub mod device;
pub mod error;
mod lookups;
pub mod models;
pub mod plausible;
pub mod protocol;
mod queues;
mod reports;
mod sessions;
pub mod ticket;
pub mod time;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use webtune_compiler::{Op, Schedule, Target, compile};
use webtune_kernel_db::{Db, DeviceKeys, KernelKind, NewKernel, VotePolicy, random_id};

pub use error::{Error, ErrorKind, Result};
pub use lookups::Lookup;
pub use queues::{Item as QueueItem, Queue};
use ticket::Signer;
pub use time::unix_now;

/// Longest device key accepted in a query.
pub const MAX_KEY_LEN: usize = 512;
/// Entries of the compile, session and lookup caches before they are emptied.
const CACHE_LIMIT: usize = 50_000;
/// Fewest timed runs behind a reported median.
pub const MIN_RUNS: u32 = 3;

/// Inserts into one of the service's caches, emptying it first when it
/// holds [`CACHE_LIMIT`] entries (a cache is only ever a shortcut).
fn cache_insert<K: std::hash::Hash + Eq, V>(cache: &mut HashMap<K, V>, key: K, value: V) {
    if cache.len() >= CACHE_LIMIT {
        cache.clear();
    }
    cache.insert(key, value);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding a cache lock leaves a usable map behind.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counters exported at `/metrics`: the service counts its own work, the
/// edge its refusals (rate limits, overload, connections).
#[derive(Debug, Default)]
pub struct Metrics {
    pub sessions: AtomicU64,
    pub best: [AtomicU64; 4],
    /// Lookups computed, by `protocol::Source` (elected, provisional, predicted, portable).
    pub best_by_source: [AtomicU64; 4],
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

/// How the service decides: vote policy, lookup cache lifetime, model store.
#[derive(Clone, Debug)]
pub struct Settings {
    pub policy: VotePolicy,
    /// How long a cached best-kernel answer may be served. Reports to this
    /// server invalidate it at once; reports to another server sharing the
    /// database are seen after at most this long.
    pub cache_ttl: std::time::Duration,
    /// The model store served at `/v1/models`; `None` serves no models.
    pub models_dir: Option<std::path::PathBuf>,
    /// What a lookup answers where no elected winner fits.
    pub first_answer: FirstAnswer,
    /// When a report is answered: once counted, or once durable.
    pub report_answer: ReportAnswer,
}

/// When a report is answered (issue 39). Either way it is answered only
/// once it is durable, and counted by an elector's pass (the tallies and
/// winners, `webtune_kernel_db`'s `elector`), which coalesces every report
/// stored meanwhile into one election per key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReportAnswer {
    /// Once its pass has counted it too: the answer names the winners its
    /// votes helped elect, and a lookup after the answer sees them. The
    /// answer waits for the next pass (about one pass's time more).
    #[default]
    Counted,
    /// Once it is durable: the answer names the winners standing when it
    /// was stored, and lookups see its votes once the next pass counted it
    /// (the elector's lag, `webtune_db_election_lag_*` in `/metrics`).
    Durable,
}

impl std::str::FromStr for ReportAnswer {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<ReportAnswer, String> {
        match s {
            "counted" => Ok(ReportAnswer::Counted),
            "durable" => Ok(ReportAnswer::Durable),
            _ => Err(format!("unknown report answer `{s}`: give counted or durable")),
        }
    }
}

/// What a best-kernel lookup with a device key answers before a quorum has
/// elected a winner for it (issues 37 and 40); the default is the last.
/// A lookup without a device key always gets the portable default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FirstAnswer {
    /// The portable default schedule, whatever the device (before issue 37).
    Portable,
    /// The first candidate of the lite space the device's keys imply
    /// ([`device::predicted`]).
    Predicted,
    /// A provisional winner where the key's first sessions agree
    /// (`webtune_kernel_db::provisional`), else the prediction.
    #[default]
    Provisional,
}

impl std::str::FromStr for FirstAnswer {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<FirstAnswer, String> {
        match s {
            "portable" => Ok(FirstAnswer::Portable),
            "predicted" => Ok(FirstAnswer::Predicted),
            "provisional" => Ok(FirstAnswer::Provisional),
            _ => Err(format!("unknown first answer `{s}`: give portable, predicted or provisional")),
        }
    }
}

/// A kernel compiled and stored by this server.
#[derive(Debug)]
pub struct Compiled {
    pub sha256: String,
    pub meta: serde_json::Value,
}

/// The service: the database, the ticket signer, the counters and the
/// caches over them.
#[derive(Debug)]
pub struct Service {
    db: Db,
    pub signer: Signer,
    pub metrics: Metrics,
    pub settings: Settings,
    /// (op, shape, target, schedule JSON) → compiled kernel.
    compiled: Mutex<HashMap<String, Arc<Compiled>>>,
    /// Sessions already read: a session row never changes, so any server
    /// may keep it (a miss is never cached: the session may have been
    /// opened on another server since).
    sessions: Mutex<HashMap<String, webtune_kernel_db::Session>>,
    /// Lookup answers, valid while `generation` is unchanged and younger than the TTL.
    best_cache: RwLock<HashMap<String, (u64, Instant, bytes::Bytes)>>,
    /// Bumped by every accepted report that changed a seat: cached lookups
    /// are then stale (so are they once the database's elector bumped its
    /// epoch, [`Service::cache_generation`]).
    generation: AtomicU64,
    pub started: Instant,
}

impl Service {
    /// Connects to (and migrates) the database and loads the ticket secret.
    pub async fn new(database_url: &str, settings: Settings) -> anyhow::Result<Service> {
        let db = Db::connect(database_url).await?;
        // This server's elector counts reports of every server of the
        // database by this policy (they must share it).
        db.set_vote_policy(&settings.policy);
        let secret = db.setting_or_init("ticket_secret", &(random_id()? + &random_id()?)).await?;
        Ok(Service {
            db,
            signer: Signer::new(secret.as_bytes()),
            metrics: Metrics::default(),
            settings,
            compiled: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            best_cache: RwLock::new(HashMap::new()),
            generation: AtomicU64::new(0),
            started: Instant::now(),
        })
    }

    /// What a cached lookup answer must still carry to be served: changes
    /// when a report here changed a seat, and when this server's elector
    /// changed one (or voted at a key without a winner) in a pass.
    pub(crate) fn cache_generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire).wrapping_add(self.db.election_epoch())
    }

    /// What this server's elector has done (passes, reports counted, how
    /// long reports waited to be counted).
    pub fn election_stats(&self) -> webtune_kernel_db::ElectionStats {
        self.db.election_stats()
    }

    /// What this server's report writers have done (transactions, the
    /// reports they carried, the time inside them).
    pub fn writer_stats(&self) -> webtune_kernel_db::GroupStats {
        self.db.group_stats()
    }

    /// The database, for tools and tests that set up rows directly. The
    /// HTTP edge never calls it (`tests/layers.rs` checks the source).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Whether the database answers (the engine's name), or why not.
    pub async fn health(&self) -> std::result::Result<webtune_kernel_db::Backend, webtune_kernel_db::DbError> {
        self.db.ping().await?;
        Ok(self.db.backend())
    }

    /// Closes the database pool (after the last request).
    pub async fn close(&self) {
        self.db.close().await;
    }

    /// Compiles `schedule` for `op` on `target` on the rayon pool, stores the
    /// kernel, and caches it by its inputs (compilation is deterministic).
    pub async fn compile_and_store(&self, op: &Op, target: Target, schedule: &Schedule) -> Result<Arc<Compiled>> {
        let schedule_json = serde_json::to_string(schedule).map_err(Error::internal)?;
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
        let (kernel, took) = rx.await.map_err(|_| Error::internal("compile worker vanished"))?;
        let kernel = kernel.map_err(|e| match e {
            webtune_compiler::CompileError::Schedule(e) => Error::unprocessable(e.to_string()),
            // Logged with its sources (the backend's own error).
            e => Error::internal(error::chain(&e)),
        })?;
        self.metrics.kernels_compiled.fetch_add(1, Ordering::Relaxed);
        self.metrics.compile_us_total.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        let meta_json = serde_json::to_string(&kernel.meta).map_err(Error::internal)?;
        self.db
            .put_kernel(&NewKernel {
                sha256: kernel.meta.sha256.clone(),
                kind: kind_of(op, target),
                schedule_json,
                meta_json,
                bytes: kernel.bytes,
            })
            .await?;
        let meta = serde_json::to_value(&kernel.meta).map_err(Error::internal)?;
        let c = Arc::new(Compiled { sha256: kernel.meta.sha256, meta });
        cache_insert(&mut lock(&self.compiled), cache_key, c.clone());
        Ok(c)
    }

    /// The keys of a device key: as recorded from its fingerprint, else as
    /// implied by the key's own structure.
    async fn keys_of(&self, device_key: &str) -> Result<Option<DeviceKeys>> {
        if let Some(d) = self.db.device(device_key).await? {
            return Ok(Some(d.keys));
        }
        Ok(device::keys_from_device_key(device_key))
    }
}

/// The kind of `op` on `target`, as the database and the wire name it.
pub fn kind_of(op: &Op, target: Target) -> KernelKind {
    let shape: Vec<String> = op.shape().iter().map(|d| d.to_string()).collect();
    KernelKind { op: op.name(), shape: shape.join(","), target: target.name().to_string() }
}

/// Where a kernel's bytes are served.
pub fn kernel_url(sha256: &str) -> String {
    format!("/v1/kernels/{sha256}")
}

/// Parses and validates op, shape and target.
pub fn parse_kind(op: &str, shape: &[u32], target: &str) -> Result<(Op, Target)> {
    // The name may carry an epilogue suffix (`matmul+bias+gelu`) and `+f16`.
    let (kind, epilogue, dtype) = webtune_compiler::op::parse_name(op).map_err(|e| Error::bad_request(e.to_string()))?;
    let op = Op::with_epilogue(kind, epilogue, shape)
        .and_then(|o| o.with_dtype(dtype))
        .map_err(|e| Error::bad_request(format!("shape: {e}")))?;
    let target: Target = target.parse().map_err(|e: String| Error::bad_request(e))?;
    if let Some(only) = op.why_not(target) {
        return Err(Error::bad_request(format!("{} has no {} kernels: {only}", op.name(), target.name())));
    }
    Ok((op, target))
}

/// Parses a shape given as text (`384,768,768`).
pub fn parse_shape(s: &str) -> Result<Vec<u32>> {
    if s.len() > 64 {
        return Err(Error::bad_request("shape is too long: give up to 4 comma-separated dimensions, e.g. 384,768,768"));
    }
    webtune_compiler::op::parse_shape(s)
        .map_err(|e| Error::bad_request(format!("shape `{s}`: {e}; give comma-separated positive integers, e.g. 384,768,768")))
}

/// Whether `s` is `len` lower-case hex digits.
pub fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A session serves the one target its device key is for (`gpu-` keys
/// WGSL, `cpu-` keys Wasm): the key, and so the candidate space and the
/// votes, would be wrong for the other.
fn wrong_target(device_key: &str, own: Target, asked: Target) -> Error {
    Error::unprocessable(format!(
        "this session is for {own} kernels (device key {device_key}), not {asked}; \
         open another session with \"target\": \"{asked}\" in its fingerprint to tune {asked} kernels"
    ))
}
