//! # webtune-kernel-db
//!
//! The crowdsourced kernel database of NNJIT section 5.3: devices, compiled
//! kernels, every raw measurement, top-N reports with ranked weights, and the
//! winners voted from them per (op, shape, target, fallback level, key).
//!
//! **This is the only crate in webtune with SQL.** Every statement lives in
//! this crate's modules or in the numbered files of the top-level
//! `migrations/` folder. One module per concept:
//!
//! - `types`: the rows and keys callers exchange with the database;
//! - `elect`: the pure election rule ([`elect`], [`VotePolicy`], [`Tally`]),
//!   and its stepwise form over running tallies ([`elect_step`]), no SQL;
//! - `connect`: URLs, the pool, migrations, settings;
//! - `sessions`: devices and sessions;
//! - `kernels`: content-addressed kernel bytes and metadata;
//! - `reports`: reports, raw measurements, flags, and the
//!   group-committing writer that stores them;
//! - `elector`: the task that counts stored reports into the running
//!   tallies and re-elects the keys they touch, many reports a pass;
//! - `winners`: lookups along the fallback chain;
//! - [`fallback`]: the chain itself (device → arch → vendor, the most
//!   specific level that answers wins), which the kernel lookup
//!   ([`Db::best`], with [`fallback::Fit`]: space and threads) and the
//!   model plan ([`Db::model_choice`]) both walk, no SQL;
//! - `bundles`: the winners a static bundle exports, and a bundle's winners
//!   and kernels stored in one transaction ([`Db::import_winners`]: never an
//!   older election over a newer one);
//! - `dashboard`: listings and counts for the dashboard and `/metrics`;
//! - `retention`: old raw reports folded into per-day sums ([`Db::compact`]);
//! - `models`: model-level latency reports, and [`plan`], the pure rule
//!   that picks the faster target from them.
//!
//! One code path serves two engines through sqlx's `Any` driver:
//! SQLite (the embedded default: a file created and migrated on first start,
//! in WAL mode) and PostgreSQL. The SQL is the subset both accept with one
//! meaning (`$N` placeholders, `ON CONFLICT`, `TEXT`/`BIGINT`/`DOUBLE
//! PRECISION`/`BYTEA`); the migration header lists the rules.
//!
//! ## Invariants
//! - `kernels` rows are content-addressed (`sha256` of `bytes`) and never change.
//! - `measurements`, `reports` and `model_latency` are append only, except that
//!   [`Db::compact`] folds whole UTC days of reports older than its cutoff
//!   into per-day sums in the transaction that deletes them (after counting
//!   what is left uncounted). Winners are derived data: a report's
//!   transaction stores it with a row of `uncounted`, and the elector's pass
//!   that deletes that row updates the running tallies (`ballots`: each
//!   session's latest report per kind and space, one row per kernel
//!   carrying the session's three keys; `tallies`: their sums per level,
//!   key and kernel) and
//!   re-elects the keys it touched from them, in one transaction, so every
//!   stored report is counted exactly once. Once nothing is uncounted
//!   ([`Db::flush_elections`]) the tallies equal a recount of the history
//!   (the migration that added them built them so; property tests check
//!   that they elect what [`elect`] elects on the full history).
//!   [`Db::record_report`] answers once its report is durable and counted;
//!   [`Db::store_report`] once it is durable, its count following within
//!   about two passes of the elector.
//! - Concurrent reports share a transaction (group commit); each is stored
//!   under its own savepoint, so one that fails a check fails alone.
//! - A vote counts only toward winners of the candidate space it was cast in
//!   (its `space_checksum`); a winner row carries that checksum and a lookup
//!   made under another checksum skips it. One winner row per key: an
//!   election in one space replaces another space's winner only with an
//!   eligible kernel of its own, and never deletes it.
//! - A ticket is accepted once: a second measurement quoting it is refused
//!   with [`DbError::TicketReused`].
//! - SQLite: writes are serialised by one lock per [`Db`] and `BEGIN
//!   IMMEDIATE`, so the file never sees two writers (no `SQLITE_BUSY`
//!   upgrades). PostgreSQL: no global lock; a report's transaction locks no
//!   key (it only adds rows of its own), and every transaction that elects
//!   winners (an elector's pass, a flag) first takes the advisory lock of
//!   each winner key it touches (op, shape, target, level, key), in one
//!   sorted order, and holds them until it commits, so two elections at one
//!   key never interleave and an election sees every count committed
//!   before it; one elector's pass runs at a time on the database (the
//!   others leave it the reports: every pass elects at the shared arch and
//!   vendor keys). Imports and compaction take the writers'
//!   lock exclusively. A group of reports commits without waiting for the
//!   disk and is acknowledged only once a later synchronous transaction
//!   proved it durable (see `reports`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), webtune_kernel_db::DbError> {
//! use webtune_kernel_db::Db;
//! let db = Db::connect("sqlite://webtune.sqlite").await?; // created and migrated
//! let stats = db.stats().await?;
//! assert_eq!(stats.reports, 0);
//! # Ok(()) }
//! ```

mod bundles;
mod connect;
mod dashboard;
mod elect;
mod elector;
pub mod fallback;
mod kernels;
mod models;
pub mod plan;
mod reports;
mod retention;
mod sessions;
mod types;
mod winners;

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

pub use bundles::Imported;
pub use connect::{Db, migrate_to};
pub use dashboard::{DashboardCounts, DeviceGroup, FlagHour, HourCount, SeriesBucket, hour_of};
pub use elect::{
    Ballot, Evidence, Standing, Step, TIME_WINDOW, Tally, VotePolicy, elect, elect_step, flag_excluded, provisional, provisional_confidence,
};
pub use reports::{PlanSample, StatementPlan};
pub use retention::Compacted;
pub use types::*;
pub use winners::Provisional;

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
    /// A stored row this code cannot read (written by something else).
    #[error("corrupt database: {0}")]
    Corrupt(String),
    /// The transaction that carried a group of reports failed as a whole
    /// (see [`Db::record_report`]); none of them was stored.
    #[error("database: {0}")]
    Group(String),
    /// The operating system's random generator failed; ids are never made
    /// from anything guessable instead.
    #[error("no randomness for an id: {0}")]
    Random(String),
}

pub type Result<T, E = DbError> = std::result::Result<T, E>;

/// The running tallies recounted from the raw reports and measurements:
/// `ballots` and `tallies` replaced by what counting every stored report at
/// once gives. For tests (and audits of a copy) that compare it with what
/// the elector's passes built; run it with no report uncounted.
#[doc(hidden)]
pub const RECOUNT_SQL: &str = include_str!("recount.sql");

/// The SQL engine behind a [`Db`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Sqlite,
    Postgres,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A random 128-bit identifier in hex, from the operating system's
/// generator. Session ids and the ticket secret are made from it, so there is
/// no fallback to anything guessable: a failing generator is an error.
pub fn random_id() -> Result<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| DbError::Random(e.to_string()))?;
    Ok(hex::encode(b))
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}
