//! The rows and keys callers exchange with the database.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A fallback level of the lookup, most specific first (CLBlast's order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

    pub(crate) fn parse(s: &str) -> Option<Level> {
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
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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

/// One model-level latency report: a client's median time for one call
/// of a model (e.g. `SentenceEncoder.encode`) at one batch and padded
/// sequence length, on one target.
#[derive(Clone, Debug)]
pub struct NewModelLatency {
    pub session_id: String,
    pub model: String,
    pub weights_sha256: String,
    /// `wasm` or `webgpu`.
    pub target: String,
    pub batch: i64,
    pub seq_len: i64,
    pub median_ms: f64,
    pub runs: i64,
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

/// Outcome of [`crate::Db::record_report`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecordedReport {
    pub report_id: String,
    /// The winners after this report, one per stored level.
    pub winners: Vec<Winner>,
    /// Whether the elections this report took part in put a different
    /// kernel in (or took one out of) any of its keys' seats: what a
    /// server's lookup cache must forget at once. A report that only adds
    /// votes changes no answer but its counts.
    pub seats_changed: bool,
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

/// What the report writer has done since the database was opened
/// ([`crate::Db::group_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GroupStats {
    /// Transactions committed (or failed) by the writer.
    pub groups: u64,
    /// Reports they carried.
    pub reports: u64,
    /// The most reports in one transaction.
    pub largest: u64,
    /// Microseconds spent inside those transactions.
    pub busy_us: u64,
}

/// What this database handle's elector has done since it was opened
/// ([`crate::Db::election_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ElectionStats {
    /// Passes that counted at least one report.
    pub passes: u64,
    /// Reports they counted.
    pub reports: u64,
    /// Microseconds spent inside those passes.
    pub busy_us: u64,
    /// The longest time from a report's commit (its `created_at`) to the
    /// commit of the pass that counted it, in milliseconds: how stale the
    /// winners were at worst.
    pub lag_max_ms: u64,
    /// The mean of that time over the counted reports.
    pub lag_mean_ms: f64,
}
