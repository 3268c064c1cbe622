//! Wire types of the HTTP API: the only place request and response bodies are
//! defined. Requests deny unknown fields so a misspelt field is an error
//! rather than a silently ignored default; new optional fields get
//! `#[serde(default)]`. Each type derives its OpenAPI schema (`ToSchema`,
//! or `IntoParams` for a query), which `crate::http::openapi` assembles into the
//! served document.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToResponse, ToSchema};
use webtune_kernel_db::Level;

/// `POST /v1/sessions`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRequest {
    /// What the client knows about its hardware; see [`super::device`].
    /// Read leniently (a field of another type reads as unknown), so it is
    /// parsed from the raw value rather than here.
    #[schema(value_type = webtune_tuner::Fingerprint)]
    pub fingerprint: serde_json::Value,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionResponse {
    pub session_id: String,
    pub device_key: String,
    pub arch_key: String,
    pub vendor_key: String,
    pub rho: String,
}

/// Query of `GET /v1/kernels/best` and of the candidate queue.
#[derive(Clone, Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct KernelQuery {
    /// The session's device key (lookups only; none gives the default).
    #[serde(default)]
    #[param(max_length = 512)]
    pub device_key: Option<String>,
    /// `matmul`, `batch_matmul`, `matmul_q4` or `matmul_i16` (Wasm only), with an optional epilogue (`matmul+bias+gelu`; not on matmul_q4).
    pub op: String,
    /// Comma-separated dimensions: M,K,N for matmul, matmul_q4 and matmul_i16, B,M,K,N for batch_matmul.
    #[param(pattern = "^[1-9][0-9]{0,9}(,[1-9][0-9]{0,9}){2,3}$", example = "384,768,768")]
    pub shape: String,
    /// `wasm` or `wgsl`.
    pub target: String,
}

/// `GET /v1/kernels/best`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct BestResponse {
    /// Which fallback level answered: device, arch, vendor or default.
    pub level: Level,
    /// The key at that level (absent for the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level_key: Option<String>,
    /// The kernel metadata, exactly as `webtune compile` writes `kernel.json`.
    #[schema(value_type = Object)]
    pub meta: serde_json::Value,
    /// Where to fetch the kernel bytes (path relative to this server).
    pub url: String,
    /// Summed ranked weights behind the winner (0 for the default).
    pub votes: i64,
    /// Reports counted for the winner (0 for the default).
    pub reports: i64,
    /// Checksum of the candidate space the winner was voted in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space_checksum: Option<String>,
    /// How the kernel was chosen: `elected`, `provisional`, `predicted` or `portable`.
    #[serde(default)]
    pub source: Source,
    /// How sure the answer is, from 0 to 1: 1 for an elected winner; for a
    /// provisional one, the sessions that ranked it over the quorum (below
    /// 1); 0 for a prediction or the portable default.
    #[serde(default)]
    pub confidence: f64,
}

/// Where a best-kernel answer came from, most trusted first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A winner a quorum of sessions elected at `level`.
    Elected,
    /// Before the quorum: the kernel a strict majority of the key's first
    /// sessions ranked (none flagged it), never stored; the quorum's
    /// election replaces it.
    Provisional,
    /// Nobody voted for this device class yet: the first candidate of the
    /// lite space its keys imply, restricted to what every device of the
    /// key can load (no subgroups, relaxed SIMD and threads only where the
    /// key says so). `level` is `default`.
    Predicted,
    /// No device key was given: the portable default schedule.
    #[default]
    Portable,
}

/// One Server-Sent Event `candidate` of the queue.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct CandidateEvent {
    /// Position in the queue, from 0.
    pub index: usize,
    /// Length of the queue.
    pub total: usize,
    /// `exploit` (a winner of a similar device) or `explore` (the lite space).
    pub source: String,
    pub sha256: String,
    pub url: String,
    /// The kernel metadata, exactly as `webtune compile` writes `kernel.json`.
    #[schema(value_type = Object)]
    pub meta: serde_json::Value,
    /// Quote this in the report: it binds session, kernel, seed, space and expiry.
    pub ticket: String,
    /// Seed of the inputs to run the candidate on: `webtune_compiler::reference::inputs(op, seed)`.
    pub seed: u64,
    /// Flat output positions whose values the report must return (`samples`);
    /// the server recomputes them from the seed and refuses wrong ones.
    #[serde(default)]
    pub check: Vec<u64>,
    pub space_checksum: String,
}

/// The final `done` event of the queue.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct QueueDone {
    pub total: usize,
    /// Candidates not streamed: the server could not compile them (a
    /// compiler bug; logged), or they compiled to a kernel this queue had
    /// already streamed.
    pub skipped: usize,
}

/// `POST /v1/sessions/{id}/reports`: the client's top-N, fastest first.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportRequest {
    pub op: String,
    /// The dimensions, e.g. `[384, 768, 768]`.
    #[serde(deserialize_with = "integral::u32s")]
    #[schema(min_items = 3, max_items = 4)]
    pub shape: Vec<u32>,
    pub target: String,
    /// The top 1 to 5, fastest first.
    #[schema(min_items = 1, max_items = 5)]
    pub entries: Vec<ReportEntry>,
}

#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportEntry {
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub sha256: String,
    #[schema(max_length = 512)]
    pub ticket: String,
    /// Median time of one call, microseconds.
    pub median_us: f64,
    /// Timed runs behind the median.
    #[serde(deserialize_with = "integral::u32")]
    pub runs: u32,
    /// Whether the client's check of the output passed.
    pub output_ok: bool,
    /// The output values at the candidate's `check` positions, from a run on
    /// the ticket's seed. Required when `output_ok` is true.
    #[serde(default)]
    pub samples: Vec<f32>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ReportResponse {
    pub report_id: String,
    pub accepted: usize,
    /// The winners after this report at the device, arch and vendor levels.
    pub winners: Vec<WinnerView>,
}

/// Reports one batch may carry at most. A batch of reports costs the
/// session one request of its rate (a report is only as many as the tickets
/// its queues gave it, each good once), so an app that tunes a whole model
/// sends its reports a few at a time instead of one request each.
pub const MAX_BATCH_REPORTS: usize = 16;

/// `POST /v1/sessions/{id}/reports/batch`: several reports at once, each
/// checked and stored as if sent alone.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportBatch {
    /// 1 to 16 reports, each of its own op, shape and target.
    #[schema(min_items = 1, max_items = 16)]
    pub reports: Vec<ReportRequest>,
}

/// The answer to a batch: one result per report, in the batch's order.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ReportBatchResponse {
    pub results: Vec<ReportResult>,
}

/// One report's fate in a batch: the status it would have had alone (200
/// stored, else the error's), and the answer or the error.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ReportResult {
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<ReportResponse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct WinnerView {
    pub level: Level,
    pub level_key: String,
    pub sha256: String,
    pub votes: i64,
    pub total_votes: i64,
    pub reports: i64,
    pub best_median_us: f64,
}

/// Every error: what was wrong and how to fix it.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, ToResponse)]
#[response(description = "What was wrong and how to fix it")]
pub struct ErrorBody {
    pub error: String,
}

/// `GET /v1/models`: the bundles in the model store.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ModelList {
    pub models: Vec<ModelSummary>,
}

/// One bundle in `GET /v1/models`; its manifest is at `/v1/models/{name}`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ModelSummary {
    pub name: String,
    /// `bert` (an encoder, manifest format 1) or `llama` (a decoder, format 2).
    pub architecture: String,
    /// `feature-extraction` (sentence embeddings) or `text-generation`.
    pub task: String,
    pub hidden_size: usize,
    pub layers: usize,
    pub max_seq_length: u32,
    /// SHA-256 of the manifest's bytes: its ETag.
    pub manifest_sha256: String,
}

/// `POST /v1/models/{name}/latency`: one model-level latency measured by a
/// client. The device keys come from the session; a body that names one is
/// refused (unknown field).
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LatencyRequest {
    #[schema(pattern = "^[0-9a-f]{32}$")]
    pub session_id: String,
    /// `wasm` or `webgpu`.
    pub target: String,
    /// Texts per call.
    #[serde(deserialize_with = "integral::u32")]
    pub batch: u32,
    /// Padded sequence length of the call, tokens (`[CLS]` and `[SEP]` included).
    #[serde(deserialize_with = "integral::u32")]
    pub seq_len: u32,
    /// Median time of one call, milliseconds.
    pub median_ms: f64,
    /// Timed calls behind the median.
    #[serde(deserialize_with = "integral::u32")]
    pub runs: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LatencyResponse {
    pub id: String,
    pub device_key: String,
}

/// `GET /v1/models/{name}/plan?device_key=&batch=&seq_len=`
#[derive(Clone, Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PlanQuery {
    /// The session's device key.
    #[param(required = true, max_length = 512)]
    pub device_key: Option<String>,
    /// Texts per call, 1 to 256 (default 1).
    pub batch: Option<u32>,
    /// Padded tokens (default min(128, max_seq_length)).
    pub seq_len: Option<u32>,
}

/// Which target runs the model faster on a device class, and the matrix
/// products (kernels) one layer of it runs at this batch and length.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct PlanResponse {
    pub model: String,
    pub device_key: String,
    pub batch: u32,
    pub seq_len: u32,
    /// `wasm`, `webgpu`, or null when the measurements do not say.
    pub target: Option<String>,
    /// Why this target (or why none).
    pub reason: String,
    /// The fallback level whose reports decided, when one did.
    pub level: Option<Level>,
    pub level_key: Option<String>,
    /// Every target's latency at the deciding level (or the most specific
    /// level with any report).
    pub targets: Vec<webtune_kernel_db::plan::TargetLatency>,
    pub layers: usize,
    pub kernels: Vec<PlanKernel>,
}

/// One matrix product of a layer, with the lookup of its best kernel per target.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct PlanKernel {
    /// `qkv`, `scores`, `context`, `attn_out`, `ffn_in` or `ffn_out`.
    pub name: String,
    pub op: String,
    pub shape: Vec<u32>,
    /// `GET /v1/kernels/best` URLs by model target (`wasm`, `webgpu`).
    pub best: std::collections::BTreeMap<String, String>,
}

/// JSON has one number type: `2230.0` is the integer 2230 to JSON Schema and
/// to JavaScript, so integer fields take any number with no fractional part
/// that fits, and refuse the rest with serde's message.
mod integral {
    use serde::Deserialize;
    use serde::de::{Deserializer, Error};

    fn whole<E: Error>(n: serde_json::Number) -> Result<u32, E> {
        let v = n.as_u64().map(|u| u as f64).or_else(|| n.as_f64()).unwrap_or(f64::NAN);
        if v.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&v) {
            Ok(v as u32)
        } else {
            Err(E::custom(format!("expected a whole number from 0 to {}, got {n}", u32::MAX)))
        }
    }

    pub fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        whole(serde_json::Number::deserialize(d)?)
    }

    pub fn u32s<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
        Vec::<serde_json::Number>::deserialize(d)?.into_iter().map(whole).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(runs: &str) -> Result<ReportEntry, serde_json::Error> {
        serde_json::from_str(&format!(r#"{{"sha256": "", "ticket": "", "median_us": 1.5, "runs": {runs}, "output_ok": false}}"#))
    }

    #[test]
    fn integer_fields_take_whole_numbers_in_any_spelling() {
        assert_eq!(entry("2230").unwrap().runs, 2230);
        assert_eq!(entry("2230.0").unwrap().runs, 2230);
        assert_eq!(entry("4294967295").unwrap().runs, u32::MAX);
        for bad in ["2230.5", "-1", "4294967296", "1e300", "\"7\""] {
            assert!(entry(bad).is_err(), "{bad}");
        }
        let r: ReportRequest =
            serde_json::from_str(r#"{"op": "matmul", "shape": [384, 768.0, 768], "target": "wasm", "entries": []}"#).unwrap();
        assert_eq!(r.shape, vec![384, 768, 768]);
        assert!(
            serde_json::from_str::<ReportRequest>(r#"{"op": "matmul", "shape": [384, 0.5, 768], "target": "wasm", "entries": []}"#)
                .is_err()
        );
    }
}

/// Query of `GET /v1/rho`.
#[derive(Clone, Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RhoQuery {
    /// `wasm` or `wgsl`.
    pub target: String,
}

/// One kernel of a ρ pair.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RhoKernel {
    /// Where to fetch the kernel bytes (path relative to this server).
    pub url: String,
    /// The kernel metadata, exactly as `webtune compile` writes `kernel.json`.
    #[schema(value_type = Object)]
    pub meta: serde_json::Value,
}

/// One primitive of ρ: a base kernel and a variant that differs in it alone.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RhoPair {
    pub name: String,
    /// What a `1` bit means.
    pub meaning: String,
    pub op: String,
    pub shape: Vec<u32>,
    pub base: RhoKernel,
    pub variant: RhoKernel,
    /// The variant uses relaxed SIMD: a client without it sets the bit to 0.
    pub needs_relaxed_simd: bool,
}

/// `GET /v1/rho`: the on-device microbenchmark that gives a fingerprint its
/// `rho`, one bit per pair in order.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RhoResponse {
    /// Changes whenever a pair or the margin does: a client re-measures.
    pub version: String,
    /// A bit is 1 when variant / base < 1 − margin.
    pub margin: f64,
    pub pairs: Vec<RhoPair>,
}
