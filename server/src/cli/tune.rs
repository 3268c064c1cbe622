//! `webtune tune`: the native tuning client. It does what a browser tab
//! does between inferences, but all at once: fingerprint this machine, open
//! a session, take every candidate from the queue, run and check each with
//! the native runner (wasmtime or wgpu) on the ticket's seed, and report the
//! top 5 with their tickets and output samples.
//!
//! Offline tuning of a fleet of machines is this command in a loop; the
//! service's end-to-end tests use it as a client that needs no browser. It
//! speaks the wire types of `service::protocol`, the server's own, so that a
//! field renamed on one side cannot be missed on the other.

use anyhow::Result;
use clap::Args;

use super::args::KernelArgs;

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// The webtune server, e.g. `http://127.0.0.1:8080`.
    #[arg(long)]
    pub server: String,
    #[command(flatten)]
    pub kernel: KernelArgs,
    /// Timed samples per candidate.
    #[arg(long, default_value_t = 7)]
    pub reps: usize,
    /// Take at most this many candidates from the queue (0: all).
    #[arg(long, default_value_t = 0)]
    pub limit: usize,
    /// Use this JSON file as the fingerprint instead of probing the machine.
    #[arg(long)]
    pub fingerprint: Option<std::path::PathBuf>,
    /// No progress bar (for scripts and tests).
    #[arg(long)]
    pub quiet: bool,
}

#[cfg(not(feature = "native"))]
pub fn run(a: TuneArgs) -> Result<()> {
    let _ = a;
    anyhow::bail!("`webtune tune` needs the native runner: rebuild with `cargo build --release --features native`")
}

#[cfg(feature = "native")]
pub fn run(a: TuneArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    rt.block_on(native::tune(a))
}

#[cfg(feature = "native")]
mod native {
    use std::time::Duration;

    use anyhow::{Context, Result, bail};
    use futures_util::StreamExt;
    use indicatif::{ProgressBar, ProgressStyle};
    use serde_json::{Value, json};
    use webtune_client_runtime::{KernelDir, RunOptions, RunReport, cpu_fingerprint, gpu::Gpu, wasm::WasmEngine};
    use webtune_compiler::{KernelMeta, Op, Target};

    use super::TuneArgs;
    use crate::service::protocol::{
        CandidateEvent, ErrorBody, ReportEntry, ReportRequest, ReportResponse, SessionRequest, SessionResponse,
    };

    /// The engine that runs this target's candidates.
    enum Runner {
        Wasm(WasmEngine),
        Gpu(Box<Gpu>),
    }

    impl Runner {
        fn run(&self, k: &KernelDir, opts: &RunOptions) -> Result<RunReport, webtune_client_runtime::RunError> {
            match self {
                Runner::Wasm(e) => e.run(k, opts),
                Runner::Gpu(g) => g.run(k, opts),
            }
        }
    }

    /// One measured candidate.
    struct Measured {
        sha256: String,
        ticket: String,
        report: RunReport,
    }

    async fn check(resp: reqwest::Response, what: &str) -> Result<reqwest::Response> {
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        let msg = serde_json::from_str::<ErrorBody>(&body).map(|e| e.error).unwrap_or(body);
        bail!("{what}: the server answered {status}: {msg}")
    }

    /// Splits a Server-Sent Events byte stream into (event, data) pairs.
    #[derive(Default)]
    struct SseParser {
        buf: String,
        event: String,
        data: String,
    }

    impl SseParser {
        fn push(&mut self, chunk: &[u8], out: &mut Vec<(String, String)>) {
            self.buf.push_str(&String::from_utf8_lossy(chunk));
            while let Some(nl) = self.buf.find('\n') {
                let line = self.buf[..nl].trim_end_matches('\r').to_string();
                self.buf.drain(..=nl);
                if line.is_empty() {
                    if !self.data.is_empty() || !self.event.is_empty() {
                        out.push((std::mem::take(&mut self.event), std::mem::take(&mut self.data)));
                    }
                } else if let Some(v) = line.strip_prefix("event:") {
                    self.event = v.trim_start().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    if !self.data.is_empty() {
                        self.data.push('\n');
                    }
                    self.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                }
            }
        }
    }

    pub async fn tune(a: TuneArgs) -> Result<()> {
        let (op, target) = a.kernel.parse()?;
        if a.reps == 0 {
            bail!("--reps must be at least 1");
        }
        let server = a.server.trim_end_matches('/').to_string();
        let runner = match target {
            Target::Wasm => Runner::Wasm(WasmEngine::new()?),
            Target::Wgsl => Runner::Gpu(Box::new(Gpu::new()?)),
        };
        let fingerprint: Value = match &a.fingerprint {
            Some(p) => serde_json::from_str(&crate::cli::read_input(p, "fingerprint file")?)
                .with_context(|| format!("{} is not JSON", p.display()))?,
            None => match &runner {
                Runner::Wasm(_) => cpu_fingerprint(),
                Runner::Gpu(g) => g.fingerprint(),
            },
        };
        let http = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).build()?;

        let session: SessionResponse = check(
            http.post(format!("{server}/v1/sessions")).json(&SessionRequest { fingerprint }).send().await.context("opening a session")?,
            "opening a session",
        )
        .await?
        .json()
        .await
        .context("reading the session answer")?;
        let SessionResponse { session_id: sid, device_key, .. } = session;
        eprintln!("webtune tune: session {sid}, device key {device_key}");

        let shape = a.kernel.shape.replace(' ', "");
        let resp = check(
            http.get(format!("{server}/v1/sessions/{sid}/queue"))
                .query(&[("op", a.kernel.op.as_str()), ("shape", shape.as_str()), ("target", a.kernel.target.as_str())])
                .send()
                .await
                .context("opening the candidate queue")?,
            "opening the candidate queue",
        )
        .await?;
        let bar = if a.quiet { ProgressBar::hidden() } else { ProgressBar::new(0) };
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} candidates  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        let mut measured: Vec<Measured> = Vec::new();
        let mut wrong = 0usize;
        let mut taken = 0usize;
        let mut parser = SseParser::default();
        let mut stream = resp.bytes_stream();
        'queue: while let Some(chunk) = stream.next().await {
            let chunk = chunk.context("reading the candidate queue")?;
            let mut events = Vec::new();
            parser.push(&chunk, &mut events);
            for (event, data) in events {
                match event.as_str() {
                    "candidate" => {
                        let ev: CandidateEvent = serde_json::from_str(&data).context("reading a candidate event")?;
                        bar.set_length(ev.total as u64);
                        let m = measure(&http, &server, &runner, &op, ev, a.reps).await?;
                        taken += 1;
                        bar.inc(1);
                        match m {
                            // One result per kernel: the report must not list a kernel twice.
                            Some(m) if measured.iter().any(|x| x.sha256 == m.sha256) => {}
                            Some(m) => {
                                if let Some(best) = measured.iter().map(|x| x.report.median_ms).reduce(f64::min) {
                                    bar.set_message(format!("best {:.3} ms", best.min(m.report.median_ms)));
                                }
                                measured.push(m);
                            }
                            None => wrong += 1,
                        }
                        if a.limit > 0 && taken >= a.limit {
                            break 'queue;
                        }
                    }
                    "done" => break 'queue,
                    _ => {}
                }
            }
        }
        bar.finish_and_clear();
        drop(stream);
        if measured.is_empty() {
            bail!("no candidate ran correctly ({wrong} failed the output check); nothing to report");
        }
        measured.sort_by(|x, y| x.report.median_ms.total_cmp(&y.report.median_ms));
        let top: Vec<&Measured> = measured.iter().take(5).collect();
        let entries = top
            .iter()
            .map(|m| ReportEntry {
                sha256: m.sha256.clone(),
                ticket: m.ticket.clone(),
                median_us: m.report.median_ms * 1e3,
                runs: (m.report.samples as u64 * m.report.calls_per_sample as u64).clamp(1, u32::MAX.into()) as u32,
                output_ok: m.report.correct,
                samples: m.report.output_samples.clone(),
            })
            .collect();
        let body = ReportRequest { op: a.kernel.op.clone(), shape: op.shape().to_vec(), target: a.kernel.target.clone(), entries };
        let answer: ReportResponse = check(
            http.post(format!("{server}/v1/sessions/{sid}/reports")).json(&body).send().await.context("reporting")?,
            "reporting the top 5",
        )
        .await?
        .json()
        .await
        .context("reading the report answer")?;
        let best = &top[0].report;
        crate::cli::out(json!({
            "session_id": sid,
            "device_key": device_key,
            "candidates": taken,
            "failed_check": wrong,
            "best": {"sha256": top[0].sha256, "median_ms": best.median_ms, "gflops": best.gflops},
            "report": answer,
        }))?;
        Ok(())
    }

    /// Fetches, runs, checks and times one candidate. `None` when its output
    /// is wrong (it is then left out of the report).
    async fn measure(
        http: &reqwest::Client,
        server: &str,
        runner: &Runner,
        op: &Op,
        ev: CandidateEvent,
        reps: usize,
    ) -> Result<Option<Measured>> {
        let CandidateEvent { sha256, ticket, seed, check: positions, url, meta, .. } = ev;
        let meta: KernelMeta = serde_json::from_value(meta).context("candidate metadata")?;
        if meta.parsed_op().ok().as_ref() != Some(op) {
            bail!("the queue sent a kernel for {} {:?}, not {op}", meta.op, meta.shape);
        }
        let bytes = check(http.get(format!("{server}{url}")).send().await?, "fetching a kernel").await?.bytes().await?.to_vec();
        if webtune_compiler::kernel::sha256_hex(&bytes) != sha256 {
            bail!("kernel {sha256}: the bytes served do not have this hash");
        }
        let k = KernelDir { bytes, meta };
        let opts = RunOptions { reps, warmup: 2, min_sample_ms: 2.0, seed, sample_positions: positions, ..RunOptions::default() };
        // The runner blocks (GPU waits, Wasm calls): keep it off the async workers.
        let report = tokio::task::block_in_place(|| runner.run(&k, &opts));
        match report {
            Ok(r) if r.correct => Ok(Some(Measured { sha256, ticket, report: r })),
            Ok(r) => {
                eprintln!("webtune tune: kernel {sha256} is wrong (max_rel_err {:e}); skipped", r.max_rel_err);
                Ok(None)
            }
            Err(e) => {
                eprintln!("webtune tune: kernel {sha256} did not run: {e}; skipped");
                Ok(None)
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::SseParser;

        #[test]
        fn sse_events_split_across_chunks() {
            let mut p = SseParser::default();
            let mut out = Vec::new();
            p.push(b"event: candidate\ndata: {\"a\":", &mut out);
            assert!(out.is_empty());
            p.push(b"1}\nid: 0\n\n: keep-alive\n\nevent: done\r\ndata: {}\r\n\r\n", &mut out);
            assert_eq!(out, vec![("candidate".to_string(), "{\"a\":1}".to_string()), ("done".to_string(), "{}".to_string())]);
        }
    }
}
