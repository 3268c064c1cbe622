//! The dashboard's figures: counts, hourly reports and flags, devices by
//! vendor and architecture, one page of winners, devices and reports, and
//! the convergence curves of one page of device-level winners. The edge
//! (`crate::http::pages`) draws them.
//!
//! Bounded work at any database size: every list is one page (fixed
//! sizes), the hourly charts read a 48-hour window, and the convergence
//! chart reads one page of series, each through its key's index, over a
//! 28-day window (`webtune_kernel_db`'s `dashboard` module has the queries).

use webtune_compiler::Schedule;
use webtune_kernel_db::{DashboardCounts, DeviceGroup, DeviceRow, FlagHour, HourCount, ReportRow, Stats, Winner, hour_of};

use super::{Result, Service, parse_kind, parse_shape, unix_now};

/// Rows per page of the winner, device and report tables.
pub const PAGE_ROWS: i64 = 50;
/// Series per page of the convergence chart.
pub const PAGE_SERIES: i64 = 6;
/// Hours of the hourly charts.
pub const HOURS: i64 = 48;
/// Days of reports the convergence chart reads per series.
pub const SERIES_DAYS: i64 = 28;
/// Most points drawn per series.
pub const MAX_POINTS: i64 = 60;
/// Bars of the vendor and architecture charts.
pub const GROUPS: i64 = 12;
/// Times of the default kernel read for its median.
pub const BASELINE_TIMES: i64 = 101;

/// One series of the convergence chart, ready to draw.
#[derive(Debug)]
pub struct Curve {
    pub winner: Winner,
    /// (Unix hour, speed-up) per bucket: baseline over the fastest time
    /// reported up to the end of the bucket.
    pub points: Vec<(f64, f64)>,
    /// What the speed-up is measured against.
    pub baseline: String,
    pub baseline_us: Option<f64>,
    pub default_kernel: bool,
}

/// The default kernel's median at the winner's key, if clients timed it
/// there: the portable schedule `/v1/kernels/best` answers with when no
/// winner exists (compiled once per kind and cached, like that answer).
async fn default_time(svc: &Service, w: &Winner) -> Result<Option<(f64, usize)>> {
    let Ok(shape) = parse_shape(&w.kind.shape) else { return Ok(None) };
    let Ok((op, target)) = parse_kind(&w.kind.op, &shape, &w.kind.target) else { return Ok(None) };
    let Ok(c) = svc.compile_and_store(&op, target, &Schedule::default_for(&op, target)).await else { return Ok(None) };
    Ok(svc.db.kernel_median_at(&c.sha256, &w.kind, &w.level_key, BASELINE_TIMES).await?)
}

async fn curve(svc: &Service, w: Winner, since_ms: i64) -> Result<Curve> {
    let hours = svc.db.series_hours(&w.kind, &w.level_key, since_ms).await?;
    // At most MAX_POINTS buckets of whole hours over the span reported.
    let (first, last) = match (hours.first(), hours.last()) {
        (Some(f), Some(l)) => (f.hour, l.hour),
        _ => (0, 0),
    };
    let width = ((last - first + 1) + MAX_POINTS - 1) / MAX_POINTS;
    let mut buckets: Vec<(i64, f64)> = Vec::new();
    for h in &hours {
        let b = first + (h.hour - first) / width.max(1) * width.max(1);
        match buckets.last_mut() {
            Some((at, best)) if *at == b => *best = best.min(h.best_us),
            _ => buckets.push((b, h.best_us)),
        }
    }
    let (baseline_us, baseline, default_kernel) = match default_time(svc, &w).await? {
        Some((t, n)) => (Some(t), format!("default kernel: median of {n} times reported at this key, {t:.1} µs"), true),
        None => match buckets.first() {
            Some(&(_, t)) => {
                (Some(t), format!("first bucket's fastest time, {t:.1} µs (nobody timed the default kernel at this key)"), false)
            }
            None => (None, format!("no reports in the last {SERIES_DAYS} days"), false),
        },
    };
    let mut points = Vec::with_capacity(buckets.len());
    let mut best = f64::INFINITY;
    if let Some(base) = baseline_us {
        for (b, t) in buckets {
            best = best.min(t);
            if best > 0.0 {
                // The bucket's last hour: what was known when it closed.
                points.push(((b + width.max(1) - 1).min(last) as f64, base / best));
            }
        }
    }
    Ok(Curve { winner: w, points, baseline, baseline_us, default_kernel })
}

/// One dashboard page's figures.
#[derive(Debug)]
pub struct Dashboard {
    pub now_h: i64,
    /// The first hour of the hourly charts.
    pub since_h: i64,
    pub counts: DashboardCounts,
    pub per_hour: Vec<HourCount>,
    pub flags: Vec<FlagHour>,
    pub vendors: Vec<(String, i64)>,
    pub n_vendors: i64,
    pub archs: Vec<(String, i64)>,
    pub n_archs: i64,
    pub curves: Vec<Curve>,
    pub winners: Vec<Winner>,
    pub devices: Vec<DeviceRow>,
    pub reports: Vec<ReportRow>,
}

impl Service {
    /// The figures of dashboard page `page` (from 1).
    pub async fn dashboard(&self, page: i64) -> Result<Dashboard> {
        let offset = (page - 1) * PAGE_ROWS;
        let now_ms = unix_now() as i64 * 1000;
        let now_h = hour_of(now_ms);
        let since_h = now_h - HOURS + 1;
        let counts = self.db.dashboard_counts().await?;
        let per_hour = self.db.reports_per_hour(since_h * 3_600_000).await?;
        let flags = self.db.flags_per_hour(since_h * 3_600_000).await?;
        let (vendors, n_vendors) = self.db.devices_by(DeviceGroup::Vendor, GROUPS).await?;
        let (archs, n_archs) = self.db.devices_by(DeviceGroup::Arch, GROUPS).await?;
        // A list is read only where the page has rows of it: OFFSET walks the
        // rows it skips.
        let mut curves = Vec::new();
        if (page - 1) * PAGE_SERIES < counts.device_winners {
            for w in self.db.device_winners_page(PAGE_SERIES, (page - 1) * PAGE_SERIES).await? {
                curves.push(curve(self, w, now_ms - SERIES_DAYS * 24 * 3_600_000).await?);
            }
        }
        let winners = if offset < counts.winners { self.db.winners_page(PAGE_ROWS, offset).await? } else { Vec::new() };
        let devices = if offset < counts.devices { self.db.devices_page(PAGE_ROWS, offset).await? } else { Vec::new() };
        let reports = if offset < counts.reports { self.db.reports_page(PAGE_ROWS, offset).await? } else { Vec::new() };
        Ok(Dashboard { now_h, since_h, counts, per_hour, flags, vendors, n_vendors, archs, n_archs, curves, winners, devices, reports })
    }

    /// The database's row counts, for `/metrics`.
    pub async fn stats(&self) -> Result<Stats> {
        Ok(self.db.stats().await?)
    }
}
