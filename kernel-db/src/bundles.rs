//! Static bundles (docs/static-bundles.md): the winners a bundle exports,
//! and a bundle's winners written into a database.
//!
//! The bundle format itself (files, checksums) is the server's business;
//! this module only reads winners with their kernels' metadata and stores
//! imported winners and kernels, all of a bundle in one transaction.

use sqlx::Row;

use crate::{Best, Db, DbError, KernelKind, Level, NewKernel, Result, Winner, now_ms};

/// What [`Db::import_winners`] did with one winner of a bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Imported {
    /// The key had no winner: the bundle's is stored.
    Added,
    /// The key's winner was older (`updated_at`) than the bundle's: replaced.
    Replaced,
    /// The key already holds this very row (same kernel, space and
    /// `updated_at`): nothing to do. A second import of a bundle is all this.
    Unchanged,
    /// The key's winner is as new as the bundle's or newer: kept.
    KeptNewer,
}

impl Db {
    /// Every stored winner of `kind` (every kind when `None`), with its
    /// kernel's metadata JSON, in a stable order: op, shape, target, level,
    /// key. Whatever their space checksum: the caller decides what is stale.
    pub async fn winners_with_meta(&self, kind: Option<&KernelKind>) -> Result<Vec<Best>> {
        macro_rules! select {
            ($where:literal) => {
                concat!(
                    "SELECT w.op, w.shape, w.target, w.level, w.level_key, w.space_checksum, w.kernel_sha256, w.votes, ",
                    "w.total_votes, w.reports, w.best_median_us, w.updated_at, k.meta ",
                    "FROM winners w JOIN kernels k ON k.sha256 = w.kernel_sha256",
                    $where,
                    " ORDER BY w.op, w.shape, w.target, w.level, w.level_key"
                )
            };
        }
        let rows = match kind {
            Some(k) => {
                sqlx::query(select!(" WHERE w.op = $1 AND w.shape = $2 AND w.target = $3"))
                    .bind(&k.op)
                    .bind(&k.shape)
                    .bind(&k.target)
                    .fetch_all(&self.pool)
                    .await?
            }
            None => sqlx::query(select!("")).fetch_all(&self.pool).await?,
        };
        rows.iter().map(|r| Ok(Best { winner: crate::winners::winner_row_with_kind(r)?, meta_json: r.try_get("meta")? })).collect()
    }

    /// Stores a bundle's `kernels` (content-addressed: one already here is
    /// left alone) and its `winners`, in one transaction, under the rule
    /// that an import never puts an older election over a newer one: a
    /// winner is written where its key has none, or where the stored one's
    /// `updated_at` is earlier than the bundle's (the bundle's `updated_at`
    /// is kept, so importing the same bundle again changes nothing). Every
    /// winner's kernel must be in `kernels` or already stored. The outcomes
    /// are in the order of `winners`.
    pub async fn import_winners(&self, kernels: &[NewKernel], winners: &[Winner]) -> Result<Vec<Imported>> {
        let _w = self.write.lock().await;
        // Servers sharing this database never elect at a key while an
        // import writes it.
        let mut tx = crate::reports::begin_write(&self.pool, self.backend).await?;
        let now = now_ms();
        for k in kernels {
            crate::kernels::insert_kernel(&mut tx, k, now).await?;
        }
        let mut out = Vec::with_capacity(winners.len());
        for w in winners {
            if w.level == Level::Default {
                return Err(DbError::Corrupt(format!("a winner of {} at level default (never stored)", w.kind)));
            }
            let stored = sqlx::query("SELECT op, shape, target FROM kernels WHERE sha256 = $1")
                .bind(&w.kernel_sha256)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(stored) = stored else { return Err(DbError::UnknownKernel(w.kernel_sha256.clone())) };
            let is = KernelKind { op: stored.try_get("op")?, shape: stored.try_get("shape")?, target: stored.try_get("target")? };
            if is != w.kind {
                return Err(DbError::WrongKind { kernel: w.kernel_sha256.clone(), is, reported: w.kind.clone() });
            }
            let current = sqlx::query(
                "SELECT kernel_sha256, space_checksum, updated_at FROM winners \
                 WHERE op = $1 AND shape = $2 AND target = $3 AND level = $4 AND level_key = $5",
            )
            .bind(&w.kind.op)
            .bind(&w.kind.shape)
            .bind(&w.kind.target)
            .bind(w.level.name())
            .bind(&w.level_key)
            .fetch_optional(&mut *tx)
            .await?;
            let outcome = match current {
                None => Imported::Added,
                Some(r) => {
                    let (sha, space, at): (String, String, i64) =
                        (r.try_get("kernel_sha256")?, r.try_get("space_checksum")?, r.try_get("updated_at")?);
                    if sha == w.kernel_sha256 && space == w.space_checksum && at == w.updated_at {
                        Imported::Unchanged
                    } else if at < w.updated_at {
                        Imported::Replaced
                    } else {
                        Imported::KeptNewer
                    }
                }
            };
            if matches!(outcome, Imported::Added | Imported::Replaced) {
                sqlx::query(
                    "INSERT INTO winners (op, shape, target, level, level_key, space_checksum, kernel_sha256, votes, total_votes, \
                     reports, best_median_us, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                     ON CONFLICT (op, shape, target, level, level_key) DO UPDATE SET \
                     space_checksum = excluded.space_checksum, kernel_sha256 = excluded.kernel_sha256, votes = excluded.votes, \
                     total_votes = excluded.total_votes, reports = excluded.reports, best_median_us = excluded.best_median_us, \
                     updated_at = excluded.updated_at",
                )
                .bind(&w.kind.op)
                .bind(&w.kind.shape)
                .bind(&w.kind.target)
                .bind(w.level.name())
                .bind(&w.level_key)
                .bind(&w.space_checksum)
                .bind(&w.kernel_sha256)
                .bind(w.votes)
                .bind(w.total_votes)
                .bind(w.reports)
                .bind(w.best_median_us)
                .bind(w.updated_at)
                .execute(&mut *tx)
                .await?;
            }
            out.push(outcome);
        }
        tx.commit().await?;
        Ok(out)
    }
}
