//! The microbenchmark's verdicts, as the space builder applies them.
//!
//! NNJIT section 5.1: a primitive whose best setting is the same on every
//! device is fixed once, offline, and never spends a candidate; a
//! device-dependent one stays in the space. [`Settings`] holds one setting
//! per fixed primitive and the settings to try for each device-dependent
//! one. It starts from [`Settings::builtin`] (the findings below) and a
//! microbenchmark settings file (`webtune microbench --out FILE`) overrides
//! it primitive by primitive.

use std::collections::BTreeMap;

use serde::Deserialize;
use webtune_compiler::schedule::{LoopOrder, UnrollLoop};
use webtune_compiler::{Schedule, Target};

/// Fixed and device-dependent primitive settings for one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub target: Target,
    /// Primitive → the setting every candidate gets.
    pub fixed: BTreeMap<String, String>,
    /// Primitive → the settings the space tries, in order.
    pub dependent: BTreeMap<String, Vec<String>>,
}

/// The parts of the microbenchmark's `SettingsFile` the tuner reads; every
/// other field is ignored, so the file may grow.
#[derive(Deserialize)]
struct File {
    target: Target,
    primitives: Vec<FilePrimitive>,
}

#[derive(Deserialize)]
struct FilePrimitive {
    primitive: String,
    verdict: FileVerdict,
    #[serde(default)]
    engines: Vec<FileEngine>,
}

#[derive(Deserialize)]
struct FileVerdict {
    kind: String,
    #[serde(default)]
    setting: Option<String>,
}

#[derive(Deserialize)]
struct FileEngine {
    #[serde(default)]
    ratios: Vec<(String, f64)>,
}

/// The primitives the space builder knows how to set, per target.
pub fn known_primitives(target: Target) -> &'static [&'static str] {
    match target {
        Target::Wasm => &[
            "cache_read",
            "unroll",
            "unroll_r0",
            "vectorize",
            "loop_order",
            "inner_n_first",
            "pass_offset",
            "pass_load_splat",
            "pass_tee",
            "relaxed_simd",
        ],
        Target::Wgsl => &["cache_read", "unroll", "unroll_r0", "vectorize", "double_buffer"],
    }
}

fn on(v: &str) -> Option<bool> {
    match v {
        "on" | "true" | "yes" => Some(true),
        "off" | "false" | "no" => Some(false),
        _ => None,
    }
}

impl Settings {
    /// The built-in verdicts, used where no settings file says otherwise:
    ///
    /// - both targets: the register tile unrolled into locals/registers
    ///   (`unroll` on: NNJIT Fig. 9; BENCHMARKS.md ("Facts carried in") records 20× on the H100 for
    ///   WGSL), the K steps of a tile unrolled, 4-wide vectors (heuristic 1:
    ///   SIMD width ≤ 128 bits);
    /// - Wasm: `cache_read` off (NNJIT Fig. 9: slower on every device), all
    ///   three passes on (BENCHMARKS.md: load32_splat alone is worth 17–19%),
    ///   relaxed-SIMD FMA on where the client supports it, loop order `mnk`
    ///   with row-first register tiles (the study's base);
    /// - WGSL: `cache_read` device-dependent (NNJIT Table 2 keeps [Yes, No]),
    ///   and `double_buffer` too (on the H100 it gained 7–25% with one
    ///   register step per stage; it doubles workgroup memory, which small
    ///   GPUs lack).
    pub fn builtin(target: Target) -> Settings {
        let mut fixed = BTreeMap::new();
        let mut dependent = BTreeMap::new();
        let mut fix = |p: &str, v: &str| {
            fixed.insert(p.to_string(), v.to_string());
        };
        fix("unroll", "on");
        fix("unroll_r0", "on");
        fix("vectorize", "4");
        match target {
            Target::Wasm => {
                fix("cache_read", "off");
                fix("loop_order", "mnk");
                fix("inner_n_first", "off");
                fix("pass_offset", "on");
                fix("pass_load_splat", "on");
                fix("pass_tee", "on");
                fix("relaxed_simd", "on");
            }
            Target::Wgsl => {
                dependent.insert("cache_read".to_string(), vec!["on".to_string(), "off".to_string()]);
                dependent.insert("double_buffer".to_string(), vec!["on".to_string(), "off".to_string()]);
            }
        }
        Settings { target, fixed, dependent }
    }

    /// The built-in settings overridden by a microbenchmark settings file.
    /// A consistent or neutral verdict fixes its primitive; a
    /// device-dependent one puts every setting the study tried into the
    /// space. Primitives the builder does not know are reported, not applied.
    pub fn from_microbench_json(text: &str) -> Result<(Settings, Vec<String>), String> {
        let file: File = serde_json::from_str(text).map_err(|e| format!("settings file: {e}"))?;
        let mut s = Settings::builtin(file.target);
        let mut ignored = Vec::new();
        for p in file.primitives {
            if !known_primitives(file.target).contains(&p.primitive.as_str()) {
                ignored.push(p.primitive);
                continue;
            }
            match (p.verdict.kind.as_str(), p.verdict.setting) {
                ("consistent" | "neutral", Some(setting)) => {
                    s.dependent.remove(&p.primitive);
                    s.fixed.insert(p.primitive, setting);
                }
                ("device_dependent", _) => {
                    let mut names: Vec<String> = Vec::new();
                    for e in &p.engines {
                        for (n, _) in &e.ratios {
                            if !names.contains(n) {
                                names.push(n.clone());
                            }
                        }
                    }
                    if names.len() < 2 {
                        return Err(format!("settings file: device-dependent primitive `{}` lists fewer than two settings", p.primitive));
                    }
                    s.fixed.remove(&p.primitive);
                    s.dependent.insert(p.primitive, names);
                }
                (kind, _) => return Err(format!("settings file: primitive `{}` has an unknown verdict `{kind}`", p.primitive)),
            }
        }
        Ok((s, ignored))
    }

    /// Applies one primitive setting to a schedule; `false` if the setting
    /// is not understood.
    pub fn apply(s: &mut Schedule, primitive: &str, setting: &str) -> bool {
        let flag = on(setting);
        match (primitive, flag) {
            ("cache_read", Some(v)) => s.cache_read = v,
            ("double_buffer", Some(v)) => s.double_buffer = v,
            ("inner_n_first", Some(v)) => s.inner_n_first = v,
            ("relaxed_simd", Some(v)) => s.relaxed_simd = v,
            ("pass_offset", Some(v)) => s.passes.offset = v,
            ("pass_load_splat", Some(v)) => s.passes.load_splat = v,
            ("pass_tee", Some(v)) => s.passes.tee = v,
            ("unroll", Some(v)) => {
                s.unroll.retain(|l| *l == UnrollLoop::R0);
                if v {
                    s.unroll.extend([UnrollLoop::X0, UnrollLoop::Y0]);
                }
                s.unroll.sort();
            }
            ("unroll_r0", Some(v)) => {
                s.unroll.retain(|l| *l != UnrollLoop::R0);
                if v {
                    s.unroll.push(UnrollLoop::R0);
                }
                s.unroll.sort();
            }
            ("vectorize", None) => match setting.parse::<u32>() {
                Ok(w @ (1 | 4)) => s.vectorize = w,
                _ => return false,
            },
            ("loop_order", None) => match LoopOrder::try_from(setting.to_string()) {
                Ok(o) => s.order = o,
                Err(_) => return false,
            },
            _ => return false,
        }
        true
    }

    /// Every combination of the device-dependent settings (the first
    /// combination is each primitive's first setting).
    pub fn combinations(&self, skip: &[&str]) -> Vec<Vec<(String, String)>> {
        let mut out: Vec<Vec<(String, String)>> = vec![Vec::new()];
        for (p, values) in &self.dependent {
            if skip.contains(&p.as_str()) {
                continue;
            }
            out = out
                .into_iter()
                .flat_map(|c| {
                    values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.push((p.clone(), v.clone()));
                        c
                    })
                })
                .collect();
        }
        out
    }

    /// The settings `primitive` may take in this space: the fixed one, or
    /// the device-dependent ones.
    pub fn values(&self, primitive: &str) -> Vec<String> {
        match (self.fixed.get(primitive), self.dependent.get(primitive)) {
            (Some(v), _) => vec![v.clone()],
            (None, Some(vs)) => vs.clone(),
            (None, None) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_overrides_builtin() {
        let text = r#"{"target":"wgsl","op":"matmul","shape":[64,64,64],"engines":["a","b"],"primitives":[
            {"primitive":"cache_read","verdict":{"kind":"consistent","setting":"off"},"engines":[]},
            {"primitive":"double_buffer","verdict":{"kind":"device_dependent"},
             "engines":[{"engine":"a","winner":"on","ratios":[["off",1.2],["on",1.0]],"noise":0.05,"significant":true}]},
            {"primitive":"warp_shuffle","verdict":{"kind":"neutral","setting":"off"},"engines":[]}]}"#;
        let (s, ignored) = Settings::from_microbench_json(text).unwrap();
        assert_eq!(s.fixed["cache_read"], "off");
        assert!(!s.dependent.contains_key("cache_read"));
        assert_eq!(s.dependent["double_buffer"], vec!["off", "on"]);
        assert_eq!(ignored, vec!["warp_shuffle"]);
        assert_eq!(s.combinations(&[]).len(), 2);
        assert!(Settings::from_microbench_json("{}").is_err());
    }

    #[test]
    fn apply_names() {
        let op = webtune_compiler::Op::parse("matmul", "8,8,8").unwrap();
        let mut s = Schedule::default_for(&op, Target::Wasm);
        assert!(Settings::apply(&mut s, "loop_order", "nmk"));
        assert_eq!(s.order.to_string(), "nmk");
        assert!(Settings::apply(&mut s, "unroll", "off"));
        assert!(!s.tile_in_registers() && s.unrolls(UnrollLoop::R0));
        assert!(Settings::apply(&mut s, "pass_tee", "off"));
        assert!(!s.passes.tee);
        assert!(!Settings::apply(&mut s, "vectorize", "8"));
        assert!(!Settings::apply(&mut s, "nonsense", "on"));
    }
}
