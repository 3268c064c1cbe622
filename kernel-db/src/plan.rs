//! Which target runs a model faster on a device class: the pure rule behind
//! `GET /v1/models/{name}/plan`, apart from SQL.
//!
//! Input: every model-latency report at one fallback level (one key), for
//! one model, batch and sequence length. Each session counts once per target
//! (the median of its reports), so one client reporting often cannot outvote
//! others; a target's latency is the median over its sessions, and it is
//! considered only with at least `quorum` sessions. The faster of the two
//! considered targets wins; with fewer than two considered, there is no
//! answer at this level and the walk ([`crate::fallback`]) tries the next one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One stored latency report, as the rule needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyRow {
    pub session_id: String,
    pub target: String,
    pub median_ms: f64,
}

/// One target's standing at a key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TargetLatency {
    pub target: String,
    /// Median over sessions of each session's median.
    pub median_ms: f64,
    pub sessions: usize,
    pub reports: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Every target's latency at one key, by target name.
pub fn summarise(rows: &[LatencyRow]) -> Vec<TargetLatency> {
    let mut by: BTreeMap<&str, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    for r in rows {
        by.entry(&r.target).or_default().entry(&r.session_id).or_default().push(r.median_ms);
    }
    by.into_iter()
        .map(|(target, sessions)| TargetLatency {
            target: target.to_string(),
            reports: sessions.values().map(Vec::len).sum(),
            sessions: sessions.len(),
            median_ms: median(sessions.into_values().map(median).collect()),
        })
        .collect()
}

/// The faster target among those with at least `quorum` sessions, when at
/// least two targets have that many.
pub fn faster(summary: &[TargetLatency], quorum: usize) -> Option<&TargetLatency> {
    let considered: Vec<&TargetLatency> = summary.iter().filter(|t| t.sessions >= quorum.max(1)).collect();
    if considered.len() < 2 {
        return None;
    }
    considered.into_iter().min_by(|a, b| a.median_ms.total_cmp(&b.median_ms))
}

/// What the walk over a device's levels found ([`crate::Db::model_choice`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Choice {
    /// The level that decided, else the most specific one with any reports;
    /// `None` when no level has any.
    pub level: Option<crate::Level>,
    pub key: Option<String>,
    /// The faster target, when a level decided.
    pub target: Option<String>,
    /// Every target's latency at that level.
    pub summary: Vec<TargetLatency>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(s: &str, t: &str, ms: f64) -> LatencyRow {
        LatencyRow { session_id: s.into(), target: t.into(), median_ms: ms }
    }

    #[test]
    fn each_session_counts_once_and_the_median_decides() {
        // Session a reports wasm ten times at 1 ms: it still counts once.
        let mut rows: Vec<LatencyRow> = (0..10).map(|_| row("a", "wasm", 1.0)).collect();
        rows.extend([row("b", "wasm", 50.0), row("c", "wasm", 60.0)]);
        rows.extend([row("a", "webgpu", 20.0), row("b", "webgpu", 30.0), row("b", "webgpu", 40.0)]);
        let s = summarise(&rows);
        assert_eq!(s[0], TargetLatency { target: "wasm".into(), median_ms: 50.0, sessions: 3, reports: 12 });
        assert_eq!(s[1], TargetLatency { target: "webgpu".into(), median_ms: 27.5, sessions: 2, reports: 3 });
        assert_eq!(faster(&s, 2).unwrap().target, "webgpu");
        // Below the quorum a target is not considered, and one target alone is no answer.
        assert!(faster(&s, 3).is_none());
        assert!(faster(&summarise(&rows[..12]), 1).is_none());
    }
}
