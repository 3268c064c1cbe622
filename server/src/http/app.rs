//! The edge's shared state: the [`Service`] it calls, and what only the
//! edge needs (admission limits, connection counts, the queues streaming).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use webtune_kernel_db::VotePolicy;

use super::{conn, cors, limits};
use crate::service::{Service, Settings};

/// How a server runs: vote policy, admission limits, cache lifetime.
#[derive(Clone, Debug)]
pub struct Config {
    pub policy: VotePolicy,
    pub limits: limits::Limits,
    /// How long a cached best-kernel answer may be served. Reports to this
    /// server invalidate it at once; reports to another server sharing the
    /// database are seen after at most this long.
    pub cache_ttl: std::time::Duration,
    /// The model store served at `/v1/models`; `None` serves no models.
    pub models_dir: Option<std::path::PathBuf>,
    /// Timeouts and caps on connections.
    pub connections: conn::ConnLimits,
    /// Origins other than the server's own whose pages may call the API.
    pub cors: cors::Origins,
    /// What a lookup answers before a quorum elected a winner.
    pub first_answer: crate::service::FirstAnswer,
    /// When a report is answered: once counted, or once durable.
    pub report_answer: crate::service::ReportAnswer,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policy: VotePolicy::default(),
            limits: limits::Limits::default(),
            cache_ttl: std::time::Duration::from_millis(1000),
            models_dir: None,
            connections: conn::ConnLimits::default(),
            cors: cors::Origins::default(),
            first_answer: crate::service::FirstAnswer::default(),
            report_answer: crate::service::ReportAnswer::default(),
        }
    }
}

/// Shared state of all handlers.
#[derive(Debug)]
pub struct App {
    /// The rules, the database behind them, and the counters.
    pub service: Service,
    pub config: Config,
    /// Write requests per client address.
    pub per_address: limits::Buckets,
    /// Reports and queues per session.
    pub per_session: limits::Buckets,
    /// Requests being handled.
    pub in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// Candidate queues streaming.
    pub queues: Arc<std::sync::atomic::AtomicUsize>,
    /// Connections open, per address and in all.
    pub open: Arc<conn::Open>,
    /// Candidate queues streaming, per session.
    pub session_queues: Mutex<HashMap<String, Arc<std::sync::atomic::AtomicUsize>>>,
}

impl App {
    /// Starts the service (connects to and migrates the database, loads the
    /// ticket secret) and the edge's limits.
    pub async fn new(database_url: &str, config: Config) -> anyhow::Result<Arc<App>> {
        let settings = Settings {
            policy: config.policy,
            cache_ttl: config.cache_ttl,
            models_dir: config.models_dir.clone(),
            first_answer: config.first_answer,
            report_answer: config.report_answer,
        };
        let service = Service::new(database_url, settings).await?;
        Ok(Arc::new(App {
            service,
            per_address: limits::Buckets::per_minute(config.limits.per_address_per_min),
            per_session: limits::Buckets::with_burst(config.limits.per_session_per_min, config.limits.per_session_burst()),
            in_flight: Arc::default(),
            queues: Arc::default(),
            open: Arc::default(),
            session_queues: Mutex::new(HashMap::new()),
            config,
        }))
    }
}
