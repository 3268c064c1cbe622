//! Winner lookups: along a device's fallback chain (device, arch, vendor),
//! and the listing the dashboard shows.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::fallback::{self, Fit};
use crate::{Best, Db, DbError, DeviceKeys, KernelKind, Level, Result, Winner};

const BEST_SQL: &str = "SELECT w.level, w.level_key, w.space_checksum, w.kernel_sha256, w.votes, w.total_votes, \
     w.reports, w.best_median_us, w.updated_at, k.meta \
     FROM winners w JOIN kernels k ON k.sha256 = w.kernel_sha256 \
     WHERE w.op = $1 AND w.shape = $2 AND w.target = $3 AND ( \
       (w.level = 'device' AND w.level_key = $4) OR \
       (w.level = 'arch' AND w.level_key = $5) OR \
       (w.level = 'vendor' AND w.level_key = $6))";

impl Db {
    /// The most specific winner for `kind` on a device with `keys` that
    /// fits the asker ([`Fit`]: its space checksum, when given, and its
    /// thread limit, when given): the exact device key, then its
    /// architecture, then its vendor ([`fallback::best`]). A winner of
    /// another space is stale and skipped, as is one whose kernel needs more
    /// threads than the asker runs. `None` means the caller should answer
    /// with the portable default.
    pub async fn best<'a>(&self, kind: &KernelKind, keys: &DeviceKeys, fit: impl Into<Fit<'a>>) -> Result<Option<Best>> {
        let fit = fit.into();
        let mut unreadable = None;
        let found = fallback::best(self.winners_for(kind, keys).await?.into_iter().map(|b| (b.winner.level, b)), |_, b| {
            fit.fits(&b.winner.space_checksum, &b.meta_json).unwrap_or_else(|e| {
                unreadable
                    .get_or_insert_with(|| format!("kernel {} of winner {kind} at {}: {e}", b.winner.kernel_sha256, b.winner.level_key));
                false
            })
        });
        // A winner's metadata this code cannot read stops the walk where it
        // stands, as an error: answering past it would hide a broken row.
        match (found, unreadable) {
            (Some((_, b)), None) => Ok(Some(b)),
            (_, Some(why)) => Err(DbError::Corrupt(why)),
            (None, None) => Ok(None),
        }
    }

    /// Every stored winner for `kind` at the levels of `keys`, most specific
    /// first, whatever their space checksum (the queue offers them to similar
    /// devices as NNJIT's exploitation set).
    pub async fn winners_for(&self, kind: &KernelKind, keys: &DeviceKeys) -> Result<Vec<Best>> {
        let rows = sqlx::query(BEST_SQL)
            .bind(&kind.op)
            .bind(&kind.shape)
            .bind(&kind.target)
            .bind(&keys.device_key)
            .bind(&keys.arch_key)
            .bind(&keys.vendor_key)
            .fetch_all(&self.pool)
            .await?;
        let mut found = rows
            .iter()
            .map(|r| Ok(Best { winner: winner_row(r, kind.clone())?, meta_json: r.try_get("meta")? }))
            .collect::<Result<Vec<Best>>>()?;
        found.sort_by_key(|b| b.winner.level);
        Ok(found)
    }

    /// Winners, most recently changed first.
    pub async fn winners(&self, limit: i64) -> Result<Vec<Winner>> {
        let rows = sqlx::query(
            "SELECT op, shape, target, level, level_key, space_checksum, kernel_sha256, votes, total_votes, reports, \
             best_median_us, updated_at FROM winners ORDER BY updated_at DESC, op, shape, target, level, level_key LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(winner_row_with_kind).collect()
    }
}

/// A `winners` row that carries its own `op`, `shape` and `target`.
pub(crate) fn winner_row_with_kind(r: &AnyRow) -> Result<Winner> {
    winner_row(r, KernelKind { op: r.try_get("op")?, shape: r.try_get("shape")?, target: r.try_get("target")? })
}

/// A `winners` row of `kind`. A level the code does not know means the row
/// was not written by this code: an error, never a silent skip.
pub(crate) fn winner_row(r: &AnyRow, kind: KernelKind) -> Result<Winner> {
    let level: String = r.try_get("level")?;
    let level = Level::parse(&level).ok_or_else(|| DbError::Corrupt(format!("winners row of {kind} has level `{level}`")))?;
    Ok(Winner {
        kind,
        level,
        level_key: r.try_get("level_key")?,
        space_checksum: r.try_get("space_checksum")?,
        kernel_sha256: r.try_get("kernel_sha256")?,
        votes: r.try_get("votes")?,
        total_votes: r.try_get("total_votes")?,
        reports: r.try_get("reports")?,
        best_median_us: r.try_get("best_median_us")?,
        updated_at: r.try_get("updated_at")?,
    })
}
