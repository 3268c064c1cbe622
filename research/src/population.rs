//! A population of simulated browsers driving real servers over HTTP
//! (issue 20, item 3): thousands of clients across dozens of device classes,
//! each class with a hidden true time per candidate kernel, browser-like
//! timing, clients arriving over time and leaving mid-queue, and liars of
//! several strategies. It watches `GET /v1/kernels/best` per class and says
//! when (in seconds and in accepted reports) the elected kernel's *true*
//! time came within 5% of the class's true best and stayed there.
//!
//! Used by `src/bin/population.rs` (the command line) and
//! `tests/population.rs` (a small run that must converge), over the HTTP
//! helpers of [`crate::clients`].
//!
//! # The model
//!
//! - **Classes** are distinct device fingerprints: WebGPU adapters
//!   (vendor/architecture/device; two devices of each architecture come
//!   before a third of any, so arch and vendor fallbacks are shared by
//!   several classes) or, with `--target wasm`, CPU fingerprints.
//! - **Truth.** Each class's candidates are the queue a probe session of the
//!   class gets at the start. From the seed, the class and each kernel's
//!   hash (a function of its schedule), a class gets a base time (20–200 µs),
//!   a spread S in [1.1, 3] and one factor per kernel: the kernel with the
//!   least hash draw runs at the base, the one with the greatest at S× the
//!   base, the others in between in proportion to their draw; so the best
//!   kernel differs between classes. A kernel outside the class's own queue
//!   (a similar device's winner, the portable default) gets a factor from the
//!   same draw, never below 1.1.
//! - **Honest client**: a device of the class (its own speed factor, lognormal
//!   σ 5%), which times every candidate as a browser does: one batch of
//!   `runs` calls, `runs` chosen so the batch lasts about 1 ms, the batch
//!   total read off a 100 µs timer (rounded), divided by `runs`; lognormal
//!   noise (σ `noise`, 3%) per measurement, and with probability `outlier`
//!   (2%) the measurement is 2× (a GC pause, a throttled tab). It sends the
//!   correct output samples and reports its top 5, fastest first.
//! - **Leavers**: a `leave` share of the honest clients read only a random
//!   part of the queue's stream, drop the connection (the tab closed) and
//!   report nothing, as the browser runtime reports only a drained queue.
//! - **Liars** (`liars` of all sessions, the same share in every class,
//!   divided among the strategies in turn): **promote** ranks the class's
//!   slowest kernel first with a fake time 20% under the class's true best
//!   (plausible) and correct samples, and fills ranks 2–5 with the kernels it
//!   measured slowest, so that no real contender gets its votes; every
//!   promoter of a class promotes the same kernel. **demote** asks the
//!   server for the class's current winner and reports its honest top 5
//!   without it (every other demoter puts it last with 3× its time instead).
//!   **sybil**: groups of `sybil_sessions` sessions from one address, back
//!   to back, each a promoter. A liar's session counts as one client, so a
//!   sybil group of 20 is 20 of the `clients`.
//! - **Addresses.** When every server is on 127.0.0.0/8, each client (and
//!   each sybil group) binds its own loopback source address
//!   (127.10.0.0 and up; sybils 127.200.0.0 and up), so the servers'
//!   per-address limits see one address per browser, and one per sybil.
//!   Otherwise all clients share this machine's address.
//! - **Arrival**: the clients (a sybil group as one) arrive evenly spread
//!   over `arrival_seconds`, in an order that mixes liars and honest
//!   clients at random, or puts every liar first or last; at most
//!   `parallel` are in flight. Each request goes to a server picked at
//!   random, so sessions, queues, tickets and reports cross servers.
//! - **Convergence.** A poller asks every class's best kernel (of a random
//!   server) every `poll_ms`, and at the end, once `settle_ms` after the last
//!   client (the servers cache lookups for `--cache-ttl-ms`, 1 s by default).
//!   A class converged at the first poll after which every poll answered a
//!   kernel whose true time is within `tolerance` of the class's best; the
//!   reports are the class's accepted reports at that moment.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};
use webtune_compiler::Op;

use crate::clients::{gpu_fingerprint, true_samples};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiarOrder {
    Mixed,
    First,
    Last,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Strategy {
    Promote,
    Demote,
    Sybil,
}

impl Strategy {
    pub fn parse(s: &str) -> Option<Strategy> {
        match s {
            "promote" => Some(Strategy::Promote),
            "demote" => Some(Strategy::Demote),
            "sybil" => Some(Strategy::Sybil),
            _ => None,
        }
    }
}

/// What to simulate; [`Config::default`] is the command line's defaults.
#[derive(Clone, Debug)]
pub struct Config {
    pub servers: Vec<String>,
    pub clients: usize,
    pub classes: usize,
    /// Share of sessions that lie.
    pub liars: f64,
    pub liar_order: LiarOrder,
    /// Liars are divided among these in turn.
    pub strategies: Vec<Strategy>,
    /// Sessions per sybil address.
    pub sybil_sessions: usize,
    /// Share of honest clients that leave mid-queue.
    pub leave: f64,
    pub arrival_seconds: f64,
    pub parallel: usize,
    pub seed: u64,
    pub op: String,
    pub shape: String,
    pub target: String,
    pub poll_ms: u64,
    pub settle_ms: u64,
    /// Milliseconds an honest client spends per candidate it times.
    pub candidate_ms: u64,
    /// Lognormal σ of one measurement.
    pub noise: f64,
    /// Probability that a measurement comes out 2×.
    pub outlier: f64,
    /// Relative slowdown still counted as converged.
    pub tolerance: f64,
    /// One loopback source address per client: `None` decides from the servers' hosts.
    pub distinct_addresses: Option<bool>,
    /// Seconds between progress lines on stderr (0: none).
    pub progress_s: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            servers: vec!["http://127.0.0.1:8080".into()],
            clients: 2000,
            classes: 20,
            liars: 0.3,
            liar_order: LiarOrder::Mixed,
            strategies: vec![Strategy::Promote, Strategy::Demote, Strategy::Sybil],
            sybil_sessions: 20,
            leave: 0.3,
            arrival_seconds: 0.0,
            parallel: 32,
            seed: 2026,
            op: "matmul".into(),
            shape: "64,64,64".into(),
            target: "wgsl".into(),
            poll_ms: 500,
            settle_ms: 1500,
            candidate_ms: 0,
            noise: 0.03,
            outlier: 0.02,
            tolerance: 0.05,
            distinct_addresses: None,
            progress_s: 5.0,
        }
    }
}

// ---------------------------------------------------------------- randomness

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw in [0, 1) from the seed, a class and a kernel hash.
fn draw(seed: u64, class: usize, what: &str) -> f64 {
    let mut h = mix(seed ^ mix(class as u64 + 1));
    for b in what.bytes() {
        h = mix(h ^ b as u64);
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// SplitMix64.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(mix(seed))
    }
    #[allow(clippy::should_implement_trait)] // one step of a seeded generator, not an iterator
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }
    pub fn f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    /// A standard normal draw (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.f64().max(1e-300);
        let v = self.f64();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

// ------------------------------------------------------------------ classes

/// WebGPU device classes: (vendor, architecture, devices), architectures
/// interleaved across vendors.
const GPUS: &[(&str, &str, &[&str])] = &[
    ("nvidia", "hopper", &["H100 80GB HBM3", "H100 PCIe", "H200", "GH200"]),
    ("amd", "rdna-3", &["Radeon RX 7900 XTX", "Radeon RX 7800 XT", "Radeon RX 7600", "Radeon 780M"]),
    ("nvidia", "ampere", &["GeForce RTX 3060", "GeForce RTX 3080", "GeForce RTX 3090", "A100", "A10"]),
    ("intel", "xe-hpg", &["Arc A770", "Arc A750", "Arc A380"]),
    ("apple", "metal-3", &["Apple M1", "Apple M2", "Apple M3", "Apple M2 Max"]),
    ("amd", "rdna-2", &["Radeon RX 6800", "Radeon RX 6700 XT", "Radeon 680M"]),
    ("nvidia", "lovelace", &["GeForce RTX 4060", "GeForce RTX 4070", "GeForce RTX 4090", "L4"]),
    ("arm", "valhall", &["Mali-G710", "Mali-G715", "Mali-G610"]),
    ("qualcomm", "adreno-7xx", &["Adreno 740", "Adreno 730", "Adreno 750"]),
    ("nvidia", "turing", &["GeForce RTX 2060", "GeForce RTX 2080", "Tesla T4", "GeForce GTX 1660"]),
    ("intel", "gen-12lp", &["UHD Graphics 770", "Iris Xe Graphics", "UHD Graphics 730"]),
    ("amd", "gcn-5", &["Radeon Vega 56", "Radeon Vega 8", "Radeon VII"]),
    ("nvidia", "blackwell", &["GeForce RTX 5090", "GeForce RTX 5080", "B200"]),
    ("arm", "bifrost", &["Mali-G76", "Mali-G52"]),
];

/// The fingerprint and a label of class `i` (any `i`: past the catalogue,
/// numbered devices of the same architectures).
fn class_fingerprint(target: &str, i: usize) -> (Value, String) {
    if target == "wasm" {
        // isa × simd × (os, browser) × cores: the CPU key's parts.
        let isas = ["x86", "arm"];
        let simds = [(true, true), (true, false)];
        let uas = [("Linux", "Chrome"), ("Windows", "Chrome"), ("macOS", "Safari"), ("Linux", "Firefox"), ("Android", "Chrome")];
        let cores = [4, 8, 16, 2, 6, 12];
        let (isa, simd, ua) = (isas[i % 2], simds[(i / 2) % 2], uas[(i / 4) % uas.len()]);
        let c = cores[(i / 20) % cores.len()] + 32 * (i / 120);
        let fp = json!({"target": "wasm", "cpuArchitecture": isa, "simd": simd.0, "relaxedSimd": simd.1, "threads": false,
                        "hardwareConcurrency": c, "browser": {"name": ua.1, "version": "131"}, "os": ua.0});
        return (fp, format!("{isa} {} {} {} {c}c", if simd.1 { "relaxed" } else { "simd128" }, ua.0, ua.1));
    }
    // Two devices of every architecture, then the third of each, ...
    let per_round = GPUS.len() * 2;
    let (round, r) = (i / per_round, i % per_round);
    let (vendor, arch, devices) = GPUS[r / 2];
    let d = 2 * round + r % 2;
    let device = if d < devices.len() { devices[d].to_string() } else { format!("{} sku {}", devices[0], d) };
    (gpu_fingerprint(vendor, arch, &device), format!("{vendor}/{arch}/{device}"))
}

/// One device class and its hidden truth.
#[derive(Clone, Debug)]
pub struct Class {
    pub idx: usize,
    pub label: String,
    pub fp: Value,
    pub device_key: String,
    pub queue_len: usize,
    /// The true time of each kernel of the class's queue, µs.
    pub truth: HashMap<String, f64>,
    pub best_sha: String,
    pub best_us: f64,
    /// The slowest kernel, which the class's promoters push.
    pub promoted_sha: String,
    pub base_us: f64,
    pub spread: f64,
    seed: u64,
}

impl Class {
    fn new(idx: usize, label: String, fp: Value, device_key: String, shas: &[String], seed: u64) -> Class {
        let base_us = 20.0 * 10f64.powf(draw(seed, idx, "base"));
        let spread = 1.1 + 1.9 * draw(seed, idx, "spread");
        let draws: Vec<f64> = shas.iter().map(|s| draw(seed, idx, s)).collect();
        let (lo, hi) = draws.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &d| (l.min(d), h.max(d)));
        let truth: HashMap<String, f64> = shas
            .iter()
            .zip(&draws)
            .map(|(s, &d)| (s.clone(), base_us * (1.0 + (spread - 1.0) * if hi > lo { (d - lo) / (hi - lo) } else { 0.0 })))
            .collect();
        let by = |f: fn(f64, f64) -> bool| {
            truth.iter().fold(None::<(&String, f64)>, |acc, (s, &t)| match acc {
                Some((_, b)) if !f(t, b) => acc,
                _ => Some((s, t)),
            })
        };
        let (best_sha, best_us) = by(|t, b| t < b).map(|(s, t)| (s.clone(), t)).expect("a class has candidates");
        let promoted_sha = by(|t, b| t > b).map(|(s, _)| s.clone()).unwrap();
        Class { idx, label, fp, device_key, queue_len: shas.len(), truth, best_sha, best_us, promoted_sha, base_us, spread, seed }
    }

    /// The true time of any kernel on this class, µs.
    pub fn true_us(&self, sha: &str) -> f64 {
        self.truth.get(sha).copied().unwrap_or_else(|| self.base_us * (1.0 + (self.spread - 1.0) * draw(self.seed, self.idx, sha)).max(1.1))
    }
}

// ------------------------------------------------------------------- clients

#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    Honest,
    /// Leaves after this share of the queue.
    Leaver(f64),
    Promote,
    /// Demotes the current winner; `true`: omits it, `false`: ranks it last.
    Demote(bool),
}

impl Role {
    fn name(&self) -> &'static str {
        match self {
            Role::Honest => "honest",
            Role::Leaver(_) => "leaver",
            Role::Promote => "promote",
            Role::Demote(_) => "demote",
        }
    }
}

/// What arrives at once: one client, or a sybil's sessions back to back.
#[derive(Clone, Debug)]
struct Unit {
    id: usize,
    class: usize,
    role: Role,
    sessions: usize,
    liar: bool,
    sybil: Option<usize>,
    arrival: f64,
}

/// The clients of every class: stratified, so that every class has the
/// configured shares of liars and leavers.
fn plan(cfg: &Config, rng: &mut Rng) -> Vec<Unit> {
    let k = cfg.classes.max(1);
    let share = |f: f64, a: usize, b: usize| (f * b as f64).round() as usize - (f * a as f64).round() as usize;
    let mut units = Vec::new();
    let (mut sybil_groups, mut cum) = (0usize, 0usize);
    let (mut cum_honest, mut strategy_turn) = (0usize, 0usize);
    for c in 0..k {
        let n = cfg.clients / k + usize::from(c < cfg.clients % k);
        let liars = share(cfg.liars, cum, cum + n);
        cum += n;
        let honest = n - liars;
        let leavers = share(cfg.leave, cum_honest, cum_honest + honest);
        cum_honest += honest;
        for h in 0..honest {
            let role = if h < leavers { Role::Leaver(rng.f64()) } else { Role::Honest };
            units.push(Unit { id: 0, class: c, role, sessions: 1, liar: false, sybil: None, arrival: 0.0 });
        }
        let mut sybils = 0;
        for j in 0..liars {
            let s = if cfg.strategies.is_empty() { Strategy::Promote } else { cfg.strategies[strategy_turn % cfg.strategies.len()] };
            strategy_turn += 1;
            match s {
                Strategy::Promote => {
                    units.push(Unit { id: 0, class: c, role: Role::Promote, sessions: 1, liar: true, sybil: None, arrival: 0.0 })
                }
                Strategy::Demote => {
                    units.push(Unit { id: 0, class: c, role: Role::Demote(j % 2 == 0), sessions: 1, liar: true, sybil: None, arrival: 0.0 })
                }
                Strategy::Sybil => sybils += 1,
            }
        }
        while sybils > 0 {
            let m = sybils.min(cfg.sybil_sessions.max(1));
            units.push(Unit { id: 0, class: c, role: Role::Promote, sessions: m, liar: true, sybil: Some(sybil_groups), arrival: 0.0 });
            sybil_groups += 1;
            sybils -= m;
        }
    }
    rng.shuffle(&mut units);
    match cfg.liar_order {
        LiarOrder::Mixed => {}
        LiarOrder::First => units.sort_by_key(|u| !u.liar),
        LiarOrder::Last => units.sort_by_key(|u| u.liar),
    }
    let n = units.len().max(1) as f64;
    for (i, u) in units.iter_mut().enumerate() {
        u.id = i;
        u.arrival = cfg.arrival_seconds * i as f64 / n;
    }
    units
}

// -------------------------------------------------------------- shared state

#[derive(Debug, Default, Clone)]
struct Track {
    /// (seconds, class reports) of the poll that started the current run of
    /// polls within tolerance.
    conv: Option<(f64, usize)>,
    liar_won_ever: bool,
    /// Seconds the answer was the promoted kernel (poll to poll).
    liar_held_s: f64,
    last_at: f64,
    last_sha: String,
    last_level: String,
    last_slowdown: f64,
    polls: usize,
}

struct Shared {
    cfg: Config,
    op: Op,
    classes: Vec<Class>,
    t0: Instant,
    distinct: bool,
    /// Accepted reports per class.
    class_reports: Vec<AtomicUsize>,
    tracks: Mutex<Vec<Track>>,
    /// (request, role, status) → count; status 0: no answer.
    counts: Mutex<BTreeMap<(&'static str, &'static str, u16), usize>>,
    units_done: AtomicUsize,
    sessions_opened: AtomicUsize,
    reports_ok: AtomicUsize,
    left: AtomicUsize,
    /// Each honest device's first answer: (class, the class's accepted
    /// reports before it, the answer's true slowdown).
    first_answers: Mutex<Vec<(usize, usize, f64)>>,
}

impl Shared {
    fn count(&self, what: &'static str, role: &'static str, status: u16) {
        *self.counts.lock().unwrap().entry((what, role, status)).or_default() += 1;
    }
    fn server(&self, rng: &mut Rng) -> &str {
        &self.cfg.servers[rng.below(self.cfg.servers.len())]
    }
    fn secs(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }
}

fn http_client(addr: Option<IpAddr>) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .local_address(addr)
        .pool_idle_timeout(Duration::from_secs(5))
        .build()
        .expect("an HTTP client")
}

/// Sends a request built by `make`, again after 1 s on 503 (at most 3 times),
/// as the browser runtime does; `None` on a transport error.
async fn send(make: impl Fn() -> reqwest::RequestBuilder) -> Option<reqwest::Response> {
    for attempt in 0..4 {
        match make().send().await {
            Ok(r) if r.status() == 503 && attempt < 3 => tokio::time::sleep(Duration::from_secs(1)).await,
            Ok(r) => return Some(r),
            Err(_) if attempt < 1 => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(_) => return None,
        }
    }
    None
}

/// Opens a session; its id, or `None` (counted).
async fn open(sh: &Shared, http: &reqwest::Client, rng: &mut Rng, fp: &Value, role: &'static str) -> Option<(String, Value)> {
    let url = format!("{}/v1/sessions", sh.server(rng));
    let body = json!({ "fingerprint": fp });
    let Some(r) = send(|| http.post(&url).json(&body)).await else {
        sh.count("session", role, 0);
        return None;
    };
    let st = r.status().as_u16();
    sh.count("session", role, st);
    if st != 201 {
        return None;
    }
    let v: Value = r.json().await.ok()?;
    sh.sessions_opened.fetch_add(1, Ordering::Relaxed);
    Some((v["session_id"].as_str()?.to_string(), v))
}

/// Reads the session's queue; stops (dropping the stream) after
/// `keep(total)` candidates when `keep` says so.
async fn read_queue(
    sh: &Shared,
    http: &reqwest::Client,
    rng: &mut Rng,
    sid: &str,
    role: &'static str,
    stop_share: Option<f64>,
) -> Option<Vec<Value>> {
    let url = format!("{}/v1/sessions/{sid}/queue", sh.server(rng));
    let q = [("op", sh.cfg.op.as_str()), ("shape", sh.cfg.shape.as_str()), ("target", sh.cfg.target.as_str())];
    let Some(r) = send(|| http.get(&url).query(&q)).await else {
        sh.count("queue", role, 0);
        return None;
    };
    let st = r.status().as_u16();
    sh.count("queue", role, st);
    if st != 200 {
        return None;
    }
    let mut stream = r.bytes_stream();
    let (mut buf, mut out) = (String::new(), Vec::new());
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else { return Some(out) };
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let event = block.lines().find_map(|l| l.strip_prefix("event: ")).unwrap_or("");
            let data: String = block.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            match event {
                "candidate" => {
                    let c: Value = serde_json::from_str(&data).ok()?;
                    if let Some(share) = stop_share {
                        let total = c["total"].as_u64().unwrap_or(1) as f64;
                        if out.len() as f64 >= (share * total).floor() {
                            return Some(out); // the tab closes: the stream is dropped here
                        }
                    }
                    out.push(c);
                }
                "done" => return Some(out),
                _ => {}
            }
        }
    }
    Some(out)
}

/// One browser-like measurement of a kernel whose true time on this device
/// is `t` µs: (median_us, runs).
fn measure(cfg: &Config, rng: &mut Rng, t: f64) -> (f64, u64) {
    let t = t * (cfg.noise * rng.normal()).exp();
    let runs = ((1000.0 / t).ceil() as u64).clamp(3, 100_000);
    let total = ((t * runs as f64) / 100.0).round().max(1.0) * 100.0;
    let mut m = total / runs as f64;
    if rng.f64() < cfg.outlier {
        m *= 2.0;
    }
    (m, runs)
}

fn entry(op: &Op, c: &Value, median_us: f64, runs: u64) -> Value {
    json!({"sha256": c["sha256"], "ticket": c["ticket"], "median_us": median_us, "runs": runs, "output_ok": true,
           "samples": true_samples(op, c)})
}

async fn post_report(sh: &Shared, http: &reqwest::Client, rng: &mut Rng, sid: &str, class: usize, role: &'static str, entries: Vec<Value>) {
    let url = format!("{}/v1/sessions/{sid}/reports", sh.server(rng));
    let body = json!({"op": sh.op.name(), "shape": sh.op.shape(), "target": sh.cfg.target, "entries": entries});
    let st = match send(|| http.post(&url).json(&body)).await {
        Some(r) => r.status().as_u16(),
        None => 0,
    };
    sh.count("report", role, st);
    if st == 200 {
        sh.class_reports[class].fetch_add(1, Ordering::Relaxed);
        sh.reports_ok.fetch_add(1, Ordering::Relaxed);
    }
}

/// The kernel `GET /v1/kernels/best` answers for a device key: (sha, level).
async fn best_of(sh: &Shared, http: &reqwest::Client, rng: &mut Rng, key: &str) -> Option<(String, String)> {
    let url = format!("{}/v1/kernels/best", sh.server(rng));
    let q = [("device_key", key), ("op", sh.cfg.op.as_str()), ("shape", sh.cfg.shape.as_str()), ("target", sh.cfg.target.as_str())];
    let r = send(|| http.get(&url).query(&q)).await?;
    if r.status() != 200 {
        sh.count("best", "poller", r.status().as_u16());
        return None;
    }
    let v: Value = r.json().await.ok()?;
    Some((v["meta"]["sha256"].as_str()?.to_string(), v["level"].as_str().unwrap_or("").to_string()))
}

fn sybil_addr(g: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 200 + (g >> 16) as u8 % 50, (g >> 8) as u8, g as u8))
}

fn client_addr(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 10 + (i >> 16) as u8 % 180, (i >> 8) as u8, i as u8))
}

async fn run_unit(sh: Arc<Shared>, u: Unit) {
    let mut rng = Rng::new(sh.cfg.seed ^ mix(u.id as u64 + 17));
    let addr = sh.distinct.then(|| u.sybil.map(sybil_addr).unwrap_or_else(|| client_addr(u.id)));
    let http = http_client(addr);
    let class = &sh.classes[u.class];
    let role = if u.sybil.is_some() { "sybil" } else { u.role.name() };
    for _ in 0..u.sessions {
        // This device's own speed within its class.
        let factor = (0.05 * rng.normal()).exp();
        let Some((sid, _)) = open(&sh, &http, &mut rng, &class.fp, role).await else { continue };
        // An honest device asks for its best kernel first, as the browser
        // runtime does (its own draws, so the rest of the run is unchanged).
        if matches!(u.role, Role::Honest | Role::Leaver(_)) {
            let before = sh.class_reports[u.class].load(Ordering::Relaxed);
            let mut own = Rng::new(sh.cfg.seed ^ mix(u.id as u64 + 0x5eed));
            if let Some((sha, _)) = best_of(&sh, &http, &mut own, &class.device_key).await {
                sh.first_answers.lock().unwrap().push((u.class, before, class.true_us(&sha) / class.best_us));
            }
        }
        // A demoter looks the current winner up first.
        let demoted = match u.role {
            Role::Demote(_) => best_of(&sh, &http, &mut rng, &class.device_key).await.map(|b| b.0),
            _ => None,
        };
        let stop = match u.role {
            Role::Leaver(s) => Some(s),
            _ => None,
        };
        let Some(q) = read_queue(&sh, &http, &mut rng, &sid, role, stop).await else { continue };
        let honest = matches!(u.role, Role::Honest | Role::Leaver(_));
        let mut timed: Vec<(f64, u64, &Value)> = Vec::with_capacity(q.len());
        for c in &q {
            let sha = c["sha256"].as_str().unwrap_or("");
            let (m, runs) = measure(&sh.cfg, &mut rng, class.true_us(sha) * factor);
            timed.push((m, runs, c));
            if honest && sh.cfg.candidate_ms > 0 {
                tokio::time::sleep(Duration::from_millis(sh.cfg.candidate_ms)).await;
            }
        }
        if let Role::Leaver(_) = u.role {
            sh.left.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if timed.is_empty() {
            continue;
        }
        timed.sort_by(|a, b| a.0.total_cmp(&b.0));
        let entries: Vec<Value> = match u.role {
            Role::Honest | Role::Leaver(_) => timed.iter().take(5).map(|(m, r, c)| entry(&sh.op, c, *m, *r)).collect(),
            Role::Promote => {
                let target = timed.iter().find(|t| t.2["sha256"] == class.promoted_sha.as_str()).or(timed.last()).unwrap();
                let fake = class.best_us * factor * 0.8;
                let mut e = vec![entry(&sh.op, target.2, fake, 50)];
                // The slowest others after it, fastest first.
                let others: Vec<&(f64, u64, &Value)> = timed.iter().rev().filter(|t| t.2["sha256"] != target.2["sha256"]).take(4).collect();
                e.extend(others.iter().rev().map(|(m, r, c)| entry(&sh.op, c, m.max(fake * 1.01), *r)));
                e
            }
            Role::Demote(omit) => {
                let victim = demoted.filter(|d| timed.iter().any(|t| t.2["sha256"] == d.as_str())).unwrap_or(class.best_sha.clone());
                let rest: Vec<&(f64, u64, &Value)> = timed.iter().filter(|t| t.2["sha256"] != victim.as_str()).collect();
                let mut e: Vec<Value> = rest.iter().take(if omit { 5 } else { 4 }).map(|(m, r, c)| entry(&sh.op, c, *m, *r)).collect();
                if !omit && let Some(v) = timed.iter().find(|t| t.2["sha256"] == victim.as_str()) {
                    let slowest = rest.iter().take(4).map(|t| t.0).fold(v.0, f64::max);
                    e.push(entry(&sh.op, v.2, slowest.max(v.0) * 3.0, v.1));
                }
                e
            }
        };
        post_report(&sh, &http, &mut rng, &sid, u.class, role, entries).await;
    }
    sh.units_done.fetch_add(1, Ordering::Relaxed);
}

/// (class, its answer: kernel and level, seconds at the lookup, the class's reports before it).
type Answer = (usize, Option<(String, String)>, f64, usize);

async fn poll_one(sh: &Shared, http: &reqwest::Client, i: usize, pick: u64) -> Answer {
    let mut r = Rng::new(pick);
    // The report count before the lookup: the answer reflects at least these.
    let reports = sh.class_reports[i].load(Ordering::Relaxed);
    let at = sh.secs();
    (i, best_of(sh, http, &mut r, &sh.classes[i].device_key).await, at, reports)
}

/// Polls every class once, updating its track.
async fn poll_all(sh: &Shared, http: &reqwest::Client, rng: &mut Rng) {
    let picks: Vec<u64> = (0..sh.classes.len()).map(|_| rng.next()).collect();
    let futs: Vec<_> = picks.into_iter().enumerate().map(|(i, p)| poll_one(sh, http, i, p)).collect();
    let answers: Vec<Answer> = futures_util::stream::iter(futs).buffer_unordered(8).collect().await;
    let mut tracks = sh.tracks.lock().unwrap();
    for (i, a, at, reports) in answers {
        let Some((sha, level)) = a else { continue };
        let c = &sh.classes[i];
        let t = &mut tracks[i];
        let slow = c.true_us(&sha) / c.best_us;
        t.polls += 1;
        if t.last_sha == c.promoted_sha && t.polls > 1 {
            t.liar_held_s += at - t.last_at;
        }
        t.last_at = at;
        t.liar_won_ever |= sha == c.promoted_sha;
        if slow <= 1.0 + sh.cfg.tolerance {
            t.conv.get_or_insert((at, reports));
        } else {
            t.conv = None;
        }
        (t.last_sha, t.last_level, t.last_slowdown) = (sha, level, slow);
    }
}

// ------------------------------------------------------------------- results

#[derive(Clone, Debug)]
pub struct ClassResult {
    pub idx: usize,
    pub label: String,
    pub device_key: String,
    pub clients: usize,
    pub liars: usize,
    pub queue_len: usize,
    pub true_best_us: f64,
    pub spread: f64,
    /// Accepted reports of the class in all.
    pub reports: usize,
    /// (seconds from the start, accepted reports of the class) when the
    /// answer came within tolerance for good; `None`: it is not.
    pub converged: Option<(f64, usize)>,
    pub final_slowdown: f64,
    pub final_level: String,
    pub final_is_promoted: bool,
    pub promoted_won_ever: bool,
    /// Seconds during which lookups answered the promoted kernel.
    pub promoted_held_s: f64,
}

#[derive(Clone, Debug)]
pub struct Summary {
    pub classes: Vec<ClassResult>,
    pub sessions: usize,
    pub liar_sessions: usize,
    pub left: usize,
    pub seconds: f64,
    /// (request, role, status) → count.
    pub counts: BTreeMap<(String, String, u16), usize>,
    pub distinct_addresses: bool,
    /// Each honest device's first answer (before its queue): (class, the
    /// class's accepted reports before it, the answer's true slowdown).
    pub first_answers: Vec<(usize, usize, f64)>,
    pub tolerance: f64,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) })
}

impl Summary {
    /// The n-th device of a class (n from 1) as the honest devices that
    /// asked with n - 1 of their class's reports accepted: (devices, median
    /// true slowdown of their first answer, share within tolerance).
    pub fn nth_device(&self, n: usize) -> (usize, Option<f64>, f64) {
        let v: Vec<f64> = self.first_answers.iter().filter(|a| a.1 + 1 == n).map(|a| a.2).collect();
        let within = v.iter().filter(|&&x| x <= 1.0 + self.tolerance).count();
        (v.len(), median(v.clone()), if v.is_empty() { 0.0 } else { within as f64 / v.len() as f64 })
    }

    /// Per class, the fewest accepted reports after which every honest
    /// device's first answer was within tolerance: the sessions a class
    /// needs before the next device starts tuned (`None`: the last one asked
    /// still did not).
    pub fn sessions_until_tuned(&self) -> Vec<Option<usize>> {
        (0..self.classes.len())
            .map(|c| {
                let mut a: Vec<(usize, f64)> = self.first_answers.iter().filter(|x| x.0 == c).map(|x| (x.1, x.2)).collect();
                a.sort_by_key(|x| x.0);
                let last_slow = a.iter().rposition(|x| x.1 > 1.0 + self.tolerance);
                match last_slow {
                    None => Some(0),
                    Some(i) if i + 1 < a.len() => Some(a[i + 1].0),
                    Some(_) => None,
                }
            })
            .collect()
    }

    /// The first-answer lines of [`Summary::table`].
    pub fn first_answer_table(&self) -> String {
        let mut s = String::new();
        for n in [1, 2, 3, 10] {
            let (k, m, within) = self.nth_device(n);
            let m = m.map(|v| format!("{v:.3}")).unwrap_or("-".into());
            s += &format!(
                "device {n:>2} of a class: {k} asked, first answer median {m}x the true best, {:.0}% within {:.0}%\n",
                within * 100.0,
                self.tolerance * 100.0
            );
        }
        let until = self.sessions_until_tuned();
        let known: Vec<f64> = until.iter().flatten().map(|&n| n as f64).collect();
        s += &format!(
            "sessions until the next device starts tuned: median {}, worst {}, never in {} of {} classes\n",
            median(known.clone()).map(|v| format!("{v:.0}")).unwrap_or("-".into()),
            known.iter().copied().reduce(f64::max).map(|v| format!("{v:.0}")).unwrap_or("-".into()),
            until.iter().filter(|u| u.is_none()).count(),
            until.len()
        );
        s
    }

    pub fn not_within(&self) -> Vec<&ClassResult> {
        self.classes.iter().filter(|c| c.converged.is_none()).collect()
    }
    pub fn liar_wins(&self) -> Vec<&ClassResult> {
        self.classes.iter().filter(|c| c.final_is_promoted).collect()
    }
    /// (median, worst) seconds to convergence over converged classes.
    pub fn seconds(&self) -> (Option<f64>, Option<f64>) {
        let v: Vec<f64> = self.classes.iter().filter_map(|c| c.converged.map(|x| x.0)).collect();
        (median(v.clone()), v.into_iter().reduce(f64::max))
    }
    /// (median, worst) reports to convergence over converged classes.
    pub fn reports(&self) -> (Option<f64>, Option<f64>) {
        let v: Vec<f64> = self.classes.iter().filter_map(|c| c.converged.map(|x| x.1 as f64)).collect();
        (median(v.clone()), v.into_iter().reduce(f64::max))
    }
    /// Count by (request, status) over all roles, or one role.
    pub fn by_status(&self, what: &str, role: Option<&str>) -> BTreeMap<u16, usize> {
        let mut m = BTreeMap::new();
        for ((w, r, s), n) in &self.counts {
            if w == what && role.is_none_or(|x| x == r) {
                *m.entry(*s).or_default() += n;
            }
        }
        m
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        s += &format!(
            "{:>3} {:<40} {:>7} {:>5} {:>5} {:>8} {:>6} {:>7} {:>9} {:>8} {:>8} {:<7} {}\n",
            "cls",
            "device key",
            "clients",
            "liars",
            "queue",
            "best_us",
            "spread",
            "reports",
            "conv_rep",
            "conv_s",
            "final_x",
            "level",
            "liar"
        );
        for c in &self.classes {
            let (cs, cr) = c.converged.map(|(t, r)| (format!("{t:.1}"), r.to_string())).unwrap_or(("-".into(), "-".into()));
            let liar = if c.final_is_promoted {
                "WON".to_string()
            } else if c.promoted_won_ever {
                format!("for {:.1} s", c.promoted_held_s)
            } else {
                "no".to_string()
            };
            s += &format!(
                "{:>3} {:<40} {:>7} {:>5} {:>5} {:>8.1} {:>6.2} {:>7} {:>9} {:>8} {:>8.3} {:<7} {}{}\n",
                c.idx,
                c.device_key,
                c.clients,
                c.liars,
                c.queue_len,
                c.true_best_us,
                c.spread,
                c.reports,
                cr,
                cs,
                c.final_slowdown,
                c.final_level,
                liar,
                if c.converged.is_none() { "  NOT WITHIN" } else { "" }
            );
        }
        let f = |x: Option<f64>, p: usize| x.map(|v| format!("{v:.p$}")).unwrap_or("-".into());
        let (ms, ws) = self.seconds();
        let (mr, wr) = self.reports();
        s += &format!(
            "convergence over {} of {} classes: median {} s / {} reports, worst {} s / {} reports\n",
            self.classes.len() - self.not_within().len(),
            self.classes.len(),
            f(ms, 1),
            f(mr, 0),
            f(ws, 1),
            f(wr, 0)
        );
        s += &self.first_answer_table();
        let names = |v: Vec<&ClassResult>| v.iter().map(|c| c.idx.to_string()).collect::<Vec<_>>().join(",");
        s += &format!("classes not within 5%: {} [{}]\n", self.not_within().len(), names(self.not_within()));
        s += &format!("classes won by a liar-promoted kernel: {} [{}]\n", self.liar_wins().len(), names(self.liar_wins()));
        s += &format!(
            "sessions {} ({} liars), left mid-queue {}, {:.1} s, {} source addresses\n",
            self.sessions,
            self.liar_sessions,
            self.left,
            self.seconds,
            if self.distinct_addresses { "per-client" } else { "shared" }
        );
        for what in ["session", "queue", "report"] {
            s += &format!("{what}s by status: {:?}", self.by_status(what, None));
            for role in ["honest", "leaver", "promote", "demote", "sybil"] {
                let m = self.by_status(what, Some(role));
                if !m.is_empty() {
                    s += &format!("  {role} {m:?}");
                }
            }
            s += "\n";
        }
        s
    }

    pub fn json(&self) -> Value {
        let (ms, ws) = self.seconds();
        let (mr, wr) = self.reports();
        let st = |what: &str| -> Value {
            let mut m = serde_json::Map::new();
            for role in [None, Some("honest"), Some("leaver"), Some("promote"), Some("demote"), Some("sybil")] {
                let b = self.by_status(what, role);
                if !b.is_empty() {
                    m.insert(role.unwrap_or("all").into(), json!(b.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>()));
                }
            }
            Value::Object(m)
        };
        let first_answers: Vec<Value> = [1, 2, 3, 10]
            .iter()
            .map(|&n| {
                let (k, m, within) = self.nth_device(n);
                json!({"device": n, "asked": k, "median_slowdown": m, "within": within})
            })
            .collect();
        json!({
            "classes": self.classes.len(),
            "sessions": self.sessions,
            "liar_sessions": self.liar_sessions,
            "left": self.left,
            "seconds": self.seconds,
            "converged": self.classes.len() - self.not_within().len(),
            "not_within": self.not_within().iter().map(|c| c.idx).collect::<Vec<_>>(),
            "liar_wins": self.liar_wins().iter().map(|c| c.idx).collect::<Vec<_>>(),
            "convergence_s": {"median": ms, "worst": ws},
            "convergence_reports": {"median": mr, "worst": wr},
            "distinct_addresses": self.distinct_addresses,
            "first_answers": first_answers,
            "sessions_until_tuned": self.sessions_until_tuned(),
            "sessions_by_status": st("session"),
            "queues_by_status": st("queue"),
            "reports_by_status": st("report"),
            "per_class": self.classes.iter().map(|c| json!({
                "class": c.idx, "device_key": c.device_key, "clients": c.clients, "liars": c.liars, "queue": c.queue_len,
                "true_best_us": c.true_best_us, "spread": c.spread, "reports": c.reports,
                "converged_s": c.converged.map(|x| x.0), "converged_reports": c.converged.map(|x| x.1),
                "final_slowdown": c.final_slowdown, "final_level": c.final_level,
                "liar_won": c.final_is_promoted, "liar_won_ever": c.promoted_won_ever, "liar_held_s": c.promoted_held_s,
            })).collect::<Vec<_>>(),
        })
    }
}

// ---------------------------------------------------------------------- run

fn loopback_hosts(servers: &[String]) -> bool {
    servers.iter().all(|s| {
        let host = s.trim_start_matches("http://").split(['/', ':']).next().unwrap_or("");
        host.parse::<Ipv4Addr>().is_ok_and(|a| a.is_loopback())
    })
}

/// Runs the population; `Err` only when the classes cannot be set up.
pub async fn run(cfg: Config) -> Result<Summary, String> {
    let op = Op::parse(&cfg.op, &cfg.shape).map_err(|e| format!("--op/--shape: {e}"))?;
    let distinct = cfg.distinct_addresses.unwrap_or_else(|| loopback_hosts(&cfg.servers));
    let mut rng = Rng::new(cfg.seed);
    // Probe every class: its keys and its queue, which fix its truth.
    let mut classes = Vec::new();
    for i in 0..cfg.classes.max(1) {
        let (fp, label) = class_fingerprint(&cfg.target, i);
        let http = http_client(distinct.then(|| IpAddr::V4(Ipv4Addr::new(127, 9, (i >> 8) as u8, i as u8))));
        let server = &cfg.servers[i % cfg.servers.len()];
        let r = http
            .post(format!("{server}/v1/sessions"))
            .json(&json!({ "fingerprint": fp }))
            .send()
            .await
            .map_err(|e| format!("{server}: {e}"))?;
        if r.status() != 201 {
            return Err(format!("probe session for class {i}: {} {}", r.status(), r.text().await.unwrap_or_default()));
        }
        let v: Value = r.json().await.map_err(|e| e.to_string())?;
        let sid = v["session_id"].as_str().unwrap_or("").to_string();
        let key = v["device_key"].as_str().unwrap_or("").to_string();
        let r = http
            .get(format!("{server}/v1/sessions/{sid}/queue"))
            .query(&[("op", cfg.op.as_str()), ("shape", cfg.shape.as_str()), ("target", cfg.target.as_str())])
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if r.status() != 200 {
            return Err(format!("probe queue for class {i}: {} {}", r.status(), r.text().await.unwrap_or_default()));
        }
        let body = r.text().await.map_err(|e| e.to_string())?;
        let shas: Vec<String> = body
            .split("\n\n")
            .filter(|b| b.lines().any(|l| l == "event: candidate"))
            .filter_map(|b| {
                let data: String = b.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
                serde_json::from_str::<Value>(&data).ok()?["sha256"].as_str().map(str::to_string)
            })
            .collect();
        if shas.len() < 2 {
            return Err(format!("class {i} ({key}) has {} candidates; the simulation needs at least 2", shas.len()));
        }
        classes.push(Class::new(i, label, fp, key, &shas, cfg.seed));
    }
    let units = plan(&cfg, &mut rng);
    let k = classes.len();
    let sh = Arc::new(Shared {
        op,
        t0: Instant::now(),
        distinct,
        class_reports: (0..k).map(|_| AtomicUsize::new(0)).collect(),
        tracks: Mutex::new(vec![Track::default(); k]),
        counts: Mutex::default(),
        units_done: AtomicUsize::new(0),
        sessions_opened: AtomicUsize::new(0),
        reports_ok: AtomicUsize::new(0),
        left: AtomicUsize::new(0),
        first_answers: Mutex::new(Vec::new()),
        classes,
        cfg: cfg.clone(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    // The poller.
    let poller = {
        let (sh, stop) = (sh.clone(), stop.clone());
        tokio::spawn(async move {
            let http = http_client(None);
            let mut rng = Rng::new(sh.cfg.seed ^ 0x5eed);
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                poll_all(&sh, &http, &mut rng).await;
                tokio::time::sleep(Duration::from_millis(sh.cfg.poll_ms).saturating_sub(t.elapsed())).await;
            }
        })
    };
    // Progress on stderr.
    let n_units = units.len();
    let progress = {
        let (sh, stop) = (sh.clone(), stop.clone());
        tokio::spawn(async move {
            if sh.cfg.progress_s <= 0.0 {
                return;
            }
            let mut next = sh.cfg.progress_s;
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if sh.secs() < next {
                    continue;
                }
                next += sh.cfg.progress_s;
                let within = sh.tracks.lock().unwrap().iter().filter(|t| t.conv.is_some()).count();
                let refused: usize =
                    sh.counts.lock().unwrap().iter().filter(|((w, _, s), _)| *w == "report" && *s != 200).map(|(_, n)| n).sum();
                eprintln!(
                    "[{:6.1} s] clients {}/{} done, sessions {}, reports {} accepted {} refused, left {}, classes within {:.0}%: {}/{}",
                    sh.secs(),
                    sh.units_done.load(Ordering::Relaxed),
                    n_units,
                    sh.sessions_opened.load(Ordering::Relaxed),
                    sh.reports_ok.load(Ordering::Relaxed),
                    refused,
                    sh.left.load(Ordering::Relaxed),
                    sh.cfg.tolerance * 100.0,
                    within,
                    sh.classes.len()
                );
            }
        })
    };
    let sem = Arc::new(tokio::sync::Semaphore::new(cfg.parallel.max(1)));
    let mut tasks = Vec::with_capacity(units.len());
    let (mut sessions, mut liar_sessions) = (0, 0);
    let mut per_class = vec![(0usize, 0usize); k];
    for u in units {
        sessions += u.sessions;
        per_class[u.class].0 += u.sessions;
        if u.liar {
            liar_sessions += u.sessions;
            per_class[u.class].1 += u.sessions;
        }
        let (sh, sem) = (sh.clone(), sem.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(tokio::time::Instant::from_std(sh.t0) + Duration::from_secs_f64(u.arrival)).await;
            let _permit = sem.acquire().await.unwrap();
            run_unit(sh, u).await;
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    stop.store(true, Ordering::Relaxed);
    let _ = poller.await;
    let _ = progress.await;
    let seconds = sh.secs();
    // The final answer, once the servers' lookup caches have expired.
    tokio::time::sleep(Duration::from_millis(cfg.settle_ms)).await;
    poll_all(&sh, &http_client(None), &mut rng).await;
    let tracks = sh.tracks.lock().unwrap().clone();
    let classes = sh
        .classes
        .iter()
        .zip(tracks)
        .map(|(c, t)| ClassResult {
            idx: c.idx,
            label: c.label.clone(),
            device_key: c.device_key.clone(),
            clients: per_class[c.idx].0,
            liars: per_class[c.idx].1,
            queue_len: c.queue_len,
            true_best_us: c.best_us,
            spread: c.spread,
            reports: sh.class_reports[c.idx].load(Ordering::Relaxed),
            converged: t.conv,
            final_slowdown: t.last_slowdown,
            final_level: t.last_level,
            final_is_promoted: t.last_sha == c.promoted_sha,
            promoted_won_ever: t.liar_won_ever,
            promoted_held_s: t.liar_held_s,
        })
        .collect();
    let counts = sh.counts.lock().unwrap().iter().map(|((w, r, s), n)| ((w.to_string(), r.to_string(), *s), *n)).collect();
    let first_answers = sh.first_answers.lock().unwrap().clone();
    Ok(Summary {
        classes,
        sessions,
        liar_sessions,
        left: sh.left.load(Ordering::Relaxed),
        seconds,
        counts,
        distinct_addresses: distinct,
        first_answers,
        tolerance: cfg.tolerance,
    })
}
