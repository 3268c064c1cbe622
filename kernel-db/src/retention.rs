//! Retention: raw reports and measurements older than a cutoff are folded
//! into per-day sums (`report_days`, `measurement_days`, migration 0006) in
//! the same transaction that deletes them, one UTC day at a time; nothing
//! is dropped without its aggregate. Elections never read raw history (the
//! running tallies hold every session's latest ballot), so winners and
//! tallies are untouched.

use serde::Serialize;
use sqlx::Row;

use crate::reports::begin_write;
use crate::{Db, Result};

const DAY_MS: i64 = 86_400_000;

/// What [`Db::compact`] folded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Compacted {
    pub days: usize,
    pub reports: i64,
    pub measurements: i64,
}

impl Db {
    /// Reports (and their measurements) made before `before_ms`, rounded
    /// down to a UTC day: how many.
    pub async fn reports_before(&self, before_ms: i64) -> Result<i64> {
        let cutoff = before_ms.div_euclid(DAY_MS) * DAY_MS;
        let r = sqlx::query("SELECT COUNT(*) AS n FROM reports WHERE created_at < $1").bind(cutoff).fetch_one(&self.pool).await?;
        Ok(r.try_get("n")?)
    }

    /// Folds every report made before `before_ms` (rounded down to a UTC
    /// day) and its measurements into the per-day sums and deletes them,
    /// one transaction per day, oldest first; `progress(day, reports)` is
    /// called after each day commits. A day that fails leaves that day
    /// whole (sums and rows together) and stops. Reports still uncounted
    /// are counted first ([`Db::flush_elections`]): a report leaves only
    /// once its votes are in the tallies (and `uncounted`'s reference to
    /// it would refuse the delete otherwise).
    pub async fn compact(&self, before_ms: i64, mut progress: impl FnMut(i64, i64)) -> Result<Compacted> {
        self.flush_elections().await?;
        let cutoff = before_ms.div_euclid(DAY_MS);
        let days: Vec<i64> = sqlx::query("SELECT DISTINCT created_at / 86400000 AS day FROM reports WHERE created_at < $1 ORDER BY day")
            .bind(cutoff * DAY_MS)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| r.try_get("day"))
            .collect::<std::result::Result<_, _>>()?;
        let mut done = Compacted::default();
        for day in days {
            let (lo, hi) = (day * DAY_MS, (day + 1) * DAY_MS);
            let _w = self.write.lock().await;
            let mut tx = begin_write(&self.pool, self.backend).await?;
            sqlx::query(
                "INSERT INTO report_days (day, op, shape, target, space_checksum, device_key, arch_key, vendor_key, reports, sessions) \
                 SELECT $1, op, shape, target, space_checksum, device_key, MIN(arch_key), MIN(vendor_key), COUNT(*), COUNT(DISTINCT session_id) \
                 FROM reports WHERE created_at >= $2 AND created_at < $3 \
                 GROUP BY op, shape, target, space_checksum, device_key \
                 ON CONFLICT (day, op, shape, target, space_checksum, device_key) DO UPDATE SET \
                 reports = report_days.reports + excluded.reports, sessions = report_days.sessions + excluded.sessions",
            )
            .bind(day)
            .bind(lo)
            .bind(hi)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO measurement_days (day, op, shape, target, space_checksum, device_key, kernel_sha256, measurements, passed, \
                 first_places, weight, min_median_us, sum_median_us, max_median_us) \
                 SELECT $1, r.op, r.shape, r.target, r.space_checksum, r.device_key, m.kernel_sha256, COUNT(*), SUM(m.output_ok), \
                 SUM(CASE WHEN m.rank = 1 THEN 1 ELSE 0 END), SUM(m.weight), MIN(m.median_us), SUM(m.median_us), MAX(m.median_us) \
                 FROM measurements m JOIN reports r ON m.report_id = r.id WHERE r.created_at >= $2 AND r.created_at < $3 \
                 GROUP BY r.op, r.shape, r.target, r.space_checksum, r.device_key, m.kernel_sha256 \
                 ON CONFLICT (day, op, shape, target, space_checksum, device_key, kernel_sha256) DO UPDATE SET \
                 measurements = measurement_days.measurements + excluded.measurements, \
                 passed = measurement_days.passed + excluded.passed, \
                 first_places = measurement_days.first_places + excluded.first_places, \
                 weight = measurement_days.weight + excluded.weight, \
                 min_median_us = CASE WHEN excluded.min_median_us < measurement_days.min_median_us \
                   THEN excluded.min_median_us ELSE measurement_days.min_median_us END, \
                 sum_median_us = measurement_days.sum_median_us + excluded.sum_median_us, \
                 max_median_us = CASE WHEN excluded.max_median_us > measurement_days.max_median_us \
                   THEN excluded.max_median_us ELSE measurement_days.max_median_us END",
            )
            .bind(day)
            .bind(lo)
            .bind(hi)
            .execute(&mut *tx)
            .await?;
            let m = sqlx::query(
                "DELETE FROM measurements WHERE report_id IN (SELECT id FROM reports WHERE created_at >= $1 AND created_at < $2)",
            )
            .bind(lo)
            .bind(hi)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            let r = sqlx::query("DELETE FROM reports WHERE created_at >= $1 AND created_at < $2")
                .bind(lo)
                .bind(hi)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            done.days += 1;
            done.reports += r as i64;
            done.measurements += m as i64;
            progress(day, r as i64);
        }
        Ok(done)
    }
}
