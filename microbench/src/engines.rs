//! Engines that time Wasm kernels. The native ones (wasmtime, wgpu) come from
//! `webtune-client-runtime`; this module adds JavaScript engines run as
//! separate processes.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde::Deserialize;
use webtune_compiler::{Kernel, Op};

use crate::{Engine, Timing};

const TIME_WASM_JS: &str = include_str!("../js/time_wasm.mjs");

/// V8 through Node.js: kernels are written to a temporary directory and timed
/// by `js/time_wasm.mjs` in one Node process.
#[derive(Debug)]
pub struct Node {
    version: String,
    /// Minimum milliseconds of timed calls per kernel.
    pub min_ms: u32,
}

impl Node {
    /// Finds `node` on the PATH.
    pub fn new() -> Result<Node, String> {
        let out = Command::new("node").arg("--version").output().map_err(|e| format!("node is not installed ({e})"))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(Node { version, min_ms: 1000 })
    }
}

#[derive(Deserialize)]
struct Line {
    case: String,
    median_ms: f64,
    p10_ms: f64,
    p90_ms: f64,
    runs: u32,
}

impl Engine for Node {
    fn name(&self) -> String {
        format!("v8-node{}", self.version.trim_start_matches('v').split('.').next().unwrap_or("?"))
    }

    fn time(&mut self, _op: &Op, kernels: &[Kernel], progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<Timing>, String> {
        let dir: PathBuf = std::env::temp_dir().join(format!("webtune-node-{}-{}", std::process::id(), kernels.len()));
        let _ = std::fs::remove_dir_all(&dir);
        let io = |e: std::io::Error| format!("{}: {e}", dir.display());
        for (i, k) in kernels.iter().enumerate() {
            let d = dir.join(format!("k{i:04}"));
            std::fs::create_dir_all(&d).map_err(io)?;
            std::fs::write(d.join("kernel.wasm"), &k.bytes).map_err(io)?;
            std::fs::write(d.join("kernel.json"), serde_json::to_vec(&k.meta).map_err(|e| e.to_string())?).map_err(io)?;
        }
        let script = dir.with_extension("mjs");
        std::fs::write(&script, TIME_WASM_JS).map_err(io)?;
        let mut child = Command::new("node")
            .arg("--experimental-wasm-relaxed-simd")
            .arg(&script)
            .arg(&dir)
            .arg(self.min_ms.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting node: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let mut timings = vec![None; kernels.len()];
        use std::io::BufRead;
        let mut done = 0;
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.map_err(|e| e.to_string())?;
            let l: Line = serde_json::from_str(&line).map_err(|e| format!("node printed `{line}`: {e}"))?;
            let i: usize = l.case.trim_start_matches('k').parse().map_err(|_| format!("unknown case {}", l.case))?;
            timings[i] = Some(Timing { median_s: l.median_ms / 1e3, p10_s: l.p10_ms / 1e3, p90_s: l.p90_ms / 1e3, runs: l.runs });
            done += 1;
            progress(done, kernels.len());
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(&script);
        if !out.status.success() {
            return Err(format!("node failed: {}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")));
        }
        timings.into_iter().enumerate().map(|(i, t)| t.ok_or_else(|| format!("node did not time kernel {i}"))).collect()
    }
}
