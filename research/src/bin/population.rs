//! `population`: a population of simulated browsers against running
//! servers over HTTP (issue 20, item 3). The model (device classes, hidden
//! true times, browser timing, leavers, liars, convergence) is documented
//! in `src/population.rs`, which this crate's `tests/population.rs` runs too.
//!
//! ```text
//! cargo build --release -p webtune-research --bin population
//! target/release/population --servers http://127.0.0.1:8080,http://127.0.0.1:8081 \
//!     --clients 10000 --classes 50 --liars 0.3 --arrival-seconds 60 --parallel 64
//! ```
//!
//! Prints a table (one line per class, then the median and worst
//! convergence and the requests by status), or with `--json` one JSON
//! line; progress goes to stderr. Exits 0 whether or not every class
//! converged (the output says which did not); 2 on bad arguments or when
//! the servers cannot be reached.

use webtune_research::population;
use webtune_research::population::{Config, LiarOrder, Strategy};

const HELP: &str = "population: simulated browsers tuning kernels against webtune servers over HTTP

  --servers URL[,URL...]   servers; each request goes to one picked at random (default http://127.0.0.1:8080)
  --clients N              sessions in all, liars and sybil sessions included (default 2000)
  --classes K              device classes (default 20)
  --liars FRACTION         share of sessions that lie, in every class (default 0.3)
  --liar-order ORDER       mixed | first | last: when liars arrive (default mixed)
  --strategies LIST        liars' strategies, taken in turn: promote,demote,sybil (default all three)
  --sybil-sessions N       sessions per sybil address (default 20)
  --leave FRACTION         share of honest clients that leave mid-queue, reporting nothing (default 0.3)
  --arrival-seconds S      clients arrive evenly over S seconds (default 0: all at once, --parallel at a time)
  --parallel P             clients in flight at once (default 32)
  --seed N                 seed of the truth, the noise and the arrival order (default 2026)
  --op OP --shape S --target T   the kernel tuned (default matmul 64,64,64 wgsl; wasm uses CPU classes)
  --poll-ms MS             how often every class's best kernel is looked up (default 500)
  --settle-ms MS           wait before the final lookup (default 1500, past the servers' 1 s lookup cache)
  --candidate-ms MS        time an honest client spends per candidate (default 0)
  --noise SIGMA            lognormal sigma of one measurement (default 0.03)
  --outlier P              probability that a measurement is 2x (default 0.02)
  --addresses MODE         auto | per-client | shared: one loopback source address per client (auto: when every server is on 127.0.0.0/8)
  --server-pids PID[,PID]  local server processes whose resident memory (VmRSS) to print at the end
  --progress S             seconds between progress lines on stderr (default 5; 0: none)
  --json                   print one JSON line instead of the table
";

fn fail(msg: &str) -> ! {
    eprintln!("population: {msg}");
    std::process::exit(2);
}

fn rss_kib(pid: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()
}

fn main() {
    let mut cfg = Config::default();
    let (mut json, mut pids) = (false, Vec::<String>::new());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--json" {
            json = true;
            continue;
        }
        if a == "-h" || a == "--help" {
            print!("{HELP}");
            return;
        }
        let v = args.next().unwrap_or_else(|| fail(&format!("{a} needs a value (see --help)")));
        fn num<T: std::str::FromStr>(a: &str, v: &str) -> T {
            v.parse().unwrap_or_else(|_| fail(&format!("{a}: not a number: {v}")))
        }
        match a.as_str() {
            "--servers" => cfg.servers = v.split(',').map(|s| s.trim_end_matches('/').to_string()).filter(|s| !s.is_empty()).collect(),
            "--clients" => cfg.clients = num(&a, &v),
            "--classes" => cfg.classes = num(&a, &v),
            "--liars" => cfg.liars = num(&a, &v),
            "--liar-order" => {
                cfg.liar_order = match v.as_str() {
                    "mixed" => LiarOrder::Mixed,
                    "first" => LiarOrder::First,
                    "last" => LiarOrder::Last,
                    _ => fail("--liar-order is mixed, first or last"),
                }
            }
            "--strategies" => {
                cfg.strategies = v
                    .split(',')
                    .map(|s| Strategy::parse(s).unwrap_or_else(|| fail(&format!("--strategies: unknown strategy {s}"))))
                    .collect()
            }
            "--sybil-sessions" => cfg.sybil_sessions = num(&a, &v),
            "--leave" => cfg.leave = num(&a, &v),
            "--arrival-seconds" => cfg.arrival_seconds = num(&a, &v),
            "--parallel" => cfg.parallel = num(&a, &v),
            "--seed" => cfg.seed = num(&a, &v),
            "--op" => cfg.op = v,
            "--shape" => cfg.shape = v,
            "--target" => cfg.target = v,
            "--poll-ms" => cfg.poll_ms = num(&a, &v),
            "--settle-ms" => cfg.settle_ms = num(&a, &v),
            "--candidate-ms" => cfg.candidate_ms = num(&a, &v),
            "--noise" => cfg.noise = num(&a, &v),
            "--outlier" => cfg.outlier = num(&a, &v),
            "--addresses" => {
                cfg.distinct_addresses = match v.as_str() {
                    "auto" => None,
                    "per-client" => Some(true),
                    "shared" => Some(false),
                    _ => fail("--addresses is auto, per-client or shared"),
                }
            }
            "--server-pids" => pids = v.split(',').map(str::to_string).collect(),
            "--progress" => cfg.progress_s = num(&a, &v),
            _ => fail(&format!("unknown flag {a} (see --help)")),
        }
    }
    if cfg.servers.is_empty() || !(0.0..=1.0).contains(&cfg.liars) || !(0.0..=1.0).contains(&cfg.leave) || cfg.clients == 0 {
        fail("--servers must name a server, --liars and --leave must be in [0, 1], --clients above 0");
    }
    if !["wgsl", "wasm"].contains(&cfg.target.as_str()) {
        fail("--target is wgsl or wasm");
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let summary = rt.block_on(population::run(cfg.clone())).unwrap_or_else(|e| fail(&e));
    let rss: Vec<(String, Option<u64>)> = pids.iter().map(|p| (p.clone(), rss_kib(p))).collect();
    if json {
        let mut j = summary.json();
        j["config"] = serde_json::json!({
            "servers": cfg.servers, "clients": cfg.clients, "classes": cfg.classes, "liars": cfg.liars,
            "liar_order": format!("{:?}", cfg.liar_order).to_lowercase(), "leave": cfg.leave,
            "arrival_seconds": cfg.arrival_seconds, "parallel": cfg.parallel, "seed": cfg.seed,
            "op": cfg.op, "shape": cfg.shape, "target": cfg.target,
        });
        if !rss.is_empty() {
            j["server_rss_kib"] =
                serde_json::json!(rss.iter().map(|(p, k)| serde_json::json!({"pid": p, "rss_kib": k})).collect::<Vec<_>>());
        }
        println!("{j}");
    } else {
        print!("{}", summary.table());
        for (p, k) in rss {
            println!("server pid {p}: VmRSS {}", k.map(|k| format!("{:.1} MiB", k as f64 / 1024.0)).unwrap_or("unreadable".into()));
        }
    }
}
