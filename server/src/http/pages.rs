//! The read-only pages: `/dashboard` (HTML with inline SVG charts, module
//! `charts`) and `/metrics` (Prometheus text format).
//!
//! The figures come from the service (`crate::service::dashboard`: bounded
//! work at any database size, one page of every list, `?page=N`); this
//! module draws them.

use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use super::App;
use super::charts::{self, Layer, Line, PALETTE, esc};
use super::error::{ApiError, ApiResult};
use crate::service::dashboard::{BASELINE_TIMES, Dashboard, GROUPS, HOURS, MAX_POINTS, PAGE_ROWS, PAGE_SERIES, SERIES_DAYS};
use webtune_kernel_db::hour_of;

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// `/dashboard?page=N`.
#[derive(Debug, Deserialize)]
pub struct DashboardQuery {
    /// Page of every list, from 1 (default 1).
    pub page: Option<String>,
}

fn parse_page(q: Result<Query<DashboardQuery>, QueryRejection>) -> ApiResult<i64> {
    let bad = |what: &str| ApiError::bad_request(format!("{what}; give page as a whole number from 1, e.g. /dashboard?page=2"));
    let q = q.map_err(|e| bad(&e.body_text()))?.0;
    match q.page.as_deref().map(str::trim) {
        None | Some("") => Ok(1),
        Some(p) => match p.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(i64::from(n)),
            // Not echoed: the value is the client's, and this is an error page.
            _ => Err(bad("page is not a page number")),
        },
    }
}

fn pages(rows: i64, per_page: i64) -> i64 {
    ((rows + per_page - 1) / per_page).max(1)
}

fn nav(h: &mut String, page: i64, last: i64) {
    h.push_str("<nav class=\"pages\">");
    if page > 1 {
        let _ = write!(h, "<a href=\"/dashboard?page={}\">‹ newer</a> · ", (page - 1).min(last));
    }
    let _ = write!(h, "page {page} of {last}");
    if page < last {
        let _ = write!(h, " · <a href=\"/dashboard?page={}\">older ›</a>", page + 1);
    }
    h.push_str("</nav>");
}

fn empty_row(h: &mut String, cols: usize, page: i64, pages: i64) {
    let _ = write!(
        h,
        "<tr><td colspan=\"{cols}\" class=\"empty\">{}</td></tr>",
        if page > pages { format!("No rows on page {page}: this list ends at page {pages}.") } else { "None yet.".to_string() }
    );
}

/// The crowd at a glance: convergence, reports and flags per hour, refused
/// requests, devices by vendor and architecture; then the winners, devices
/// and reports, one page each (also served at `/`).
#[utoipa::path(get, path = "/dashboard",
    params(("page" = Option<u32>, Query, minimum = 1, description = "Page of every list (50 rows, 6 convergence series), from 1")),
    responses((status = 200, description = "HTML", body = String, content_type = "text/html"), (status = 400, response = super::protocol::ErrorBody)))]
pub async fn dashboard(State(app): State<Arc<App>>, q: Result<Query<DashboardQuery>, QueryRejection>) -> ApiResult<Html<String>> {
    let page = parse_page(q)?;
    let Dashboard { now_h, since_h, counts, per_hour, flags, vendors, n_vendors, archs, n_archs, curves, winners, devices, reports } =
        app.service.dashboard(page).await?;
    let series_pages = pages(counts.device_winners, PAGE_SERIES);
    let last = [pages(counts.winners, PAGE_ROWS), pages(counts.devices, PAGE_ROWS), pages(counts.reports, PAGE_ROWS), series_pages]
        .into_iter()
        .max()
        .unwrap_or(1);

    let mut h = String::from(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>webtune dashboard</title>\
         <style>body{font:14px system-ui,sans-serif;margin:1.5em 2em;color:#222;max-width:1100px}\
         table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}\
         code{font-size:12px}h2{margin:1.4em 0 .3em}p.note{color:#555;max-width:760px;margin:.2em 0 .6em}\
         .grid{display:flex;flex-wrap:wrap;gap:0 2em}svg.chart{display:block;margin:.3em 0 .8em;background:#fff}\
         ul.legend{list-style:none;padding:0;margin:0 0 1em;font-size:13px}ul.legend li{margin:2px 0}\
         .sw{display:inline-block;width:18px;height:4px;vertical-align:middle;margin-right:6px}.sw.dashed{background-clip:content-box;border-top:2px dashed}\
         nav.pages{margin:.5em 0}td.empty{color:#777;font-style:italic}.warn{background:#fff3cd;padding:4px 8px}</style></head><body>\
         <h1>webtune kernel database</h1>",
    );
    let _ = write!(
        h,
        "<p>{} reports · {} devices (fingerprints) · {} winners ({} at device keys) · uptime {} s</p>",
        counts.reports,
        counts.devices,
        counts.winners,
        counts.device_winners,
        app.service.started.elapsed().as_secs()
    );
    if page > last {
        let _ = write!(
            h,
            "<p class=\"warn\" id=\"past-end\">Page {page} is past the end of every list: the last page is {last}. <a href=\"/dashboard?page={last}\">Go to page {last}</a>.</p>"
        );
    }
    nav(&mut h, page, last);

    // (a) Convergence.
    let _ = write!(
        h,
        "<h2>Convergence of the crowd</h2><p class=\"note\">Per (op, shape, target, device key) with a winner, most reports first \
         ({} series, page {} of {series_pages}): the speed-up of the fastest kernel reported so far over a baseline, over the last \
         {SERIES_DAYS} days. <b>Fastest so far</b>: the least rank-1 median among the key's reports up to that time whose rank-1 entry \
         passed its output check (the running minimum of hourly minima; at most {MAX_POINTS} points, each the end of a bucket of whole \
         hours). <b>Baseline</b>: the default kernel (the portable schedule <code>/v1/kernels/best</code> answers when no winner exists), \
         its median over up to {BASELINE_TIMES} times reported at that key (solid line); where no client timed it, the fastest time of \
         the series' first bucket (dashed line: the crowd's gain since its first reports). Times are UTC.</p>",
        counts.device_winners, page
    );
    let line_names: Vec<String> = curves
        .iter()
        .map(|c| format!("{} {} {} · {}", c.winner.kind.op, c.winner.kind.shape, c.winner.kind.target, c.winner.level_key))
        .collect();
    let lines: Vec<Line<'_>> = curves
        .iter()
        .zip(&line_names)
        .enumerate()
        .map(|(i, (c, name))| Line { name, colour: PALETTE[i % PALETTE.len()], dashed: !c.default_kernel, points: c.points.clone() })
        .collect();
    h.push_str(&charts::lines("convergence", "Speed-up of the fastest kernel so far over the baseline", &lines, "×", 1.0));
    h.push_str("<ul class=\"legend\" id=\"convergence-legend\">");
    for (i, c) in curves.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let now = match (c.baseline_us, c.winner.best_median_us) {
            (Some(b), t) if t > 0.0 => {
                format!("; winner now <code>{}</code>: {:.2}× ({:.1} µs)", esc(short(&c.winner.kernel_sha256)), b / t, t)
            }
            _ => String::new(),
        };
        let _ = write!(
            h,
            "<li><span class=\"sw{}\" style=\"background:{colour};border-color:{colour}\"></span><b>{}</b> — {} reports; vs {}{}</li>",
            if c.default_kernel { "" } else { " dashed" },
            esc(&line_names[i]),
            c.winner.reports,
            esc(&c.baseline),
            now
        );
    }
    if curves.is_empty() {
        h.push_str("<li class=\"empty\">No device-level winners on this page.</li>");
    }
    h.push_str("</ul>");

    // (b) Reports per hour, (c) flags per hour and refused counters.
    let hours: Vec<i64> = (since_h..=now_h).collect();
    let labels: Vec<String> = hours.iter().map(|&x| charts::hour_label(x)).collect();
    let mut reports_h = vec![0.0; hours.len()];
    for r in &per_hour {
        if let Some(v) = usize::try_from(r.hour - since_h).ok().and_then(|i| reports_h.get_mut(i)) {
            *v = r.count as f64;
        }
    }
    let (mut client_h, mut server_h) = (vec![0.0; hours.len()], vec![0.0; hours.len()]);
    for f in &flags {
        if let Ok(i) = usize::try_from(f.hour - since_h)
            && i < hours.len()
        {
            client_h[i] = f.client as f64;
            server_h[i] = f.server as f64;
        }
    }
    let _ = write!(
        h,
        "<h2>Reports per hour</h2><p class=\"note\">Reports stored in each of the last {HOURS} hours (UTC; the last column is the \
         hour under way): {} in all.</p>",
        reports_h.iter().sum::<f64>()
    );
    h.push_str(&charts::columns(
        "reports-per-hour",
        "Reports per hour, last 48 hours",
        &labels,
        &[Layer { name: "reports", colour: PALETTE[0], values: reports_h }],
        6,
    ));
    let _ = write!(
        h,
        "<h2>Flags per hour</h2><p class=\"note\">Kernels flagged in each of the last {HOURS} hours: by the client's own output check \
         (the report's entry has weight 0), or by the server, which recomputed the entry's output samples and found them wrong \
         (the entry is not stored). {} in all.</p>",
        client_h.iter().chain(&server_h).sum::<f64>()
    );
    h.push_str(&charts::columns(
        "flags-per-hour",
        "Flags per hour, last 48 hours",
        &labels,
        &[
            Layer { name: "client check", colour: PALETTE[1], values: client_h },
            Layer { name: "server check", colour: PALETTE[3], values: server_h },
        ],
        6,
    ));
    let m = &app.service.metrics;
    let refused: Vec<(String, f64)> = [
        ("reports refused (4xx/5xx)", m.reports_rejected.load(Ordering::Relaxed)),
        ("entries with wrong output samples", m.samples_rejected.load(Ordering::Relaxed)),
        ("entries above the time ceiling", m.implausible_rejected.load(Ordering::Relaxed)),
        ("requests rate-limited (429)", m.rate_limited.load(Ordering::Relaxed)),
        ("requests at a concurrency limit (503)", m.overloaded.load(Ordering::Relaxed)),
        ("connections refused at a cap", m.connections_refused.load(Ordering::Relaxed)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v as f64))
    .collect();
    let _ = write!(
        h,
        "<h2>Refused since this process started</h2><p class=\"note\">Counters of this server process (uptime {} s), not stored in \
         the database: they restart at zero with the process and count only this server, not others sharing the database \
         (<a href=\"/metrics\">/metrics</a> has them).</p>",
        app.service.started.elapsed().as_secs()
    );
    h.push_str(&charts::hbars("refused", "Refused since this process started", &refused, PALETTE[3]));

    // (d) Devices by vendor and architecture.
    let _ = write!(
        h,
        "<h2>Devices by vendor and architecture</h2><p class=\"note\">Distinct fingerprints per vendor key ({} in all) and per \
         architecture key ({} in all); the {GROUPS} largest of each.</p><div class=\"grid\">",
        n_vendors, n_archs
    );
    let v: Vec<(String, f64)> = vendors.into_iter().map(|(k, n)| (k, n as f64)).collect();
    let a: Vec<(String, f64)> = archs.into_iter().map(|(k, n)| (k, n as f64)).collect();
    h.push_str(&charts::hbars("devices-by-vendor", "Devices by vendor key", &v, PALETTE[2]));
    h.push_str(&charts::hbars("devices-by-arch", "Devices by architecture key", &a, PALETTE[5]));
    h.push_str("</div>");

    // The tables, one page each.
    let winner_pages = pages(counts.winners, PAGE_ROWS);
    let _ = write!(
        h,
        "<h2>Winners ({}; page {page} of {winner_pages})</h2><table id=\"winners\"><tr><th>op</th><th>shape</th><th>target</th><th>level</th><th>key</th><th>kernel</th><th>votes</th><th>reports</th><th>best median µs</th><th>space</th></tr>",
        counts.winners
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
    if winners.is_empty() {
        empty_row(&mut h, 10, page, winner_pages);
    }
    let device_pages = pages(counts.devices, PAGE_ROWS);
    let _ = write!(
        h,
        "</table><h2>Devices ({}; page {page} of {device_pages})</h2><table id=\"devices\"><tr><th>device key</th><th>arch</th><th>vendor</th><th>ρ</th><th>last seen (UTC)</th><th>fingerprint</th></tr>",
        counts.devices
    );
    for d in &devices {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            esc(&d.keys.device_key),
            esc(&d.keys.arch_key),
            esc(&d.keys.vendor_key),
            esc(&d.keys.rho),
            esc(&charts::hour_label(hour_of(d.last_seen))),
            esc(&d.fingerprint)
        );
    }
    if devices.is_empty() {
        empty_row(&mut h, 6, page, device_pages);
    }
    let report_pages = pages(counts.reports, PAGE_ROWS);
    let _ = write!(
        h,
        "</table><h2>Reports ({}; page {page} of {report_pages}, newest first)</h2><table id=\"reports\"><tr><th>report</th><th>hour (UTC)</th><th>device key</th><th>op</th><th>shape</th><th>target</th><th>entries</th><th>fastest</th><th>median µs</th></tr>",
        counts.reports
    );
    for r in &reports {
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{:.1}</td></tr>",
            esc(short(&r.id)),
            esc(&charts::hour_label(hour_of(r.created_at))),
            esc(&r.device_key),
            esc(&r.kind.op),
            esc(&r.kind.shape),
            esc(&r.kind.target),
            r.entries,
            esc(short(&r.best_kernel)),
            r.best_median_us
        );
    }
    if reports.is_empty() {
        empty_row(&mut h, 9, page, report_pages);
    }
    h.push_str("</table>");
    nav(&mut h, page, last);
    h.push_str("<p><a href=\"/v1/openapi.json\">API</a> · <a href=\"/metrics\">metrics</a></p></body></html>");
    Ok(Html(h))
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Text format 0.0.4", body = String, content_type = "text/plain")))]
pub async fn metrics(State(app): State<Arc<App>>) -> ApiResult<Response> {
    let m = &app.service.metrics;
    let stats = app.service.stats().await?;
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
    let _ = writeln!(
        t,
        "# HELP webtune_best_lookups_by_source_total Best-kernel lookups computed, by where the answer came from.\n# TYPE webtune_best_lookups_by_source_total counter"
    );
    for (i, source) in ["elected", "provisional", "predicted", "portable"].iter().enumerate() {
        let _ = writeln!(t, "webtune_best_lookups_by_source_total{{source=\"{source}\"}} {}", m.best_by_source[i].load(Ordering::Relaxed));
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
    let e = app.service.election_stats();
    for (name, kind, help, value) in [
        ("passes_total", "counter", "Passes of this server's elector that counted reports.", e.passes as f64),
        ("reports_total", "counter", "Reports this server's elector counted.", e.reports as f64),
        ("busy_seconds_total", "counter", "Time inside those passes.", e.busy_us as f64 / 1e6),
        ("lag_max_seconds", "gauge", "The longest time from a report's commit to its count.", e.lag_max_ms as f64 / 1e3),
        ("lag_mean_seconds", "gauge", "The mean time from a report's commit to its count.", e.lag_mean_ms / 1e3),
    ] {
        let _ = writeln!(
            t,
            "# HELP webtune_db_election_{name} {help}\n# TYPE webtune_db_election_{name} {kind}\nwebtune_db_election_{name} {value}"
        );
    }
    let w = app.service.writer_stats();
    for (name, kind, help, value) in [
        ("groups_total", "counter", "Transactions of this server's report writers (group commit).", w.groups as f64),
        ("reports_total", "counter", "Reports those transactions carried.", w.reports as f64),
        ("largest_group", "gauge", "The most reports in one of them.", w.largest as f64),
        ("busy_seconds_total", "counter", "Time inside those transactions.", w.busy_us as f64 / 1e6),
    ] {
        let _ =
            writeln!(t, "# HELP webtune_db_writer_{name} {help}\n# TYPE webtune_db_writer_{name} {kind}\nwebtune_db_writer_{name} {value}");
    }
    let _ = writeln!(
        t,
        "# HELP webtune_uptime_seconds Seconds since start.\n# TYPE webtune_uptime_seconds gauge\nwebtune_uptime_seconds {}",
        app.service.started.elapsed().as_secs()
    );
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"))], t).into_response())
}
