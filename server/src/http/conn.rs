//! Connections: what a slow, idle or greedy client may cost the service.
//!
//! `axum::serve` sets no timer on hyper, so hyper's header-read timeout never
//! ran, and it takes every connection it is offered. Issue 23 showed what
//! that costs: connections that send half a request line stay open until
//! file descriptors run out, and bodies trickled one byte at a time hold a
//! request slot each until every slot is taken. The service therefore
//! accepts connections itself and hands each to hyper's HTTP/1 server with:
//!
//! - **a header-read timeout** (hyper's `header_read_timeout`, on a tokio
//!   timer): a connection that has not sent a complete request head within
//!   it is closed, and an idle keep-alive connection too, since hyper starts
//!   the timer whenever it waits for a head;
//! - **a request timeout** (tower-http's `TimeoutLayer`, in
//!   [`super::router`]): a request whose body has not arrived and been
//!   answered within it gets 408 and gives back its in-flight slot; the
//!   candidate queue's event stream runs after its handler returned, so it
//!   is not cut;
//! - **a cap on open connections per client address and in all**: the one
//!   part hyper and tower-http have no setting for (tower's concurrency
//!   limits count requests, not sockets), so the accept loop counts them;
//!   a connection past either cap is closed at once, before hyper reads a
//!   byte of it.
//!
//! Only HTTP/1.1 is served: browsers speak HTTP/2 only over TLS, which a
//! proxy in front of the service terminates, and HTTP/1 alone keeps every
//! limit above meaningful (one request at a time per connection).

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tower::Service as _;

use super::App;

/// Connection limits of one server; `webtune serve` flags set them.
#[derive(Clone, Debug)]
pub struct ConnLimits {
    /// Time a connection has to send a complete request head (also the
    /// longest a keep-alive connection may sit idle).
    pub header_timeout: Duration,
    /// Time a request has, body included, until its response starts.
    pub request_timeout: Duration,
    /// Connections open at once from one client address.
    pub per_address: usize,
    /// Connections open at once in all.
    pub total: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            // A browser opens at most 6 connections per origin, and a few
            // event streams besides; an office behind one NAT address is
            // many browsers.
            per_address: 64,
            // Under the usual limit of 1024 file descriptors per process
            // with room for the database and the runtime; raise it with
            // `ulimit -n` and --max-connections together.
            total: 900,
        }
    }
}

/// Largest request head hyper buffers, bytes (its default is 400 KiB; a
/// request of this API has a head of a few hundred bytes).
const MAX_HEAD: usize = 64 * 1024;

/// Open connections, per address and in all.
#[derive(Debug, Default)]
pub struct Open {
    by_address: Mutex<HashMap<IpAddr, usize>>,
    pub total: AtomicUsize,
}

/// One open connection; counted until dropped.
#[derive(Debug)]
struct Held {
    open: Arc<Open>,
    ip: IpAddr,
}

impl Open {
    fn take(open: &Arc<Open>, ip: IpAddr, limits: &ConnLimits) -> Option<Held> {
        let mut map = open.by_address.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(ip).or_insert(0);
        if *n >= limits.per_address || open.total.load(Ordering::Acquire) >= limits.total {
            if *n == 0 {
                map.remove(&ip);
            }
            return None;
        }
        *n += 1;
        open.total.fetch_add(1, Ordering::AcqRel);
        Some(Held { open: open.clone(), ip })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut map = self.open.by_address.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                // An address with nothing open takes no memory.
                map.remove(&self.ip);
            }
        }
        self.open.total.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepts connections on `listener` and serves `router` on each until
/// `shutdown` completes; then stops accepting and gives open connections
/// (event streams included) up to `grace` to finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    app: Arc<App>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> std::io::Result<()> {
    let limits = app.config.connections.clone();
    let mut make = router.into_make_service_with_connect_info::<SocketAddr>();
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout).max_buf_size(MAX_HEAD);
    tokio::pin!(shutdown);
    loop {
        let (stream, addr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors or memory: nothing to do but
                    // wait for connections to close (as axum::serve does).
                    eprintln!("webtune serve: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(held) = Open::take(&app.open, addr.ip(), &limits) else {
            app.service.metrics.connections_refused.fetch_add(1, Ordering::Relaxed);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let Ok(svc) = make.call(addr).await;
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(svc)));
        tokio::spawn(async move {
            // Errors here are the client's (a reset, a timeout, garbage):
            // the connection is closed and nothing else is owed to anyone.
            let _ = conn.await;
            drop(held);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(grace) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_capped_per_address_and_in_all_and_released() {
        let open = Arc::new(Open::default());
        let limits = ConnLimits { per_address: 2, total: 3, ..ConnLimits::default() };
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap());
        let a1 = Open::take(&open, a, &limits).unwrap();
        let _a2 = Open::take(&open, a, &limits).unwrap();
        assert!(Open::take(&open, a, &limits).is_none(), "a third from one address");
        let _b1 = Open::take(&open, b, &limits).unwrap();
        assert!(Open::take(&open, b, &limits).is_none(), "a fourth in all");
        drop(a1);
        assert!(Open::take(&open, b, &limits).is_some());
        assert_eq!(open.total.load(Ordering::Acquire), 2, "the last take was dropped at once");
    }

    #[test]
    fn addresses_with_nothing_open_are_forgotten() {
        let open = Arc::new(Open::default());
        let limits = ConnLimits::default();
        for i in 0..1000u32 {
            drop(Open::take(&open, IpAddr::from(i.to_be_bytes()), &limits));
        }
        assert!(open.by_address.lock().unwrap().is_empty());
        assert_eq!(open.total.load(Ordering::Acquire), 0);
    }
}
