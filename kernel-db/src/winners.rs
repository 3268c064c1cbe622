//! Winner lookups: along a device's fallback chain (device, arch, vendor),
//! and the listing the dashboard shows.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::elect::{Standing, provisional};
use crate::fallback::{self, Fit};
use crate::{Best, Db, DbError, DeviceKeys, KernelKind, Level, Result, Winner};

const BEST_SQL: &str = "SELECT w.level, w.level_key, w.space_checksum, w.kernel_sha256, w.votes, w.total_votes, \
     w.reports, w.best_median_us, w.updated_at, k.meta \
     FROM winners w JOIN kernels k ON k.sha256 = w.kernel_sha256 \
     WHERE w.op = $1 AND w.shape = $2 AND w.target = $3 AND ( \
       (w.level = 'device' AND w.level_key = $4) OR \
       (w.level = 'arch' AND w.level_key = $5) OR \
       (w.level = 'vendor' AND w.level_key = $6))";

/// The running tallies at the three levels of a device, in one space, with
/// each kernel's metadata (for the thread fit).
const TALLIES_SQL: &str = "SELECT t.level, t.level_key, t.kernel_sha256, t.votes, t.sessions, k.meta \
     FROM tallies t JOIN kernels k ON k.sha256 = t.kernel_sha256 \
     WHERE t.op = $1 AND t.shape = $2 AND t.target = $3 AND t.space_checksum = $4 AND t.sessions > 0 AND ( \
       (t.level = 'device' AND t.level_key = $5) OR \
       (t.level = 'arch' AND t.level_key = $6) OR \
       (t.level = 'vendor' AND t.level_key = $7))";

/// Distinct sessions with a ballot at each of the three levels, in one
/// space (a ballot carries its three keys, migration 0009).
const VOTERS_SQL: &str = "SELECT 'device' AS level, COUNT(DISTINCT session_id) AS n FROM ballots \
       WHERE op = $1 AND shape = $2 AND target = $3 AND space_checksum = $4 AND device_key = $5 \
     UNION ALL SELECT 'arch' AS level, COUNT(DISTINCT session_id) AS n FROM ballots \
       WHERE op = $1 AND shape = $2 AND target = $3 AND space_checksum = $4 AND arch_key = $6 \
     UNION ALL SELECT 'vendor' AS level, COUNT(DISTINCT session_id) AS n FROM ballots \
       WHERE op = $1 AND shape = $2 AND target = $3 AND space_checksum = $4 AND vendor_key = $7";

/// Kernels flagged at each of the three levels (flags are per key, whatever the space).
const FLAGGED_SQL: &str = "SELECT DISTINCT 'device' AS level, kernel_sha256 FROM flags \
       WHERE op = $1 AND shape = $2 AND target = $3 AND device_key = $4 \
     UNION SELECT DISTINCT 'arch' AS level, kernel_sha256 FROM flags \
       WHERE op = $1 AND shape = $2 AND target = $3 AND arch_key = $5 \
     UNION SELECT DISTINCT 'vendor' AS level, kernel_sha256 FROM flags \
       WHERE op = $1 AND shape = $2 AND target = $3 AND vendor_key = $6";

/// A provisional winner ([`crate::provisional`]): what a key's first
/// sessions ranked, served before the quorum elects, never stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Provisional {
    pub level: Level,
    pub level_key: String,
    pub kernel_sha256: String,
    /// Summed ranked weights of the sessions that ranked it.
    pub votes: i64,
    /// Sessions that ranked it.
    pub sessions: usize,
    /// Sessions with a ballot at its key (it has a strict majority of them).
    pub voters: usize,
    pub meta_json: String,
}

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

    /// The provisional winner for `kind` on a device with `keys`, in space
    /// `space_checksum`: along the same fallback walk as [`Db::best`], the
    /// most specific level whose tallies give one ([`crate::provisional`]:
    /// no flag at the key, a strict majority of its voting sessions),
    /// among kernels whose threads `max_threads` allows. Read only: the
    /// caller asks it where no elected winner answered.
    pub async fn provisional(
        &self,
        kind: &KernelKind,
        keys: &DeviceKeys,
        space_checksum: &str,
        max_threads: Option<u32>,
    ) -> Result<Option<Provisional>> {
        let fit = Fit { space_checksum: None, max_threads };
        let at_levels = |sql: &'static str| {
            sqlx::query(sql)
                .bind(kind.op.clone())
                .bind(kind.shape.clone())
                .bind(kind.target.clone())
                .bind(space_checksum.to_string())
                .bind(keys.device_key.clone())
                .bind(keys.arch_key.clone())
                .bind(keys.vendor_key.clone())
        };
        let tallies = at_levels(TALLIES_SQL).fetch_all(&self.pool).await?;
        if tallies.is_empty() {
            return Ok(None);
        }
        let voters = at_levels(VOTERS_SQL).fetch_all(&self.pool).await?;
        let flagged = sqlx::query(FLAGGED_SQL)
            .bind(kind.op.clone())
            .bind(kind.shape.clone())
            .bind(kind.target.clone())
            .bind(keys.device_key.clone())
            .bind(keys.arch_key.clone())
            .bind(keys.vendor_key.clone())
            .fetch_all(&self.pool)
            .await?;
        let mut flags = std::collections::HashSet::new();
        for r in &flagged {
            flags.insert((r.try_get::<String, _>("level")?, r.try_get::<String, _>("kernel_sha256")?));
        }
        let mut per_level = Vec::new();
        for (level, key) in fallback::levels(keys) {
            let mut standings = Vec::new();
            let mut metas = std::collections::HashMap::new();
            for r in &tallies {
                if r.try_get::<String, _>("level")? != level.name() || r.try_get::<String, _>("level_key")? != key {
                    continue;
                }
                let (sha, meta): (String, String) = (r.try_get("kernel_sha256")?, r.try_get("meta")?);
                if !fit.fits("", &meta).map_err(|e| DbError::Corrupt(format!("kernel {sha} of a tally for {kind} at {key}: {e}")))? {
                    continue;
                }
                let flagged_by = usize::from(flags.contains(&(level.name().to_string(), sha.clone())));
                let sessions: i64 = r.try_get("sessions")?;
                standings.push(Standing {
                    kernel_sha256: sha.clone(),
                    votes: r.try_get("votes")?,
                    sessions: sessions as usize,
                    flagged_by,
                });
                metas.insert(sha, meta);
            }
            let mut n = 0usize;
            for r in &voters {
                if r.try_get::<String, _>("level")? == level.name() {
                    n = r.try_get::<i64, _>("n")? as usize;
                }
            }
            if let Some(p) = provisional(&standings, n) {
                per_level.push((
                    level,
                    Provisional {
                        level,
                        level_key: key.to_string(),
                        kernel_sha256: p.kernel_sha256.clone(),
                        votes: p.votes,
                        sessions: p.sessions,
                        voters: n,
                        meta_json: metas.remove(&p.kernel_sha256).unwrap_or_default(),
                    },
                ));
            }
        }
        Ok(fallback::best(per_level, |_, _| true).map(|(_, p)| p))
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
