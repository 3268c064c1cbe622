//! `webtune serve`: the tuning service over the kernel database.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::args::StoreArgs;
use crate::http::Config;
use crate::http::conn::ConnLimits;
use crate::http::cors::Origins;
use crate::http::limits::Limits;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (printed on start).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// The database, and the model store served at /v1/models.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Distinct sessions that must vote for a kernel before it can win at a key.
    #[arg(long, default_value_t = 2)]
    pub quorum: usize,
    /// Least relative speed-up a challenger needs to replace a winner.
    #[arg(long, default_value_t = 0.03)]
    pub min_margin: f64,
    /// Relative lead in sessions ranking a challenger above the winner (over those ranking the winner above it) with which it replaces the winner whatever the times say.
    #[arg(long, default_value_t = 0.25)]
    pub vote_margin: f64,
    /// Write requests (sessions, reports, queues) per client address per minute.
    #[arg(long, default_value_t = 600.0)]
    pub rate_per_address: f64,
    /// Reports and queues per session per minute.
    #[arg(long, default_value_t = 60.0)]
    pub rate_per_session: f64,
    /// Requests handled at once before answering 503.
    #[arg(long, default_value_t = 512)]
    pub max_in_flight: usize,
    /// Candidate queues streaming at once before answering 503.
    #[arg(long, default_value_t = 256)]
    pub max_queues: usize,
    /// Milliseconds a best-kernel answer may be cached (other servers' reports show after this).
    #[arg(long, default_value_t = 1000)]
    pub cache_ttl_ms: u64,
    /// Milliseconds a connection has to send a request's headers (also the longest a keep-alive connection may idle).
    #[arg(long, default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// Milliseconds a request has, body included, before it is answered 408.
    #[arg(long, default_value_t = 10_000)]
    pub request_timeout_ms: u64,
    /// Connections open at once from one client address; more are closed on arrival.
    #[arg(long, default_value_t = 64)]
    pub max_connections_per_address: usize,
    /// Connections open at once in all (keep it under `ulimit -n`).
    #[arg(long, default_value_t = 900)]
    pub max_connections: usize,
    /// An origin (`https://app.example`) whose pages may call the API; repeatable; `*` for any. Default: none beyond the server's own.
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// What a best-kernel lookup answers before a quorum elected a winner: `provisional` (what a majority of the key's first sessions ranked, else the prediction), `predicted` (the first candidate of the device's lite space) or `portable` (the portable default, as before).
    #[arg(long, default_value = "provisional")]
    pub first_answer: crate::service::FirstAnswer,
    /// When a report is answered: `counted` (once durable and counted by an election, so the answer's winners include its votes and a lookup after it sees them) or `durable` (once durable; its votes reach the winners with the elector's next pass, usually within a few hundred milliseconds: the fastest).
    #[arg(long, default_value = "counted")]
    pub report_answer: crate::service::ReportAnswer,
}

pub fn run(a: ServeArgs) -> Result<()> {
    if a.quorum == 0 {
        bail!("--quorum must be at least 1");
    }
    if !(0.0..1.0).contains(&a.min_margin) {
        bail!("--min-margin must be in [0, 1), e.g. 0.03");
    }
    if !(a.vote_margin >= 0.0) {
        bail!("--vote-margin must be 0 or more, e.g. 0.25");
    }
    if a.rate_per_address <= 0.0 || a.rate_per_session <= 0.0 || a.max_in_flight == 0 || a.max_queues == 0 {
        bail!("rates and limits must be positive");
    }
    if a.header_timeout_ms == 0 || a.request_timeout_ms == 0 || a.max_connections == 0 || a.max_connections_per_address == 0 {
        bail!("--header-timeout-ms, --request-timeout-ms, --max-connections and --max-connections-per-address must be positive");
    }
    let cors = Origins::parse(&a.allow_origin).map_err(anyhow::Error::msg)?;
    let config = Config {
        policy: webtune_kernel_db::VotePolicy { quorum: a.quorum, min_margin: a.min_margin, vote_margin: a.vote_margin },
        limits: Limits {
            per_address_per_min: a.rate_per_address,
            per_session_per_min: a.rate_per_session,
            max_in_flight: a.max_in_flight,
            max_queues: a.max_queues,
            max_queues_per_session: Limits::default().max_queues_per_session,
        },
        cache_ttl: Duration::from_millis(a.cache_ttl_ms),
        models_dir: Some(a.store.models_dir()),
        connections: ConnLimits {
            header_timeout: Duration::from_millis(a.header_timeout_ms),
            request_timeout: Duration::from_millis(a.request_timeout_ms),
            per_address: a.max_connections_per_address,
            total: a.max_connections,
        },
        cors,
        first_answer: a.first_answer,
        report_answer: a.report_answer,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    rt.block_on(crate::http::serve(a.addr, &a.store.database_url, config))
}
