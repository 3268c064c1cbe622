//! # webtune-microbench
//!
//! The offline, one-variable-at-a-time study of NNJIT section 5.1: from a base
//! schedule for a large matmul, change one primitive at a time (cache_read,
//! unrolling, vector width, loop order, each Wasm pass, relaxed-SIMD FMA, ...),
//! time every variant on every available engine, and classify each primitive:
//!
//! - **consistent**: the same setting wins on every engine by more than the
//!   noise, so the tuner fixes it and never spends a candidate on it;
//! - **neutral**: no engine sees a difference beyond noise, so the tuner keeps
//!   the base setting;
//! - **device-dependent**: engines disagree, so it stays in the search space.
//!
//! The verdicts are written as a settings file (JSON) that the tuner reads.
//!
//! This crate must never decide anything from a single engine's timing alone,
//! and never hide the raw ratios behind a verdict: every report carries them.

pub mod engines;

use serde::{Deserialize, Serialize};
use webtune_compiler::schedule::{Dim, LoopOrder, UnrollLoop};
use webtune_compiler::{CompileError, Kernel, Op, Schedule, Target, WasmPasses, compile};

/// Median and spread of one kernel's repeated runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub median_s: f64,
    pub p10_s: f64,
    pub p90_s: f64,
    pub runs: u32,
}

impl Timing {
    /// Half the p10–p90 spread relative to the median: this engine's noise.
    pub fn noise(&self) -> f64 {
        ((self.p90_s - self.p10_s) / 2.0 / self.median_s).max(0.0)
    }
}

/// Something that runs kernels and times them.
pub trait Engine {
    /// A short name for tables, e.g. `wasmtime` or `v8-node20`.
    fn name(&self) -> String;
    /// Times every kernel (all of `op`), in order. `progress(done, total)` is
    /// called as kernels finish.
    fn time(&mut self, op: &Op, kernels: &[Kernel], progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<Timing>, String>;
}

/// One primitive setting: a name for the table and the schedule that has it.
#[derive(Clone, Debug)]
pub struct Setting {
    pub name: String,
    pub schedule: Schedule,
}

/// A primitive and its settings; the first setting is the base schedule's.
#[derive(Clone, Debug)]
pub struct Primitive {
    pub name: &'static str,
    pub settings: Vec<Setting>,
}

/// The base schedule the study starts from.
pub fn base_schedule(op: &Op, target: Target) -> Schedule {
    match target {
        Target::Wasm => Schedule {
            x0: 4,
            y0: 8,
            r0: 4,
            x1: 64,
            y1: 256,
            r1: 256,
            order: LoopOrder::MNK,
            inner_n_first: false,
            unroll: vec![UnrollLoop::X0, UnrollLoop::Y0, UnrollLoop::R0],
            vectorize: 4,
            cache_read: false,
            relaxed_simd: true,
            passes: WasmPasses::default(),
            ..Schedule::default_for(op, target)
        },
        Target::Wgsl => Schedule::default_for(op, target),
    }
}

fn toggle(name: &'static str, base: &Schedule, on: bool, f: impl Fn(&mut Schedule, bool)) -> Primitive {
    let mut a = base.clone();
    f(&mut a, on);
    let mut b = base.clone();
    f(&mut b, !on);
    let label = |v: bool| if v { "on" } else { "off" }.to_string();
    Primitive { name, settings: vec![Setting { name: label(on), schedule: a }, Setting { name: label(!on), schedule: b }] }
}

/// The primitives studied for `target`, each varied alone from the base.
pub fn primitives(op: &Op, target: Target) -> Vec<Primitive> {
    let base = base_schedule(op, target);
    let mut out = vec![
        toggle("cache_read", &base, base.cache_read, |s, v| s.cache_read = v),
        toggle("unroll", &base, base.tile_in_registers(), |s, v| {
            s.unroll.retain(|l| *l == UnrollLoop::R0);
            if v {
                s.unroll.extend([UnrollLoop::X0, UnrollLoop::Y0]);
            }
        }),
        toggle("unroll_r0", &base, base.unrolls(UnrollLoop::R0), |s, v| {
            s.unroll.retain(|l| *l != UnrollLoop::R0);
            if v {
                s.unroll.push(UnrollLoop::R0);
            }
        }),
        Primitive {
            name: "vectorize",
            settings: [4, 1]
                .into_iter()
                .map(|w| Setting { name: w.to_string(), schedule: Schedule { vectorize: w, ..base.clone() } })
                .collect(),
        },
    ];
    if target == Target::Wasm {
        out.push(Primitive {
            name: "loop_order",
            settings: [LoopOrder::MNK, LoopOrder([Dim::N, Dim::M, Dim::K]), LoopOrder([Dim::K, Dim::M, Dim::N])]
                .into_iter()
                .map(|o| Setting { name: o.to_string(), schedule: Schedule { order: o, ..base.clone() } })
                .collect(),
        });
        out.push(toggle("inner_n_first", &base, base.inner_n_first, |s, v| s.inner_n_first = v));
        out.push(toggle("pass_offset", &base, true, |s, v| s.passes = WasmPasses { offset: v, ..s.passes }));
        out.push(toggle("pass_load_splat", &base, true, |s, v| s.passes = WasmPasses { load_splat: v, ..s.passes }));
        out.push(toggle("pass_tee", &base, true, |s, v| s.passes = WasmPasses { tee: v, ..s.passes }));
        out.push(toggle("relaxed_simd", &base, base.relaxed_simd, |s, v| s.relaxed_simd = v));
    } else {
        out.push(toggle("double_buffer", &base, base.double_buffer, |s, v| s.double_buffer = v));
    }
    out
}

/// Every distinct schedule of the study, compiled once. `index[p][s]` is the
/// kernel of setting `s` of primitive `p`.
#[derive(Debug)]
pub struct Study {
    pub op: Op,
    pub target: Target,
    pub primitives: Vec<Primitive>,
    pub kernels: Vec<Kernel>,
    pub index: Vec<Vec<usize>>,
}

impl Study {
    /// Compiles the study's variants, skipping settings the target cannot
    /// compile (reported as an error only if a primitive is left with fewer than two).
    pub fn new(op: &Op, target: Target) -> Result<Study, CompileError> {
        let mut kernels: Vec<Kernel> = Vec::new();
        let mut index = Vec::new();
        let mut kept_primitives = Vec::new();
        for mut p in primitives(op, target) {
            let mut ids = Vec::new();
            let mut kept = Vec::new();
            for s in p.settings.drain(..) {
                if s.schedule.check(op, target).is_err() {
                    continue;
                }
                let k = compile(op, target, &s.schedule)?;
                let id = match kernels.iter().position(|x| x.meta.sha256 == k.meta.sha256) {
                    Some(i) => i,
                    None => {
                        kernels.push(k);
                        kernels.len() - 1
                    }
                };
                ids.push(id);
                kept.push(s);
            }
            if kept.len() >= 2 {
                p.settings = kept;
                kept_primitives.push(p);
                index.push(ids);
            }
        }
        Ok(Study { op: op.clone(), target, primitives: kept_primitives, kernels, index })
    }
}

/// What the study concluded about one primitive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Verdict {
    Consistent { setting: String },
    Neutral { setting: String },
    DeviceDependent,
}

/// One engine's view of one primitive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineResult {
    pub engine: String,
    pub winner: String,
    /// Each setting's median time divided by the winner's (1.0 for the winner).
    pub ratios: Vec<(String, f64)>,
    /// The noise threshold the winner had to clear.
    pub noise: f64,
    /// Whether the winner beat every other setting by more than the noise.
    pub significant: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrimitiveReport {
    pub primitive: String,
    pub verdict: Verdict,
    pub engines: Vec<EngineResult>,
}

/// The least margin a winner needs, whatever the measured spread.
pub const MIN_MARGIN: f64 = 0.05;

/// Classifies each primitive from per-engine timings (`timings[e][kernel]`).
pub fn classify(study: &Study, engines: &[String], timings: &[Vec<Timing>]) -> Vec<PrimitiveReport> {
    study
        .primitives
        .iter()
        .zip(&study.index)
        .map(|(p, ids)| {
            let results: Vec<EngineResult> = engines
                .iter()
                .zip(timings)
                .map(|(engine, t)| {
                    let times: Vec<&Timing> = ids.iter().map(|&i| &t[i]).collect();
                    let (wi, best) = times
                        .iter()
                        .enumerate()
                        .min_by(|a, b| a.1.median_s.total_cmp(&b.1.median_s))
                        .map(|(i, t)| (i, t.median_s))
                        .expect("at least two settings");
                    let noise = times.iter().map(|t| t.noise()).fold(MIN_MARGIN, f64::max);
                    let ratios: Vec<(String, f64)> =
                        p.settings.iter().zip(&times).map(|(s, t)| (s.name.clone(), t.median_s / best)).collect();
                    let significant = ratios.iter().enumerate().all(|(i, (_, r))| i == wi || *r > 1.0 + noise);
                    EngineResult { engine: engine.clone(), winner: p.settings[wi].name.clone(), ratios, noise, significant }
                })
                .collect();
            let winners: Vec<&str> = results.iter().map(|r| r.winner.as_str()).collect();
            let verdict = if results.iter().all(|r| !r.significant) {
                Verdict::Neutral { setting: p.settings[0].name.clone() }
            } else if results.iter().all(|r| r.significant) && winners.windows(2).all(|w| w[0] == w[1]) {
                Verdict::Consistent { setting: winners[0].to_string() }
            } else {
                Verdict::DeviceDependent
            };
            PrimitiveReport { primitive: p.name.to_string(), verdict, engines: results }
        })
        .collect()
}

/// The settings file the tuner reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SettingsFile {
    pub target: Target,
    pub op: String,
    pub shape: Vec<u32>,
    pub engines: Vec<String>,
    pub primitives: Vec<PrimitiveReport>,
}

impl SettingsFile {
    /// The setting to fix for each primitive that is consistent or neutral.
    pub fn fixed(&self) -> Vec<(String, String)> {
        self.primitives
            .iter()
            .filter_map(|p| match &p.verdict {
                Verdict::Consistent { setting } | Verdict::Neutral { setting } => Some((p.primitive.clone(), setting.clone())),
                Verdict::DeviceDependent => None,
            })
            .collect()
    }
}

/// A Markdown table of the reports.
pub fn table(reports: &[PrimitiveReport]) -> String {
    let mut out = String::from(
        "| primitive | engine | winner | time ratio of each setting to the winner | beyond noise | verdict |\n|---|---|---|---|---|---|\n",
    );
    for r in reports {
        let verdict = match &r.verdict {
            Verdict::Consistent { setting } => format!("consistent: {setting}"),
            Verdict::Neutral { setting } => format!("neutral (keep {setting})"),
            Verdict::DeviceDependent => "device-dependent".to_string(),
        };
        for (i, e) in r.engines.iter().enumerate() {
            let ratios: Vec<String> = e.ratios.iter().map(|(s, x)| format!("{s} {x:.2}")).collect();
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} (±{:.0}%) | {} |\n",
                if i == 0 { r.primitive.as_str() } else { "" },
                e.engine,
                e.winner,
                ratios.join(", "),
                if e.significant { "yes" } else { "no" },
                e.noise * 100.0,
                if i == 0 { verdict.as_str() } else { "" },
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(median: f64, spread: f64) -> Timing {
        Timing { median_s: median, p10_s: median * (1.0 - spread), p90_s: median * (1.0 + spread), runs: 9 }
    }

    fn study() -> Study {
        Study::new(&Op::parse("matmul", "512,512,512").unwrap(), Target::Wasm).unwrap()
    }

    /// Times every kernel 1.0 except the given (kernel, time) overrides.
    fn timings(s: &Study, over: &[(usize, f64)], spread: f64) -> Vec<Timing> {
        (0..s.kernels.len()).map(|i| t(over.iter().find(|o| o.0 == i).map_or(1.0, |o| o.1), spread)).collect()
    }

    #[test]
    fn variants_change_one_thing_and_compile() {
        let s = study();
        assert!(s.primitives.len() >= 9);
        for (p, ids) in s.primitives.iter().zip(&s.index) {
            assert_eq!(p.settings.len(), ids.len());
            // Each setting differs from the base in this primitive only.
            assert_eq!(ids[0], s.index[0][0], "{}: first setting is the base", p.name);
            assert!(ids[1..].iter().all(|&i| i != ids[0]), "{}: a variant compiled to the base kernel", p.name);
        }
    }

    #[test]
    fn verdicts_follow_the_engines() {
        let s = study();
        let cache = s.index[0][1]; // cache_read on
        let names = vec!["a".to_string(), "b".to_string()];
        // Both engines: cache_read on is 30% slower → consistent: off.
        let both = vec![timings(&s, &[(cache, 1.3)], 0.01), timings(&s, &[(cache, 1.4)], 0.01)];
        assert_eq!(classify(&s, &names, &both)[0].verdict, Verdict::Consistent { setting: "off".into() });
        // Engines disagree → device-dependent.
        let split = vec![timings(&s, &[(cache, 1.3)], 0.01), timings(&s, &[(cache, 0.7)], 0.01)];
        assert_eq!(classify(&s, &names, &split)[0].verdict, Verdict::DeviceDependent);
        // A 3% difference under 10% noise is neutral.
        let noisy = vec![timings(&s, &[(cache, 1.03)], 0.1), timings(&s, &[(cache, 0.97)], 0.1)];
        assert_eq!(classify(&s, &names, &noisy)[0].verdict, Verdict::Neutral { setting: "off".into() });
    }
}
