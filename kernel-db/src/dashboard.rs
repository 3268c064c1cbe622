//! Listings and counts for the dashboard and `/metrics`.
//!
//! Every query here is bounded, so that the dashboard stays fast over a
//! million reports: pages (`LIMIT`/`OFFSET`), time windows over the
//! `created_at` index, and `GROUP BY` of one key's reports through the
//! `(op, shape, target, device_key)` index. Hours are Unix hours
//! (milliseconds / 3,600,000, UTC).

use serde::Serialize;
use sqlx::Row;

use crate::sessions::device_row;
use crate::{Db, DeviceRow, KernelKind, ReportRow, Result, Stats, Winner};

impl Db {
    /// Most recently seen devices.
    pub async fn devices(&self, limit: i64) -> Result<Vec<DeviceRow>> {
        let rows = sqlx::query(
            "SELECT device_key, arch_key, vendor_key, rho, fingerprint, first_seen, last_seen FROM devices \
             ORDER BY last_seen DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(device_row).collect()
    }

    /// Most recent reports with their fastest entry.
    pub async fn recent_reports(&self, limit: i64) -> Result<Vec<ReportRow>> {
        self.report_rows(limit, 0).await
    }

    async fn report_rows(&self, limit: i64, offset: i64) -> Result<Vec<ReportRow>> {
        let rows = sqlx::query(
            // The page of reports first, through the `created_at` index;
            // only then its entries (joined first, SQLite read every
            // rank-1 measurement and sorted them: 2 s at a million reports).
            "SELECT r.id, r.session_id, r.op, r.shape, r.target, r.device_key, r.created_at, \
             (SELECT COUNT(*) FROM measurements m WHERE m.report_id = r.id) AS entries, \
             m1.kernel_sha256, m1.median_us \
             FROM (SELECT id, session_id, op, shape, target, device_key, created_at FROM reports \
                   ORDER BY created_at DESC, id LIMIT $1 OFFSET $2) r \
             JOIN measurements m1 ON m1.report_id = r.id AND m1.rank = 1 \
             ORDER BY r.created_at DESC, r.id",
        )
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push(ReportRow {
                id: r.try_get("id")?,
                session_id: r.try_get("session_id")?,
                kind: KernelKind { op: r.try_get("op")?, shape: r.try_get("shape")?, target: r.try_get("target")? },
                device_key: r.try_get("device_key")?,
                entries: r.try_get("entries")?,
                best_kernel: r.try_get("kernel_sha256")?,
                best_median_us: r.try_get("median_us")?,
                created_at: r.try_get("created_at")?,
            });
        }
        Ok(out)
    }

    /// Row counts of every table.
    pub async fn stats(&self) -> Result<Stats> {
        let r = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM devices) AS devices, (SELECT COUNT(*) FROM sessions) AS sessions, \
             (SELECT COUNT(*) FROM kernels) AS kernels, (SELECT COUNT(*) FROM reports) AS reports, \
             (SELECT COUNT(*) FROM measurements) AS measurements, (SELECT COUNT(*) FROM winners) AS winners",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(Stats {
            devices: r.try_get("devices")?,
            sessions: r.try_get("sessions")?,
            kernels: r.try_get("kernels")?,
            reports: r.try_get("reports")?,
            measurements: r.try_get("measurements")?,
            winners: r.try_get("winners")?,
        })
    }
}

/// The page of the dashboard's paginated lists, and the totals they page through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DashboardCounts {
    /// Distinct fingerprints (`devices` rows).
    pub devices: i64,
    /// Winner rows at every level.
    pub winners: i64,
    /// Winner rows at the device level: the convergence chart's series.
    pub device_winners: i64,
    pub reports: i64,
}

/// How many rows fell in one hour (Unix hours: milliseconds / 3,600,000).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HourCount {
    pub hour: i64,
    pub count: i64,
}

/// Flags raised in one hour, by who found the kernel wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FlagHour {
    pub hour: i64,
    /// The client's own output check failed (`reason = 'client-check'`).
    pub client: i64,
    /// The server recomputed the client's samples and found them wrong.
    pub server: i64,
}

/// One bucket of a convergence series: the fastest time reported in it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SeriesBucket {
    /// Unix hour.
    pub hour: i64,
    /// Fastest rank-1 median (µs) among the bucket's reports whose rank-1
    /// entry passed its output check.
    pub best_us: f64,
    /// Reports counted in the bucket.
    pub reports: i64,
}

/// How devices are grouped for the dashboard's bar charts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceGroup {
    Vendor,
    Arch,
}

const HOUR_MS: i64 = 3_600_000;

impl Db {
    /// Totals of the dashboard's paginated lists. `COUNT(*)` of `reports`
    /// reads its smallest index (tens of milliseconds at a million rows).
    pub async fn dashboard_counts(&self) -> Result<DashboardCounts> {
        let r = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM devices) AS devices, (SELECT COUNT(*) FROM winners) AS winners, \
             (SELECT COUNT(*) FROM winners WHERE level = 'device') AS device_winners, \
             (SELECT COUNT(*) FROM reports) AS reports",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(DashboardCounts {
            devices: r.try_get("devices")?,
            winners: r.try_get("winners")?,
            device_winners: r.try_get("device_winners")?,
            reports: r.try_get("reports")?,
        })
    }

    /// One page of devices, most recently seen first.
    pub async fn devices_page(&self, limit: i64, offset: i64) -> Result<Vec<DeviceRow>> {
        let rows = sqlx::query(
            "SELECT device_key, arch_key, vendor_key, rho, fingerprint, first_seen, last_seen FROM devices \
             ORDER BY last_seen DESC, fingerprint_sha256 LIMIT $1 OFFSET $2",
        )
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(device_row).collect()
    }

    /// One page of winners at every level, most recently changed first.
    pub async fn winners_page(&self, limit: i64, offset: i64) -> Result<Vec<Winner>> {
        self.winner_rows(
            "SELECT op, shape, target, level, level_key, space_checksum, kernel_sha256, votes, total_votes, reports, \
             best_median_us, updated_at FROM winners ORDER BY updated_at DESC, op, shape, target, level, level_key \
             LIMIT $1 OFFSET $2",
            limit,
            offset,
        )
        .await
    }

    /// One page of device-level winners, most reports first: the series of
    /// the convergence chart, one per (op, shape, target, device key).
    pub async fn device_winners_page(&self, limit: i64, offset: i64) -> Result<Vec<Winner>> {
        self.winner_rows(
            "SELECT op, shape, target, level, level_key, space_checksum, kernel_sha256, votes, total_votes, reports, \
             best_median_us, updated_at FROM winners WHERE level = 'device' \
             ORDER BY reports DESC, op, shape, target, level_key LIMIT $1 OFFSET $2",
            limit,
            offset,
        )
        .await
    }

    async fn winner_rows(&self, sql: &'static str, limit: i64, offset: i64) -> Result<Vec<Winner>> {
        let rows = sqlx::query(sql).bind(limit).bind(offset).fetch_all(&self.pool).await?;
        rows.iter().map(crate::winners::winner_row_with_kind).collect()
    }

    /// Reports per hour from `since_ms` on (the `created_at` index alone).
    pub async fn reports_per_hour(&self, since_ms: i64) -> Result<Vec<HourCount>> {
        let rows =
            sqlx::query("SELECT created_at / 3600000 AS hour, COUNT(*) AS n FROM reports WHERE created_at >= $1 GROUP BY 1 ORDER BY 1")
                .bind(since_ms)
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(|r| Ok(HourCount { hour: r.try_get("hour")?, count: r.try_get("n")? })).collect()
    }

    /// Flags per hour from `since_ms` on, split by who found the kernel wrong.
    pub async fn flags_per_hour(&self, since_ms: i64) -> Result<Vec<FlagHour>> {
        let rows = sqlx::query(
            "SELECT created_at / 3600000 AS hour, \
             SUM(CASE WHEN reason = 'client-check' THEN 1 ELSE 0 END) AS client, \
             SUM(CASE WHEN reason = 'client-check' THEN 0 ELSE 1 END) AS server \
             FROM flags WHERE created_at >= $1 GROUP BY 1 ORDER BY 1",
        )
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(FlagHour { hour: r.try_get("hour")?, client: r.try_get("client")?, server: r.try_get("server")? })).collect()
    }

    /// Devices (distinct fingerprints) per vendor or architecture key, most
    /// first, at most `limit` groups, and the number of groups in all.
    pub async fn devices_by(&self, group: DeviceGroup, limit: i64) -> Result<(Vec<(String, i64)>, i64)> {
        let (top, all) = match group {
            DeviceGroup::Vendor => (
                "SELECT vendor_key AS k, COUNT(*) AS n FROM devices GROUP BY vendor_key ORDER BY n DESC, k LIMIT $1",
                "SELECT COUNT(DISTINCT vendor_key) AS n FROM devices",
            ),
            DeviceGroup::Arch => (
                "SELECT arch_key AS k, COUNT(*) AS n FROM devices GROUP BY arch_key ORDER BY n DESC, k LIMIT $1",
                "SELECT COUNT(DISTINCT arch_key) AS n FROM devices",
            ),
        };
        let rows = sqlx::query(top).bind(limit).fetch_all(&self.pool).await?;
        let groups = rows.iter().map(|r| Ok((r.try_get("k")?, r.try_get("n")?))).collect::<Result<Vec<_>>>()?;
        let n: i64 = sqlx::query(all).fetch_one(&self.pool).await?.try_get("n")?;
        Ok((groups, n))
    }

    /// The fastest time reported per hour for one (op, shape, target,
    /// device key) from `since_ms` on: per hour, the least rank-1 median
    /// among the reports whose rank-1 entry passed its output check. Reads
    /// the key's reports through their (op, shape, target, device_key)
    /// index; at most one row per hour of the window comes back.
    pub async fn series_hours(&self, kind: &KernelKind, device_key: &str, since_ms: i64) -> Result<Vec<SeriesBucket>> {
        let rows = sqlx::query(
            "SELECT r.created_at / 3600000 AS hour, MIN(m.median_us) AS best, COUNT(*) AS n \
             FROM reports r JOIN measurements m ON m.report_id = r.id AND m.rank = 1 \
             WHERE r.op = $1 AND r.shape = $2 AND r.target = $3 AND r.device_key = $4 AND r.created_at >= $5 AND m.weight > 0 \
             GROUP BY 1 ORDER BY 1",
        )
        .bind(&kind.op)
        .bind(&kind.shape)
        .bind(&kind.target)
        .bind(device_key)
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(SeriesBucket { hour: r.try_get("hour")?, best_us: r.try_get("best")?, reports: r.try_get("n")? })).collect()
    }

    /// The median of up to `limit` times that passed their output check,
    /// reported for kernel `sha256` of `kind` at `device_key`, and how many
    /// were read; `None` when no client timed it there. The join starts
    /// from the kernel's measurements (`CROSS JOIN` keeps SQLite's order),
    /// so a kernel nobody timed costs one index probe.
    pub async fn kernel_median_at(&self, sha256: &str, kind: &KernelKind, device_key: &str, limit: i64) -> Result<Option<(f64, usize)>> {
        let rows = sqlx::query(
            "SELECT m.median_us FROM measurements m CROSS JOIN reports r \
             WHERE m.kernel_sha256 = $1 AND r.id = m.report_id AND r.op = $2 AND r.shape = $3 AND r.target = $4 \
             AND r.device_key = $5 AND m.weight > 0 LIMIT $6",
        )
        .bind(sha256)
        .bind(&kind.op)
        .bind(&kind.shape)
        .bind(&kind.target)
        .bind(device_key)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut t = rows.iter().map(|r| r.try_get::<f64, _>("median_us")).collect::<Result<Vec<f64>, _>>()?;
        if t.is_empty() {
            return Ok(None);
        }
        t.sort_by(f64::total_cmp);
        let n = t.len();
        let median = if !n.is_multiple_of(2) { t[n / 2] } else { (t[n / 2 - 1] + t[n / 2]) / 2.0 };
        Ok(Some((median, n)))
    }

    /// One page of reports, newest first, with their fastest entry.
    pub async fn reports_page(&self, limit: i64, offset: i64) -> Result<Vec<ReportRow>> {
        self.report_rows(limit, offset).await
    }
}

/// Unix hour of a time in milliseconds.
pub fn hour_of(ms: i64) -> i64 {
    ms.div_euclid(HOUR_MS)
}
