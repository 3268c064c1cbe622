//! # webtune-kernel-db
//!
//! The crowdsourced kernel database of NNJIT section 5.3: devices, compiled
//! kernels, every raw measurement, top-N reports with ranked weights, and the
//! winners voted from them per (op, shape, target, fallback level, key).
//!
//! **This is the only crate in webtune with SQL.** Every statement lives in
//! this file or in the numbered files of the top-level `migrations/` folder.
//!
//! One code path serves two engines through sqlx's `Any` driver:
//! SQLite (the embedded default: a file created and migrated on first start,
//! in WAL mode) and PostgreSQL. The SQL is the subset both accept with one
//! meaning (`$N` placeholders, `ON CONFLICT`, `TEXT`/`BIGINT`/`DOUBLE
//! PRECISION`/`BYTEA`); the migration header lists the rules.
//!
//! ## Invariants
//! - `kernels` rows are content-addressed (`sha256` of `bytes`) and never change.
//! - `measurements` and `reports` are append only. Winners are derived data:
//!   [`Db::record_report`] recomputes them from all raw votes for the keys it
//!   touched, inside the same transaction that stores the report, so an
//!   acknowledged report is durable and already counted.
//! - A vote counts only toward winners of the candidate space it was cast in
//!   (its `space_checksum`); a winner row carries that checksum and a lookup
//!   made under another checksum skips it.
//! - A ticket is accepted once: a second measurement quoting it is refused
//!   with [`DbError::TicketReused`].
//! - Writes are serialised by one lock per [`Db`], so SQLite never sees two
//!   writers (no `SQLITE_BUSY` upgrades) and winner recomputation is never
//!   interleaved inside one process.
//!
//! ```no_run
//! # async fn demo() -> Result<(), webtune_kernel_db::DbError> {
//! use webtune_kernel_db::Db;
//! let db = Db::connect("sqlite://webtune.sqlite").await?; // created and migrated
//! let stats = db.stats().await?;
//! assert_eq!(stats.reports, 0);
//! # Ok(()) }
//! ```

use std::borrow::Cow;
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sqlx::any::{Any, AnyRow};
use sqlx::pool::{Pool, PoolOptions};

type AnyPool = Pool<Any>;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{Executor, Row, SqlSafeStr};

/// Why a database operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The engine refused or could not run a statement.
    #[error("database: {0}")]
    Sqlx(#[from] sqlx::Error),
    /// The schema could not be brought up to date.
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The URL names an engine webtune does not support.
    #[error("unsupported database URL `{0}`: use sqlite://PATH or postgres://...")]
    BadUrl(String),
    /// A ticket was quoted a second time.
    #[error("ticket for kernel {0} was already used in an earlier report")]
    TicketReused(String),
    /// A report named a kernel of another op, shape or target.
    #[error("kernel {kernel} is {is}, not {reported}")]
    WrongKind { kernel: String, is: KernelKind, reported: KernelKind },
    /// A report named a kernel the database does not hold.
    #[error("unknown kernel {0}")]
    UnknownKernel(String),
}

pub type Result<T, E = DbError> = std::result::Result<T, E>;

/// The SQL engine behind a [`Db`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A fallback level of the lookup, most specific first (CLBlast's order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The exact device key (hardware id and primitive vector ρ).
    Device,
    /// Devices of the same architecture.
    Arch,
    /// Devices of the same vendor.
    Vendor,
    /// Nothing voted yet: the portable default schedule. Never stored.
    Default,
}

impl Level {
    pub const STORED: [Level; 3] = [Level::Device, Level::Arch, Level::Vendor];

    pub fn name(self) -> &'static str {
        match self {
            Level::Device => "device",
            Level::Arch => "arch",
            Level::Vendor => "vendor",
            Level::Default => "default",
        }
    }

    fn parse(s: &str) -> Option<Level> {
        [Level::Device, Level::Arch, Level::Vendor, Level::Default].into_iter().find(|l| l.name() == s)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The three keys of one device, one per stored [`Level`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeviceKeys {
    pub device_key: String,
    pub arch_key: String,
    pub vendor_key: String,
    /// NNJIT's primitive vector ρ as a bit string, e.g. `"1011"`.
    pub rho: String,
}

impl DeviceKeys {
    /// The key at a stored level (`Default` has none).
    pub fn key(&self, level: Level) -> Option<&str> {
        match level {
            Level::Device => Some(&self.device_key),
            Level::Arch => Some(&self.arch_key),
            Level::Vendor => Some(&self.vendor_key),
            Level::Default => None,
        }
    }
}

/// What a kernel is: the part of the primary index that is not the device.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KernelKind {
    pub op: String,
    /// Dimensions joined by commas, e.g. `"384,768,768"`.
    pub shape: String,
    pub target: String,
}

impl fmt::Display for KernelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.op, self.shape, self.target)
    }
}

/// A compiled kernel to store.
#[derive(Clone, Debug)]
pub struct NewKernel {
    pub sha256: String,
    pub kind: KernelKind,
    pub schedule_json: String,
    pub meta_json: String,
    pub bytes: Vec<u8>,
}

/// A stored session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Session {
    pub id: String,
    pub keys: DeviceKeys,
    pub created_at: i64,
}

/// One ranked entry of a top-N report, as the server accepted it.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMeasurement {
    pub kernel_sha256: String,
    pub ticket: String,
    pub median_us: f64,
    pub runs: i64,
    pub output_ok: bool,
}

/// A top-N report: `entries[0]` is the fastest.
#[derive(Clone, Debug)]
pub struct NewReport {
    pub session_id: String,
    pub kind: KernelKind,
    pub space_checksum: String,
    pub entries: Vec<NewMeasurement>,
}

/// The ranked weight of the vote at `rank` (1-based) in a report of `n`
/// entries: NNJIT's top-5 with ranked weights, 5 for the fastest down to 1.
/// Entries whose output check failed weigh 0.
pub fn ranked_weight(rank: usize, output_ok: bool) -> i64 {
    if !output_ok || rank == 0 || rank > MAX_TOP_N {
        return 0;
    }
    (MAX_TOP_N + 1 - rank) as i64
}

/// Largest top-N a report may carry (NNJIT uses 5).
pub const MAX_TOP_N: usize = 5;

/// A derived winner at one level.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Winner {
    pub kind: KernelKind,
    pub level: Level,
    pub level_key: String,
    pub space_checksum: String,
    pub kernel_sha256: String,
    /// Summed ranked weights of the winner.
    pub votes: i64,
    /// Summed ranked weights of every candidate at this key.
    pub total_votes: i64,
    /// Reports counted.
    pub reports: i64,
    pub best_median_us: f64,
    pub updated_at: i64,
}

/// What a lookup found: the winner and its kernel's metadata JSON.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Best {
    pub winner: Winner,
    pub meta_json: String,
}

/// Outcome of [`Db::record_report`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecordedReport {
    pub report_id: String,
    /// The winners after this report, one per stored level.
    pub winners: Vec<Winner>,
}

/// A device row for the dashboard.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceRow {
    pub keys: DeviceKeys,
    pub fingerprint: String,
    pub first_seen: i64,
    pub last_seen: i64,
}

/// A report summary for the dashboard.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReportRow {
    pub id: String,
    pub session_id: String,
    pub kind: KernelKind,
    pub device_key: String,
    pub entries: i64,
    pub best_kernel: String,
    pub best_median_us: f64,
    pub created_at: i64,
}

/// Row counts, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub devices: i64,
    pub sessions: i64,
    pub kernels: i64,
    pub reports: i64,
    pub measurements: i64,
    pub winners: i64,
}

/// The migrations, embedded so the binary carries its schema.
fn migrator() -> Migrator {
    let m = |version: i64, description: &'static str, sql: &'static str| {
        Migration::new(version, Cow::Borrowed(description), MigrationType::Simple, sql.into_sql_str(), false)
    };
    Migrator {
        migrations: Cow::Owned(vec![
            m(1, "kernel db", include_str!("../../migrations/0001_kernel_db.sql")),
            m(2, "robust votes", include_str!("../../migrations/0002_robust_votes.sql")),
            m(3, "flag tickets", include_str!("../../migrations/0003_flag_tickets.sql")),
        ]),
        ..Migrator::DEFAULT
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A random 128-bit identifier in hex.
pub fn random_id() -> String {
    let mut b = [0u8; 16];
    // The OS generator does not fail on any platform webtune runs on; should
    // it, the time-based fallback still gives distinct ids within a process.
    if getrandom::fill(&mut b).is_err() {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        b = t.to_le_bytes();
    }
    hex::encode(b)
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// Normalises a database URL: a bare path means a SQLite file, created if
/// missing.
fn normalise_url(url: &str) -> Result<(Backend, String)> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok((Backend::Postgres, url.to_string()));
    }
    let path = if let Some(rest) = url.strip_prefix("sqlite://") {
        rest
    } else if let Some(rest) = url.strip_prefix("sqlite:") {
        rest
    } else if url.contains("://") {
        return Err(DbError::BadUrl(url.to_string()));
    } else {
        url
    };
    if path.is_empty() {
        return Err(DbError::BadUrl(url.to_string()));
    }
    let sep = if path.contains('?') { '&' } else { '?' };
    let url = if path.contains("mode=") { format!("sqlite://{path}") } else { format!("sqlite://{path}{sep}mode=rwc") };
    Ok((Backend::Sqlite, url))
}

/// How votes become winners (issue 7): a kernel wins at a key only with
/// votes from at least `quorum` distinct sessions; each session counts once
/// (its latest report); kernels flagged wrong by a quorum of sessions, and
/// by no fewer than voted for them, are out;
/// and a standing winner is replaced only by a challenger that leads the
/// votes clearly, or leads them and is faster than it by more than the
/// noise of the comparison (see [`elect`]), so winners do not flap between
/// equals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VotePolicy {
    pub quorum: usize,
    /// Least relative speed-up a challenger needs over the incumbent.
    pub min_margin: f64,
    /// A challenger with this much more of the votes (0.25: 25% more)
    /// replaces the incumbent whatever the times say.
    pub vote_margin: f64,
}

impl Default for VotePolicy {
    fn default() -> Self {
        VotePolicy { quorum: 2, min_margin: 0.03, vote_margin: 0.25 }
    }
}

/// One kernel's tally at one key.
#[derive(Clone, Debug, PartialEq)]
pub struct Tally {
    pub kernel_sha256: String,
    /// Summed ranked weights (each session counted once).
    pub votes: i64,
    /// (session, its median time in microseconds), one per session, by session.
    pub times: Vec<(String, f64)>,
    /// Distinct sessions that flagged the kernel wrong at this key.
    pub flagged_by: usize,
}

impl Tally {
    pub fn sessions(&self) -> usize {
        self.times.len()
    }
    /// Median of the per-session medians.
    pub fn median_us(&self) -> f64 {
        median(self.times.iter().map(|t| t.1).collect())
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

/// The median of `v` and the noise of that median: 1.5 standard errors,
/// estimated robustly from the median absolute deviation.
fn median_and_noise(v: Vec<f64>) -> (f64, f64) {
    let m = median(v.clone());
    let mad = median(v.iter().map(|x| (x - m).abs()).collect());
    (m, 1.5 * 1.4826 * mad / (v.len() as f64).sqrt())
}

/// NNJIT's majority vote, made robust. Eligible kernels have votes from at
/// least `quorum` sessions and are not excluded by flags (a quorum of flags,
/// no fewer than the sessions voting for the kernel). The leader has the
/// most votes (ties: faster median, then smaller hash, so every engine
/// agrees). It replaces an eligible incumbent when it has `vote_margin` more
/// votes, or when it is faster by more than `max(min_margin, noise)`:
/// measured, where possible, as the median of per-session ratios
/// leader/incumbent over sessions that timed both (which cancels the
/// differences between devices of one key), else as the ratio of their
/// medians. The vote margin is what lets an honest majority unseat a winner
/// that a few early liars installed with paired fake times; the time margin
/// is what lets a clearly faster kernel win before the votes pile up.
/// `None` when no kernel is eligible.
pub fn elect<'a>(tallies: &'a [Tally], incumbent: Option<&str>, policy: &VotePolicy) -> Option<&'a Tally> {
    let q = policy.quorum.max(1);
    // Flags exclude a kernel only when a quorum of sessions raised them and
    // they are at least as many as the sessions whose samples the server
    // verified for it: a driver that miscomputes on a device class is
    // excluded, while a minority of liars cannot exclude the crowd's winner.
    let eligible: Vec<&Tally> = tallies.iter().filter(|t| t.sessions() >= q && !(t.flagged_by >= q && t.flagged_by >= t.sessions())).collect();
    let leader = eligible.iter().copied().max_by(|a, b| {
        a.votes
            .cmp(&b.votes)
            .then(b.median_us().total_cmp(&a.median_us()))
            .then(b.kernel_sha256.cmp(&a.kernel_sha256))
    })?;
    let Some(inc) = incumbent.and_then(|i| eligible.iter().copied().find(|t| t.kernel_sha256 == i)) else {
        return Some(leader);
    };
    if inc.kernel_sha256 == leader.kernel_sha256 {
        return Some(inc);
    }
    if leader.votes as f64 >= inc.votes as f64 * (1.0 + policy.vote_margin) {
        return Some(leader);
    }
    let paired: Vec<f64> = leader
        .times
        .iter()
        .filter_map(|(s, t)| inc.times.iter().find(|(s2, _)| s2 == s).map(|(_, ti)| t / ti))
        .filter(|r| r.is_finite())
        .collect();
    let (ratio, noise) = if paired.len() >= q {
        median_and_noise(paired)
    } else {
        let (l, ln) = median_and_noise(leader.times.iter().map(|t| t.1).collect());
        let (i, inn) = median_and_noise(inc.times.iter().map(|t| t.1).collect());
        (l / i, ln / l + inn / i)
    };
    if ratio < 1.0 - noise.max(policy.min_margin) { Some(leader) } else { Some(inc) }
}

/// The kernel database. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
    write: tokio::sync::Mutex<()>,
}

// Each level filters on its own column; the SQL must be static text, so the
// three variants are spelled out by one macro.
macro_rules! votes_sql {
    ($col:literal) => {
        concat!(
            "SELECT r.session_id AS session_id, r.id AS report_id, r.created_at AS created_at, ",
            "m.kernel_sha256 AS kernel_sha256, m.weight AS weight, m.median_us AS median_us ",
            "FROM measurements m JOIN reports r ON m.report_id = r.id ",
            "WHERE r.op = $1 AND r.shape = $2 AND r.target = $3 AND r.space_checksum = $4 AND r.",
            $col,
            " = $5 AND m.weight > 0"
        )
    };
}

macro_rules! flags_sql {
    ($col:literal) => {
        concat!(
            "SELECT kernel_sha256, COUNT(DISTINCT session_id) AS n FROM flags ",
            "WHERE op = $1 AND shape = $2 AND target = $3 AND ",
            $col,
            " = $4 GROUP BY kernel_sha256"
        )
    };
}

const BEST_SQL: &str = "SELECT w.level, w.level_key, w.space_checksum, w.kernel_sha256, w.votes, w.total_votes, \
     w.reports, w.best_median_us, w.updated_at, k.meta \
     FROM winners w JOIN kernels k ON k.sha256 = w.kernel_sha256 \
     WHERE w.op = $1 AND w.shape = $2 AND w.target = $3 AND ( \
       (w.level = 'device' AND w.level_key = $4) OR \
       (w.level = 'arch' AND w.level_key = $5) OR \
       (w.level = 'vendor' AND w.level_key = $6))";

impl Db {
    /// Opens (and for SQLite creates) the database at `url` and brings its
    /// schema up to date. `url` is `sqlite://PATH`, a bare path (SQLite), or
    /// `postgres://USER@HOST:PORT/DB`.
    pub async fn connect(url: &str) -> Result<Db> {
        sqlx::any::install_default_drivers();
        let (backend, url) = normalise_url(url)?;
        let opts = PoolOptions::<Any>::new().max_connections(if backend == Backend::Sqlite { 8 } else { 16 });
        let opts = opts.after_connect(|conn, _meta| {
            Box::pin(async move {
                if conn.backend_name().eq_ignore_ascii_case("sqlite") {
                    // Readers wait for the single writer instead of failing;
                    // references are checked; NORMAL is durable under WAL
                    // except across power loss of the last commit.
                    conn.execute("PRAGMA busy_timeout = 10000").await?;
                    conn.execute("PRAGMA foreign_keys = ON").await?;
                    conn.execute("PRAGMA synchronous = FULL").await?;
                }
                Ok(())
            })
        });
        let pool = opts.connect(&url).await?;
        if backend == Backend::Sqlite {
            // WAL is a property of the file: set once, it persists.
            sqlx::query("PRAGMA journal_mode = WAL").fetch_all(&pool).await?;
        }
        migrator().run(&pool).await?;
        Ok(Db { pool, backend, write: tokio::sync::Mutex::new(()) })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Closes the pool, waiting for open connections to finish.
    pub async fn close(&self) {
        self.pool.close().await
    }

    /// Records a fingerprint (canonical JSON) and its keys; updates `last_seen`
    /// when it is already known. Returns the fingerprint's SHA-256.
    pub async fn upsert_device(&self, fingerprint_json: &str, keys: &DeviceKeys) -> Result<String> {
        let fp_sha = sha256_hex(fingerprint_json.as_bytes());
        let now = now_ms();
        let _w = self.write.lock().await;
        sqlx::query(
            "INSERT INTO devices (fingerprint_sha256, fingerprint, device_key, arch_key, vendor_key, rho, first_seen, last_seen) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
             ON CONFLICT (fingerprint_sha256) DO UPDATE SET last_seen = excluded.last_seen",
        )
        .bind(&fp_sha)
        .bind(fingerprint_json)
        .bind(&keys.device_key)
        .bind(&keys.arch_key)
        .bind(&keys.vendor_key)
        .bind(&keys.rho)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(fp_sha)
    }

    /// Opens a session for a device recorded by [`Db::upsert_device`].
    pub async fn create_session(&self, fingerprint_sha256: &str, keys: &DeviceKeys) -> Result<Session> {
        let id = random_id();
        let now = now_ms();
        let _w = self.write.lock().await;
        sqlx::query(
            "INSERT INTO sessions (id, fingerprint_sha256, device_key, arch_key, vendor_key, rho, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&id)
        .bind(fingerprint_sha256)
        .bind(&keys.device_key)
        .bind(&keys.arch_key)
        .bind(&keys.vendor_key)
        .bind(&keys.rho)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(Session { id, keys: keys.clone(), created_at: now })
    }

    pub async fn session(&self, id: &str) -> Result<Option<Session>> {
        let row = sqlx::query(
            "SELECT id, device_key, arch_key, vendor_key, rho, created_at FROM sessions WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| -> Result<Session> {
            Ok(Session {
                id: r.try_get("id")?,
                keys: DeviceKeys {
                    device_key: r.try_get("device_key")?,
                    arch_key: r.try_get("arch_key")?,
                    vendor_key: r.try_get("vendor_key")?,
                    rho: r.try_get("rho")?,
                },
                created_at: r.try_get("created_at")?,
            })
        })
        .transpose()
    }

    /// The keys and fingerprint last recorded for a device key, if any device
    /// with that key has been seen.
    pub async fn device(&self, device_key: &str) -> Result<Option<DeviceRow>> {
        let row = sqlx::query(
            "SELECT device_key, arch_key, vendor_key, rho, fingerprint, first_seen, last_seen FROM devices \
             WHERE device_key = $1 ORDER BY last_seen DESC LIMIT 1",
        )
        .bind(device_key)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(device_row).transpose()
    }

    /// Stores a kernel unless one with the same hash is there already.
    pub async fn put_kernel(&self, k: &NewKernel) -> Result<()> {
        let _w = self.write.lock().await;
        sqlx::query(
            "INSERT INTO kernels (sha256, op, shape, target, schedule, meta, bytes, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (sha256) DO NOTHING",
        )
        .bind(&k.sha256)
        .bind(&k.kind.op)
        .bind(&k.kind.shape)
        .bind(&k.kind.target)
        .bind(&k.schedule_json)
        .bind(&k.meta_json)
        .bind(&k.bytes)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A kernel's bytes and target.
    pub async fn kernel_bytes(&self, sha256: &str) -> Result<Option<(Vec<u8>, String)>> {
        let row = sqlx::query("SELECT bytes, target FROM kernels WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| -> Result<_> { Ok((r.try_get("bytes")?, r.try_get("target")?)) }).transpose()
    }

    /// A kernel's kind and metadata JSON.
    pub async fn kernel_meta(&self, sha256: &str) -> Result<Option<(KernelKind, String)>> {
        let row = sqlx::query("SELECT op, shape, target, meta FROM kernels WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| -> Result<_> {
            Ok((KernelKind { op: r.try_get("op")?, shape: r.try_get("shape")?, target: r.try_get("target")? }, r.try_get("meta")?))
        })
        .transpose()
    }

    /// Stores a top-N report and its raw measurements, then re-elects the
    /// winner at each of the session's three levels under `policy`, all in
    /// one transaction. Entries whose client-side check failed also flag
    /// their kernel for this device.
    ///
    /// The caller has checked the tickets' signatures and that each kernel
    /// belongs to `report.kind`; this checks that every kernel is stored and
    /// that no ticket was used before.
    pub async fn record_report(&self, report: &NewReport, keys: &DeviceKeys, policy: &VotePolicy) -> Result<RecordedReport> {
        let id = random_id();
        let now = now_ms();
        let _w = self.write.lock().await;
        let mut tx = self.pool.begin().await?;
        self.serialise_writers(&mut tx).await?;
        for e in &report.entries {
            let known = sqlx::query("SELECT op, shape, target FROM kernels WHERE sha256 = $1")
                .bind(&e.kernel_sha256)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(known) = known else { return Err(DbError::UnknownKernel(e.kernel_sha256.clone())) };
            let kind = KernelKind { op: known.try_get("op")?, shape: known.try_get("shape")?, target: known.try_get("target")? };
            if kind != report.kind {
                return Err(DbError::WrongKind { kernel: e.kernel_sha256.clone(), is: kind, reported: report.kind.clone() });
            }
            if ticket_used(&mut tx, &e.ticket).await? {
                return Err(DbError::TicketReused(e.kernel_sha256.clone()));
            }
        }
        sqlx::query(
            "INSERT INTO reports (id, session_id, op, shape, target, space_checksum, device_key, arch_key, vendor_key, rho, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&id)
        .bind(&report.session_id)
        .bind(&report.kind.op)
        .bind(&report.kind.shape)
        .bind(&report.kind.target)
        .bind(&report.space_checksum)
        .bind(&keys.device_key)
        .bind(&keys.arch_key)
        .bind(&keys.vendor_key)
        .bind(&keys.rho)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        for (i, e) in report.entries.iter().enumerate() {
            let rank = i + 1;
            sqlx::query(
                "INSERT INTO measurements (report_id, rank, kernel_sha256, ticket, median_us, runs, output_ok, weight) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&id)
            .bind(rank as i64)
            .bind(&e.kernel_sha256)
            .bind(&e.ticket)
            .bind(e.median_us)
            .bind(e.runs)
            .bind(e.output_ok as i64)
            .bind(ranked_weight(rank, e.output_ok))
            .execute(&mut *tx)
            .await?;
        }
        for e in report.entries.iter().filter(|e| !e.output_ok) {
            insert_flag(&mut tx, &e.kernel_sha256, &report.kind, keys, &report.session_id, None, "client-check", now).await?;
        }
        let mut winners = Vec::new();
        for level in Level::STORED {
            if let Some(w) = self.elect(&mut tx, &report.kind, &report.space_checksum, level, keys, policy, now).await? {
                winners.push(w);
            }
        }
        tx.commit().await?;
        Ok(RecordedReport { report_id: id, winners })
    }

    /// PostgreSQL: one transaction-scoped advisory lock, so that servers
    /// sharing the database elect winners one at a time and never from a
    /// tally that misses a concurrent report. (SQLite allows one writer.)
    async fn serialise_writers(&self, tx: &mut sqlx::Transaction<'_, Any>) -> Result<()> {
        if self.backend == Backend::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock(7765) AS locked").fetch_one(&mut **tx).await?;
        }
        Ok(())
    }

    /// Re-elects the winner of `kind` at one level of `keys` from every
    /// session's latest report in space `space`, and stores it (or removes a
    /// winner that is no longer eligible).
    #[allow(clippy::too_many_arguments)]
    async fn elect(
        &self,
        tx: &mut sqlx::Transaction<'_, Any>,
        kind: &KernelKind,
        space: &str,
        level: Level,
        keys: &DeviceKeys,
        policy: &VotePolicy,
        now: i64,
    ) -> Result<Option<Winner>> {
        let key = keys.key(level).unwrap_or_default();
        let tallies = self.tally_in(tx, kind, space, level, key).await?;
        let incumbent: Option<String> = sqlx::query(
            "SELECT kernel_sha256 FROM winners WHERE op = $1 AND shape = $2 AND target = $3 AND level = $4 AND level_key = $5 AND space_checksum = $6",
        )
        .bind(&kind.op)
        .bind(&kind.shape)
        .bind(&kind.target)
        .bind(level.name())
        .bind(key)
        .bind(space)
        .fetch_optional(&mut **tx)
        .await?
        .map(|r| r.try_get("kernel_sha256"))
        .transpose()?;
        let Some(win) = elect(&tallies, incumbent.as_deref(), policy) else {
            sqlx::query("DELETE FROM winners WHERE op = $1 AND shape = $2 AND target = $3 AND level = $4 AND level_key = $5")
                .bind(&kind.op)
                .bind(&kind.shape)
                .bind(&kind.target)
                .bind(level.name())
                .bind(key)
                .execute(&mut **tx)
                .await?;
            return Ok(None);
        };
        let w = Winner {
            kind: kind.clone(),
            level,
            level_key: key.to_string(),
            space_checksum: space.to_string(),
            kernel_sha256: win.kernel_sha256.clone(),
            votes: win.votes,
            total_votes: tallies.iter().map(|t| t.votes).sum(),
            reports: tallies.iter().map(|t| t.sessions()).max().unwrap_or(0) as i64,
            best_median_us: win.median_us(),
            updated_at: now,
        };
        sqlx::query(
            "INSERT INTO winners (op, shape, target, level, level_key, space_checksum, kernel_sha256, votes, total_votes, reports, best_median_us, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (op, shape, target, level, level_key) DO UPDATE SET \
             space_checksum = excluded.space_checksum, kernel_sha256 = excluded.kernel_sha256, votes = excluded.votes, \
             total_votes = excluded.total_votes, reports = excluded.reports, best_median_us = excluded.best_median_us, \
             updated_at = excluded.updated_at",
        )
        .bind(&w.kind.op)
        .bind(&w.kind.shape)
        .bind(&w.kind.target)
        .bind(level.name())
        .bind(&w.level_key)
        .bind(&w.space_checksum)
        .bind(&w.kernel_sha256)
        .bind(w.votes)
        .bind(w.total_votes)
        .bind(w.reports)
        .bind(w.best_median_us)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        Ok(Some(w))
    }

    /// Every kernel's tally at one key, from each session's latest report.
    async fn tally_in(&self, tx: &mut sqlx::Transaction<'_, Any>, kind: &KernelKind, space: &str, level: Level, key: &str) -> Result<Vec<Tally>> {
        let (votes, flags) = match level {
            Level::Device => (votes_sql!("device_key"), flags_sql!("device_key")),
            Level::Arch => (votes_sql!("arch_key"), flags_sql!("arch_key")),
            _ => (votes_sql!("vendor_key"), flags_sql!("vendor_key")),
        };
        let rows = sqlx::query(votes)
            .bind(&kind.op)
            .bind(&kind.shape)
            .bind(&kind.target)
            .bind(space)
            .bind(key)
            .fetch_all(&mut **tx)
            .await?;
        // (session, report, created_at, kernel, weight, median)
        let mut votes: Vec<(String, String, i64, String, i64, f64)> = Vec::with_capacity(rows.len());
        for r in &rows {
            votes.push((
                r.try_get("session_id")?,
                r.try_get("report_id")?,
                r.try_get("created_at")?,
                r.try_get("kernel_sha256")?,
                r.try_get("weight")?,
                r.try_get("median_us")?,
            ));
        }
        // A session's weight is capped at one report: its latest.
        let mut latest: std::collections::HashMap<&str, (i64, &str)> = std::collections::HashMap::new();
        for v in &votes {
            let e = latest.entry(&v.0).or_insert((v.2, &v.1));
            if (v.2, v.1.as_str()) > (e.0, e.1) {
                *e = (v.2, &v.1);
            }
        }
        let mut by_kernel: std::collections::BTreeMap<&str, Tally> = std::collections::BTreeMap::new();
        for v in votes.iter().filter(|v| latest.get(v.0.as_str()).is_some_and(|l| l.1 == v.1)) {
            let t = by_kernel.entry(&v.3).or_insert_with(|| Tally { kernel_sha256: v.3.clone(), votes: 0, times: Vec::new(), flagged_by: 0 });
            t.votes += v.4;
            t.times.push((v.0.clone(), v.5));
        }
        let flag_rows = sqlx::query(flags).bind(&kind.op).bind(&kind.shape).bind(&kind.target).bind(key).fetch_all(&mut **tx).await?;
        for r in &flag_rows {
            let sha: String = r.try_get("kernel_sha256")?;
            if let Some(t) = by_kernel.get_mut(sha.as_str()) {
                t.flagged_by = r.try_get::<i64, _>("n")? as usize;
            }
        }
        let mut out: Vec<Tally> = by_kernel.into_values().collect();
        for t in &mut out {
            t.times.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Ok(out)
    }

    /// Whether `ticket` was already quoted by a measurement or a flag.
    /// Advisory (the answer may change before the caller acts on it):
    /// [`Db::record_report`] and [`Db::flag`] check again in their
    /// transactions. The server asks first so that a used ticket is refused
    /// before any of its entry's other checks.
    pub async fn ticket_used(&self, ticket: &str) -> Result<bool> {
        let mut conn = self.pool.acquire().await?;
        for sql in ["SELECT 1 AS one FROM measurements WHERE ticket = $1", "SELECT 1 AS one FROM flags WHERE ticket = $1"] {
            if sqlx::query(sql).bind(ticket).fetch_optional(&mut *conn).await?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Flags `kernel` as wrong on the device of `keys` (the server's own
    /// recomputation disagreed with a client's samples), then re-elects the
    /// winners of every space at the three keys, so a kernel flagged by a
    /// quorum of sessions stops winning at once. The flag consumes `ticket`,
    /// the one the samples were sent under: a ticket already used by a
    /// measurement or a flag is refused with [`DbError::TicketReused`], so
    /// one ticket flags at most once and never after it voted.
    #[allow(clippy::too_many_arguments)]
    pub async fn flag(&self, kernel: &str, kind: &KernelKind, keys: &DeviceKeys, session_id: &str, ticket: &str, reason: &str, policy: &VotePolicy) -> Result<()> {
        let now = now_ms();
        let _w = self.write.lock().await;
        let mut tx = self.pool.begin().await?;
        self.serialise_writers(&mut tx).await?;
        if ticket_used(&mut tx, ticket).await? {
            return Err(DbError::TicketReused(kernel.to_string()));
        }
        insert_flag(&mut tx, kernel, kind, keys, session_id, Some(ticket), reason, now).await?;
        for level in Level::STORED {
            let key = keys.key(level).unwrap_or_default();
            let space: Option<String> = sqlx::query(
                "SELECT space_checksum FROM winners WHERE op = $1 AND shape = $2 AND target = $3 AND level = $4 AND level_key = $5",
            )
            .bind(&kind.op)
            .bind(&kind.shape)
            .bind(&kind.target)
            .bind(level.name())
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| r.try_get("space_checksum"))
            .transpose()?;
            if let Some(space) = space {
                self.elect(&mut tx, kind, &space, level, keys, policy, now).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Distinct sessions that flagged `kernel` for `kind` on `device_key`.
    pub async fn flags_for(&self, kernel: &str, kind: &KernelKind, device_key: &str) -> Result<i64> {
        let r = sqlx::query(
            "SELECT COUNT(DISTINCT session_id) AS n FROM flags WHERE kernel_sha256 = $1 AND op = $2 AND shape = $3 AND target = $4 AND device_key = $5",
        )
        .bind(kernel)
        .bind(&kind.op)
        .bind(&kind.shape)
        .bind(&kind.target)
        .bind(device_key)
        .fetch_one(&self.pool)
        .await?;
        Ok(r.try_get("n")?)
    }

    /// The most specific winner for `kind` on a device with `keys`: the exact
    /// device key, then its architecture, then its vendor. A winner whose
    /// space checksum differs from `space_checksum` (when given) is stale and
    /// skipped. `None` means the caller should answer with the portable default.
    pub async fn best(&self, kind: &KernelKind, keys: &DeviceKeys, space_checksum: Option<&str>) -> Result<Option<Best>> {
        let all = self.winners_for(kind, keys).await?;
        Ok(all.into_iter().find(|b| space_checksum.is_none_or(|c| c == b.winner.space_checksum)))
    }

    /// Every stored winner for `kind` at the levels of `keys`, most specific
    /// first, whatever their space checksum (the queue offers them to similar
    /// devices as NNJIT's exploitation set).
    pub async fn winners_for(&self, kind: &KernelKind, keys: &DeviceKeys) -> Result<Vec<Best>> {
        let rows = sqlx::query(BEST_SQL)
            .bind(&kind.op)
            .bind(&kind.shape)
            .bind(&kind.target)
            .bind(&keys.device_key)
            .bind(&keys.arch_key)
            .bind(&keys.vendor_key)
            .fetch_all(&self.pool)
            .await?;
        let mut found: Vec<Best> = Vec::with_capacity(rows.len());
        for r in &rows {
            let level: String = r.try_get("level")?;
            let Some(level) = Level::parse(&level) else { continue };
            let winner = Winner {
                kind: kind.clone(),
                level,
                level_key: r.try_get("level_key")?,
                space_checksum: r.try_get("space_checksum")?,
                kernel_sha256: r.try_get("kernel_sha256")?,
                votes: r.try_get("votes")?,
                total_votes: r.try_get("total_votes")?,
                reports: r.try_get("reports")?,
                best_median_us: r.try_get("best_median_us")?,
                updated_at: r.try_get("updated_at")?,
            };
            found.push(Best { winner, meta_json: r.try_get("meta")? });
        }
        found.sort_by_key(|b| b.winner.level);
        Ok(found)
    }

    /// Most recently seen devices.
    pub async fn devices(&self, limit: i64) -> Result<Vec<DeviceRow>> {
        let rows = sqlx::query(
            "SELECT device_key, arch_key, vendor_key, rho, fingerprint, first_seen, last_seen FROM devices \
             ORDER BY last_seen DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(device_row).collect()
    }

    /// Winners, most recently changed first.
    pub async fn winners(&self, limit: i64) -> Result<Vec<Winner>> {
        let rows = sqlx::query(
            "SELECT op, shape, target, level, level_key, space_checksum, kernel_sha256, votes, total_votes, reports, \
             best_median_us, updated_at FROM winners ORDER BY updated_at DESC, op, shape, target, level, level_key LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let level: String = r.try_get("level")?;
            out.push(Winner {
                kind: KernelKind { op: r.try_get("op")?, shape: r.try_get("shape")?, target: r.try_get("target")? },
                level: Level::parse(&level).unwrap_or(Level::Default),
                level_key: r.try_get("level_key")?,
                space_checksum: r.try_get("space_checksum")?,
                kernel_sha256: r.try_get("kernel_sha256")?,
                votes: r.try_get("votes")?,
                total_votes: r.try_get("total_votes")?,
                reports: r.try_get("reports")?,
                best_median_us: r.try_get("best_median_us")?,
                updated_at: r.try_get("updated_at")?,
            });
        }
        Ok(out)
    }

    /// Most recent reports with their fastest entry.
    pub async fn recent_reports(&self, limit: i64) -> Result<Vec<ReportRow>> {
        let rows = sqlx::query(
            "SELECT r.id, r.session_id, r.op, r.shape, r.target, r.device_key, r.created_at, \
             (SELECT COUNT(*) FROM measurements m WHERE m.report_id = r.id) AS entries, \
             m1.kernel_sha256, m1.median_us \
             FROM reports r JOIN measurements m1 ON m1.report_id = r.id AND m1.rank = 1 \
             ORDER BY r.created_at DESC, r.id LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push(ReportRow {
                id: r.try_get("id")?,
                session_id: r.try_get("session_id")?,
                kind: KernelKind { op: r.try_get("op")?, shape: r.try_get("shape")?, target: r.try_get("target")? },
                device_key: r.try_get("device_key")?,
                entries: r.try_get("entries")?,
                best_kernel: r.try_get("kernel_sha256")?,
                best_median_us: r.try_get("median_us")?,
                created_at: r.try_get("created_at")?,
            });
        }
        Ok(out)
    }

    /// Row counts of every table.
    pub async fn stats(&self) -> Result<Stats> {
        let r = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM devices) AS devices, (SELECT COUNT(*) FROM sessions) AS sessions, \
             (SELECT COUNT(*) FROM kernels) AS kernels, (SELECT COUNT(*) FROM reports) AS reports, \
             (SELECT COUNT(*) FROM measurements) AS measurements, (SELECT COUNT(*) FROM winners) AS winners",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(Stats {
            devices: r.try_get("devices")?,
            sessions: r.try_get("sessions")?,
            kernels: r.try_get("kernels")?,
            reports: r.try_get("reports")?,
            measurements: r.try_get("measurements")?,
            winners: r.try_get("winners")?,
        })
    }

    /// The value of setting `name`, storing `init` first if it has none.
    /// Every server on one database therefore reads the same value.
    pub async fn setting_or_init(&self, name: &str, init: &str) -> Result<String> {
        let _w = self.write.lock().await;
        sqlx::query("INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
            .bind(name)
            .bind(init)
            .execute(&self.pool)
            .await?;
        let row = sqlx::query("SELECT value FROM settings WHERE name = $1").bind(name).fetch_one(&self.pool).await?;
        Ok(row.try_get("value")?)
    }

    /// PostgreSQL: creates an empty database `name` on the same server (for
    /// test isolation and setup scripts). `name` is letters, digits and `_`.
    pub async fn create_database(&self, name: &str) -> Result<()> {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(DbError::BadUrl(format!("database name `{name}`")));
        }
        // Identifiers cannot be bound as parameters; the name was checked above.
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&self.pool).await?;
        Ok(())
    }

    /// SQLite: the journal mode (`wal` once connected). Other engines: `""`.
    pub async fn journal_mode(&self) -> Result<String> {
        if self.backend != Backend::Sqlite {
            return Ok(String::new());
        }
        let row = sqlx::query("PRAGMA journal_mode").fetch_one(&self.pool).await?;
        Ok(row.try_get::<String, _>(0)?.to_lowercase())
    }

    /// Answers a trivial query: the database is reachable.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1 AS one").fetch_one(&self.pool).await?;
        Ok(())
    }
}

/// Whether a measurement or a flag already quoted `ticket`.
async fn ticket_used(tx: &mut sqlx::Transaction<'_, Any>, ticket: &str) -> Result<bool> {
    for sql in ["SELECT 1 AS one FROM measurements WHERE ticket = $1", "SELECT 1 AS one FROM flags WHERE ticket = $1"] {
        if sqlx::query(sql).bind(ticket).fetch_optional(&mut **tx).await?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

#[allow(clippy::too_many_arguments)]
async fn insert_flag(
    tx: &mut sqlx::Transaction<'_, Any>,
    kernel: &str,
    kind: &KernelKind,
    keys: &DeviceKeys,
    session_id: &str,
    ticket: Option<&str>,
    reason: &str,
    now: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO flags (kernel_sha256, op, shape, target, device_key, arch_key, vendor_key, session_id, reason, created_at, ticket) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(kernel)
    .bind(&kind.op)
    .bind(&kind.shape)
    .bind(&kind.target)
    .bind(&keys.device_key)
    .bind(&keys.arch_key)
    .bind(&keys.vendor_key)
    .bind(session_id)
    .bind(reason)
    .bind(now)
    .bind(ticket)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

fn device_row(r: &AnyRow) -> Result<DeviceRow> {
    Ok(DeviceRow {
        keys: DeviceKeys {
            device_key: r.try_get("device_key")?,
            arch_key: r.try_get("arch_key")?,
            vendor_key: r.try_get("vendor_key")?,
            rho: r.try_get("rho")?,
        },
        fingerprint: r.try_get("fingerprint")?,
        first_seen: r.try_get("first_seen")?,
        last_seen: r.try_get("last_seen")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_ranked() {
        assert_eq!((1..=5).map(|r| ranked_weight(r, true)).collect::<Vec<_>>(), [5, 4, 3, 2, 1]);
        assert_eq!(ranked_weight(1, false), 0);
        assert_eq!(ranked_weight(6, true), 0);
    }

    fn tally(sha: &str, votes: i64, times: &[(&str, f64)]) -> Tally {
        Tally { kernel_sha256: sha.into(), votes, times: times.iter().map(|(s, t)| (s.to_string(), *t)).collect(), flagged_by: 0 }
    }

    #[test]
    fn election_needs_a_quorum_and_ignores_flagged_kernels() {
        let p = VotePolicy { quorum: 2, ..VotePolicy::default() };
        let one = [tally("a", 5, &[("s1", 10.0)])];
        assert!(elect(&one, None, &p).is_none());
        let mut two = vec![tally("a", 9, &[("s1", 10.0), ("s2", 10.5)]), tally("b", 8, &[("s1", 11.0), ("s2", 12.0)])];
        assert_eq!(elect(&two, None, &p).unwrap().kernel_sha256, "a");
        two[0].flagged_by = 2;
        assert_eq!(elect(&two, None, &p).unwrap().kernel_sha256, "b");
        two[1].flagged_by = 2;
        assert!(elect(&two, None, &p).is_none());
    }

    #[test]
    fn challengers_must_be_faster_beyond_noise() {
        let p = VotePolicy { quorum: 2, ..VotePolicy::default() };
        // b leads the votes narrowly and is only 1% faster in every session: a stays.
        let close = [
            tally("a", 8, &[("s1", 100.0), ("s2", 200.0), ("s3", 150.0)]),
            tally("b", 9, &[("s1", 99.0), ("s2", 198.0), ("s3", 148.5)]),
        ];
        assert_eq!(elect(&close, Some("a"), &p).unwrap().kernel_sha256, "a");
        assert_eq!(elect(&close, None, &p).unwrap().kernel_sha256, "b");
        // A clear lead in the votes wins whatever the (possibly faked) times say.
        let mut landslide = close.clone();
        landslide[1].votes = 10;
        assert_eq!(elect(&landslide, Some("a"), &p).unwrap().kernel_sha256, "b");
        // Clearly faster in the sessions that timed both, though the devices
        // themselves differ twofold: b takes over.
        let clear = [
            tally("a", 8, &[("s1", 100.0), ("s2", 200.0), ("s3", 150.0)]),
            tally("b", 9, &[("s1", 80.0), ("s2", 161.0), ("s3", 119.0)]),
        ];
        assert_eq!(elect(&clear, Some("a"), &p).unwrap().kernel_sha256, "b");
        // A faster kernel without the votes does not win.
        let unvoted = [tally("a", 15, &[("s1", 100.0), ("s2", 100.0)]), tally("b", 8, &[("s1", 50.0), ("s2", 50.0)])];
        assert_eq!(elect(&unvoted, Some("a"), &p).unwrap().kernel_sha256, "a");
        // An incumbent that lost its eligibility is replaced outright.
        let mut gone = clear.clone();
        gone[0].flagged_by = 2;
        assert_eq!(elect(&gone, Some("a"), &p).unwrap().kernel_sha256, "b");
    }

    #[test]
    fn urls() {
        assert_eq!(normalise_url("webtune.sqlite").unwrap(), (Backend::Sqlite, "sqlite://webtune.sqlite?mode=rwc".into()));
        assert_eq!(normalise_url("sqlite:///tmp/a.db").unwrap().1, "sqlite:///tmp/a.db?mode=rwc");
        assert_eq!(normalise_url("postgres://u@h/d").unwrap().0, Backend::Postgres);
        assert!(normalise_url("mysql://x").is_err());
    }
}
