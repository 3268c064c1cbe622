//! The read-only pages: `/dashboard` (plain HTML) and `/metrics`
//! (Prometheus text format).

use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};

use super::App;
use super::error::ApiResult;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// Devices, winners and recent reports (also served at `/`).
#[utoipa::path(get, path = "/dashboard", responses((status = 200, description = "HTML", body = String, content_type = "text/html")))]
pub async fn dashboard(State(app): State<Arc<App>>) -> ApiResult<Html<String>> {
    let devices = app.db.devices(100).await?;
    let winners = app.db.winners(200).await?;
    let reports = app.db.recent_reports(50).await?;
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=utf-8><title>webtune</title>\
         <style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}\
         td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}code{font-size:12px}</style></head><body>\
         <h1>webtune kernel database</h1>",
    );
    let _ = write!(
        h,
        "<h2>Winners ({})</h2><table><tr><th>op</th><th>shape</th><th>target</th><th>level</th><th>key</th><th>kernel</th><th>votes</th><th>reports</th><th>best median µs</th><th>space</th></tr>",
        winners.len()
    );
    for w in &winners {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><a href=\"/v1/kernels/{}\"><code>{}</code></a></td><td>{}/{}</td><td>{}</td><td>{:.1}</td><td><code>{}</code></td></tr>",
            esc(&w.kind.op),
            esc(&w.kind.shape),
            esc(&w.kind.target),
            w.level,
            esc(&w.level_key),
            esc(&w.kernel_sha256),
            esc(short(&w.kernel_sha256)),
            w.votes,
            w.total_votes,
            w.reports,
            w.best_median_us,
            esc(&w.space_checksum)
        );
    }
    let _ = write!(
        h,
        "</table><h2>Devices ({})</h2><table><tr><th>device key</th><th>arch</th><th>vendor</th><th>ρ</th><th>fingerprint</th></tr>",
        devices.len()
    );
    for d in &devices {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            esc(&d.keys.device_key),
            esc(&d.keys.arch_key),
            esc(&d.keys.vendor_key),
            esc(&d.keys.rho),
            esc(&d.fingerprint)
        );
    }
    let _ = write!(
        h,
        "</table><h2>Recent reports ({})</h2><table><tr><th>report</th><th>device key</th><th>op</th><th>shape</th><th>target</th><th>entries</th><th>fastest</th><th>median µs</th></tr>",
        reports.len()
    );
    for r in &reports {
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{:.1}</td></tr>",
            esc(short(&r.id)),
            esc(&r.device_key),
            esc(&r.kind.op),
            esc(&r.kind.shape),
            esc(&r.kind.target),
            r.entries,
            esc(short(&r.best_kernel)),
            r.best_median_us
        );
    }
    h.push_str("</table><p><a href=\"/v1/openapi.json\">API</a> · <a href=\"/metrics\">metrics</a></p></body></html>");
    Ok(Html(h))
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Text format 0.0.4", body = String, content_type = "text/plain")))]
pub async fn metrics(State(app): State<Arc<App>>) -> ApiResult<Response> {
    let m = &app.metrics;
    let stats = app.db.stats().await?;
    let mut t = String::new();
    let mut counter = |name: &str, help: &str, v: u64| {
        let _ = writeln!(t, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
    };
    counter("webtune_sessions_created_total", "Sessions opened.", m.sessions.load(Ordering::Relaxed));
    counter(
        "webtune_best_cache_hits_total",
        "Best-kernel lookups answered from the in-memory cache.",
        m.best_cache_hits.load(Ordering::Relaxed),
    );
    counter("webtune_reports_accepted_total", "Reports stored.", m.reports_accepted.load(Ordering::Relaxed));
    counter("webtune_reports_rejected_total", "Reports refused with a 4xx or 5xx.", m.reports_rejected.load(Ordering::Relaxed));
    counter("webtune_measurements_accepted_total", "Raw measurements stored.", m.measurements_accepted.load(Ordering::Relaxed));
    counter("webtune_candidates_streamed_total", "Queue candidates sent.", m.candidates_streamed.load(Ordering::Relaxed));
    counter("webtune_kernels_compiled_total", "Kernels compiled by this process.", m.kernels_compiled.load(Ordering::Relaxed));
    counter("webtune_compile_microseconds_total", "Time spent compiling, microseconds.", m.compile_us_total.load(Ordering::Relaxed));
    counter("webtune_kernel_downloads_total", "Kernel byte downloads.", m.kernel_downloads.load(Ordering::Relaxed));
    counter("webtune_kernel_not_modified_total", "Kernel requests answered 304.", m.not_modified.load(Ordering::Relaxed));
    counter("webtune_rate_limited_total", "Requests answered 429 by a rate limit.", m.rate_limited.load(Ordering::Relaxed));
    counter("webtune_overloaded_total", "Requests answered 503 at a concurrency limit.", m.overloaded.load(Ordering::Relaxed));
    counter(
        "webtune_samples_rejected_total",
        "Report entries whose output samples the server found wrong.",
        m.samples_rejected.load(Ordering::Relaxed),
    );
    counter(
        "webtune_unreadable_winners_total",
        "Stored winners left out of a queue because their metadata did not parse (logged).",
        m.unreadable_winners.load(Ordering::Relaxed),
    );
    counter(
        "webtune_implausible_rejected_total",
        "Report entries with a time above the device class's ceiling.",
        m.implausible_rejected.load(Ordering::Relaxed),
    );
    counter(
        "webtune_connections_refused_total",
        "Connections closed on arrival at a per-address or total cap.",
        m.connections_refused.load(Ordering::Relaxed),
    );
    let _ = writeln!(
        t,
        "# HELP webtune_connections_open Connections open now.\n# TYPE webtune_connections_open gauge\nwebtune_connections_open {}",
        app.open.total.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        t,
        "# HELP webtune_queues_active Candidate queues streaming now.\n# TYPE webtune_queues_active gauge\nwebtune_queues_active {}",
        app.queues.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        t,
        "# HELP webtune_requests_in_flight Requests being handled now.\n# TYPE webtune_requests_in_flight gauge\nwebtune_requests_in_flight {}",
        app.in_flight.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        t,
        "# HELP webtune_best_lookups_total Best-kernel lookups computed, by the fallback level that answered.\n# TYPE webtune_best_lookups_total counter"
    );
    for (i, level) in ["device", "arch", "vendor", "default"].iter().enumerate() {
        let _ = writeln!(t, "webtune_best_lookups_total{{level=\"{level}\"}} {}", m.best[i].load(Ordering::Relaxed));
    }
    let _ = writeln!(t, "# HELP webtune_db_rows Rows in each table of the kernel database.\n# TYPE webtune_db_rows gauge");
    for (table, n) in [
        ("devices", stats.devices),
        ("sessions", stats.sessions),
        ("kernels", stats.kernels),
        ("reports", stats.reports),
        ("measurements", stats.measurements),
        ("winners", stats.winners),
    ] {
        let _ = writeln!(t, "webtune_db_rows{{table=\"{table}\"}} {n}");
    }
    let _ = writeln!(
        t,
        "# HELP webtune_uptime_seconds Seconds since start.\n# TYPE webtune_uptime_seconds gauge\nwebtune_uptime_seconds {}",
        app.started.elapsed().as_secs()
    );
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"))], t).into_response())
}
