//! Model plans and model-level latencies: which target (wasm or webgpu)
//! runs a model faster on a device class, and the reports it is chosen from.
//!
//! The walk over the device's keys and the choice at each level are
//! kernel-db's ([`webtune_kernel_db::Db::model_choice`], through the same
//! fallback walk as kernel lookups); this room checks the request against
//! the model's manifest, words the reason, and lists the matrix products of
//! one layer with their best-kernel lookups. The edge reads the manifest
//! from the model store and hands it here.
//!
//! A decoder (format 2) is measured per decode step: `batch` 1 (one
//! sequence) and `seq_len` the position bucket the step ran at (the
//! browser's `TextGenerator` reports powers of two from 64, capped by its
//! context), at most the model's context; its plan lists the products of
//! one decode step (`M` = 1, from the decoder graph), each once.

use webtune_kernel_db::{DeviceKeys, NewModelLatency, Session};
use webtune_models::graph::{DecoderGraph, Step, graph_of};
use webtune_models::{DecoderManifest, ModelManifest};

use super::protocol::{LatencyRequest, LatencyResponse, PlanKernel, PlanResponse};
use super::{Error, MAX_KEY_LEN, MIN_RUNS, Result, Service};

/// Model targets a latency may be reported for, and the kernel target each runs.
pub const TARGETS: [(&str, &str); 2] = [("wasm", "wasm"), ("webgpu", "wgsl")];
/// Largest batch a latency report or plan may name.
pub const MAX_BATCH: u32 = 256;

fn check_shape(m: &ModelManifest, batch: u32, seq_len: u32) -> Result<()> {
    let m = match m {
        ModelManifest::Encoder(m) => m,
        ModelManifest::Decoder(d) => return check_decoder_shape(d, batch, seq_len),
    };
    if !(1..=MAX_BATCH).contains(&batch) {
        return Err(Error::unprocessable(format!("batch must be from 1 to {MAX_BATCH} texts, got {batch}")));
    }
    if !(1..=m.max_seq_length).contains(&seq_len) {
        return Err(Error::unprocessable(format!(
            "seq_len must be from 1 to the model's max_seq_length {}, got {seq_len}",
            m.max_seq_length
        )));
    }
    Ok(())
}

/// A decoder's step: one sequence, at a position bucket within its context.
fn check_decoder_shape(m: &DecoderManifest, batch: u32, seq_len: u32) -> Result<()> {
    if batch != 1 {
        return Err(Error::unprocessable(format!(
            "batch must be 1 for the text-generation model `{}` (a decode step runs one sequence), got {batch}",
            m.name
        )));
    }
    let context = u32::try_from(m.config.context_length).unwrap_or(u32::MAX);
    if !(1..=context).contains(&seq_len) {
        return Err(Error::unprocessable(format!(
            "seq_len must be from 1 to the model's context_length {context} (the decode step's position bucket), got {seq_len}"
        )));
    }
    Ok(())
}

/// The products of one decode step (`M` = 1) of `g`, each once, named by
/// the weight of their first step without its block prefix (`attn_qkv`,
/// `ffn_down`, `output`, ...), heaviest first.
fn decode_products(g: &DecoderGraph) -> Vec<(String, String, Vec<u32>)> {
    g.products(1)
        .into_iter()
        .map(|p| {
            let name = g
                .steps
                .iter()
                .find_map(|s| match s {
                    Step::Matmul { kernel, weight, k, n, .. } if *kernel == p.op && [*k, *n] == p.shape[1..] => {
                        Some(weight.rsplit('.').next().unwrap_or(weight).to_string())
                    }
                    _ => None,
                })
                .unwrap_or_else(|| p.op.clone());
            (name, p.op, p.shape.to_vec())
        })
        .collect()
}

/// A plan's device key: required, and bounded.
pub fn check_device_key(device_key: &str) -> Result<()> {
    if device_key.is_empty() || device_key.len() > MAX_KEY_LEN {
        return Err(Error::bad_request(format!(
            "device_key is required (1 to {MAX_KEY_LEN} bytes): the device_key of the session the latencies were reported with"
        )));
    }
    Ok(())
}

impl Service {
    /// Stores one model-level latency of `m` measured in `session` (the
    /// device keys come from the session).
    pub async fn record_latency(&self, session: &Session, m: &ModelManifest, req: LatencyRequest) -> Result<LatencyResponse> {
        if !TARGETS.iter().any(|(t, _)| *t == req.target) {
            return Err(Error::unprocessable(format!("target must be `wasm` or `webgpu`, got `{}`", req.target)));
        }
        check_shape(m, req.batch, req.seq_len)?;
        if !(req.median_ms.is_finite() && req.median_ms > 0.0 && req.median_ms <= 600_000.0) {
            return Err(Error::unprocessable(format!(
                "median_ms must be a positive number of milliseconds up to 600000, got {}",
                req.median_ms
            )));
        }
        if req.runs < MIN_RUNS || req.runs > 1_000_000 {
            return Err(Error::unprocessable(format!(
                "runs must be from {} to 10^6 (a median needs repeated timed calls), got {}",
                MIN_RUNS, req.runs
            )));
        }
        let (name, weights) = match m {
            ModelManifest::Encoder(m) => (&m.name, &m.weights.sha256),
            ModelManifest::Decoder(m) => (&m.name, &m.weights.sha256),
        };
        let row = NewModelLatency {
            session_id: session.id.clone(),
            model: name.clone(),
            weights_sha256: weights.clone(),
            target: req.target,
            batch: req.batch.into(),
            seq_len: req.seq_len.into(),
            median_ms: req.median_ms,
            runs: req.runs.into(),
        };
        let id = self.db.record_model_latency(&row, &session.keys).await?;
        Ok(LatencyResponse { id, device_key: session.keys.device_key.clone() })
    }

    /// The plan of `m` for `device_key` at `batch` (default 1) and `seq_len`
    /// (default the model's limit, at most 128).
    pub async fn model_plan(
        &self,
        m: &ModelManifest,
        device_key: String,
        batch: Option<u32>,
        seq_len: Option<u32>,
    ) -> Result<PlanResponse> {
        check_device_key(&device_key)?;
        let batch = batch.unwrap_or(1);
        let seq_len = seq_len.unwrap_or(m.max_seq_length().min(128));
        check_shape(m, batch, seq_len)?;
        let (name, layers, products) = match m {
            ModelManifest::Encoder(e) => {
                let products = webtune_models::matmuls(&e.config, batch, seq_len)
                    .ok_or_else(|| Error::unprocessable("batch × seq_len is too large"))?
                    .into_iter()
                    .map(|k| (k.name.to_string(), k.op.to_string(), k.shape))
                    .collect();
                (&e.name, e.config.num_hidden_layers, products)
            }
            ModelManifest::Decoder(d) => {
                let g = graph_of(d).map_err(|e| Error::unprocessable(format!("model `{}`: {e}", d.name)))?;
                (&d.name, d.config.num_layers, decode_products(&g))
            }
        };
        let keys = self.keys_of(&device_key).await?.unwrap_or_else(|| DeviceKeys {
            device_key: device_key.clone(),
            arch_key: String::new(),
            vendor_key: String::new(),
            rho: String::new(),
        });
        let quorum = self.settings.policy.quorum;
        let choice = self.db.model_choice(name, batch.into(), seq_len.into(), &keys, quorum).await?;
        let at = format!("batch {batch}, seq_len {seq_len}");
        let summary = choice.summary;
        let reason = match (&choice.target, choice.level, &choice.key) {
            (Some(target), Some(level), Some(key)) => {
                let other = summary
                    .iter()
                    .filter(|t| &t.target != target && t.sessions >= quorum.max(1))
                    .map(|t| t.median_ms)
                    .fold(f64::INFINITY, f64::min);
                let mine = summary.iter().find(|t| &t.target == target).map_or(f64::NAN, |t| t.median_ms);
                format!("{target} is faster at {at} on {} `{key}`: median {mine:.1} ms against {other:.1} ms", level.name())
            }
            (None, Some(level), Some(key)) => {
                let listed: Vec<String> = summary.iter().map(|t| format!("{} from {} session(s)", t.target, t.sessions)).collect();
                format!(
                    "not enough measurements at {at} on {} `{key}` ({}); each target needs reports from {quorum} session(s): POST /v1/models/{}/latency",
                    level.name(),
                    listed.join(", "),
                    name
                )
            }
            _ => format!(
                "no latency reports for {name} at {at} from this device class yet: measure both targets and POST /v1/models/{name}/latency"
            ),
        };
        let kernels = products
            .into_iter()
            .map(|(kname, op, kshape)| {
                let shape: Vec<String> = kshape.iter().map(u32::to_string).collect();
                let best = TARGETS
                    .iter()
                    .map(|(t, kt)| {
                        let url = format!(
                            "/v1/kernels/best?device_key={}&op={}&shape={}&target={kt}",
                            encode_query(&device_key),
                            encode_query(&op),
                            shape.join(",")
                        );
                        (t.to_string(), url)
                    })
                    .collect();
                PlanKernel { name: kname, op, shape: kshape, best }
            })
            .collect();
        Ok(PlanResponse {
            model: name.clone(),
            device_key,
            batch,
            seq_len,
            target: choice.target,
            reason,
            level: choice.level,
            level_key: choice.key,
            targets: summary,
            layers,
            kernels,
        })
    }
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
