//! Admission control: token buckets per client address and per session, and
//! a bound on concurrent work, so that overload is answered with 429 or 503
//! (and `Retry-After`) instead of unbounded queues or a fallen-over server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::App;
use super::error::ApiError;

/// Admission limits of one server; `webtune serve` flags set them.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Write requests (sessions, reports, queues) per client address per minute.
    pub per_address_per_min: f64,
    /// Reports and queues per session per minute (a batch of reports counts
    /// once; latency reports are counted apart, at the same rate).
    pub per_session_per_min: f64,
    /// Requests handled at once; past this the server answers 503.
    pub max_in_flight: usize,
    /// Candidate queues streaming at once, all sessions together.
    pub max_queues: usize,
    /// Candidate queues streaming at once for one session. The browser
    /// runtime tunes an app's ops side by side (a candidate of each in turn),
    /// so an app with a few ops holds a queue for each.
    pub max_queues_per_session: usize,
}

impl Limits {
    /// A session's burst of queue and report requests: an app opens a queue
    /// for each kernel it tunes and reports each one when it is drained, so a
    /// page that tunes as many kernels as it may stream at once makes up to
    /// two requests per queue in quick succession (a small model drains its
    /// queues in seconds; the browser runtime sends its reports in batches,
    /// one request for up to 16). The steady rate stays `per_session_per_min`.
    pub fn per_session_burst(&self) -> f64 {
        (self.per_session_per_min / 6.0).max((2 * self.max_queues_per_session + 4) as f64)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits { per_address_per_min: 600.0, per_session_per_min: 60.0, max_in_flight: 512, max_queues: 256, max_queues_per_session: 8 }
    }
}

/// Token buckets by key: `rate` tokens per second, up to `burst`.
#[derive(Debug)]
pub struct Buckets {
    rate: f64,
    burst: f64,
    map: std::sync::Mutex<HashMap<String, (f64, Instant)>>,
}

/// Keys kept before idle (full) buckets are dropped.
const MAX_KEYS: usize = 100_000;

impl Buckets {
    /// `per_min` tokens a minute, with a burst of ten seconds' worth (at least 5).
    pub fn per_minute(per_min: f64) -> Buckets {
        Buckets::with_burst(per_min, per_min / 6.0)
    }

    /// `per_min` tokens a minute, with a burst of `burst` (at least 5).
    pub fn with_burst(per_min: f64, burst: f64) -> Buckets {
        let rate = (per_min / 60.0).max(1e-6);
        Buckets { rate, burst: burst.max(5.0), map: std::sync::Mutex::new(HashMap::new()) }
    }

    /// Takes one token for `key`, or says how long until one is there.
    pub fn take(&self, key: &str) -> Result<(), Duration> {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_KEYS {
            let (rate, burst) = (self.rate, self.burst);
            map.retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() * rate < burst);
        }
        let (tokens, at) = map.entry(key.to_string()).or_insert((self.burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * self.rate).min(self.burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - *tokens) / self.rate))
        }
    }
}

/// A 429 with `Retry-After` (see [`ApiError::too_many`]).
pub fn too_many(what: &str, wait: Duration) -> Response {
    ApiError::too_many(what, wait).into_response()
}

/// A 503 with `Retry-After`.
pub fn overloaded(what: &str) -> Response {
    let mut r = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("{what}; retry in 1 s")).into_response();
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(1u64));
    r
}

/// Counts something in flight; the count drops when the guard does.
#[derive(Debug)]
pub struct Slot(Arc<AtomicUsize>);

impl Slot {
    /// Takes a slot when fewer than `max` are taken.
    pub fn try_take(count: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
        count.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1)).ok().map(|_| Slot(count.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Middleware: a bound on requests in flight, and a per-address rate for
/// writes (every POST, and the queue, which compiles).
/// `/healthz` is exempt from both: it must answer while the server is at
/// its limits (it costs one database ping), so that an orchestrator does
/// not restart a server that is merely busy.
pub async fn admit(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if req.uri().path() == "/healthz" {
        return next.run(req).await;
    }
    let Some(_slot) = Slot::try_take(&app.in_flight, app.config.limits.max_in_flight) else {
        app.service.metrics.overloaded.fetch_add(1, Ordering::Relaxed);
        return overloaded("the server is at its limit of requests in flight");
    };
    let costly = req.method() == Method::POST || req.uri().path().ends_with("/queue");
    if costly {
        let addr = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip().to_string()).unwrap_or_default();
        if let Err(wait) = app.per_address.take(&addr) {
            app.service.metrics.rate_limited.fetch_add(1, Ordering::Relaxed);
            return too_many("too many requests from this address", wait);
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_refuse_past_the_burst_and_per_key() {
        let b = Buckets::per_minute(60.0); // 1/s, burst 10
        for _ in 0..10 {
            assert!(b.take("a").is_ok());
        }
        let wait = b.take("a").unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(1));
        assert!(b.take("b").is_ok(), "keys are independent");
    }

    #[test]
    fn a_session_may_open_and_report_all_its_queues_at_once() {
        let limits = Limits::default();
        let b = Buckets::with_burst(limits.per_session_per_min, limits.per_session_burst());
        // Every queue a session may hold, opened and reported back to back.
        for i in 0..2 * limits.max_queues_per_session {
            assert!(b.take("s").is_ok(), "request {i} of a normal session refused");
        }
        // The steady rate still holds past the burst.
        let mut refused = false;
        for _ in 0..limits.per_session_burst() as usize {
            refused |= b.take("s").is_err();
        }
        assert!(refused, "a session past its burst must be refused");
    }

    #[test]
    fn slots_are_bounded_and_released() {
        let n = Arc::new(AtomicUsize::new(0));
        let a = Slot::try_take(&n, 2).unwrap();
        let _b = Slot::try_take(&n, 2).unwrap();
        assert!(Slot::try_take(&n, 2).is_none());
        drop(a);
        assert!(Slot::try_take(&n, 2).is_some());
    }
}
