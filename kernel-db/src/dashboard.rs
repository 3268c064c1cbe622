//! Listings and counts for the dashboard and `/metrics`.

use sqlx::Row;

use crate::sessions::device_row;
use crate::{Db, DeviceRow, KernelKind, ReportRow, Result, Stats};

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
        let rows = sqlx::query(
            "SELECT r.id, r.session_id, r.op, r.shape, r.target, r.device_key, r.created_at, \
             (SELECT COUNT(*) FROM measurements m WHERE m.report_id = r.id) AS entries, \
             m1.kernel_sha256, m1.median_us \
             FROM reports r JOIN measurements m1 ON m1.report_id = r.id AND m1.rank = 1 \
             ORDER BY r.created_at DESC, r.id LIMIT $1",
        )
        .bind(limit)
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
