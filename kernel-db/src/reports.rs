//! Reports, their raw measurements, flags, and the re-election of winners
//! that each report or flag triggers, in the same transaction.

use sqlx::AnyConnection;
use sqlx::Row;
use sqlx::any::Any;

use crate::elect::elect;
use crate::{
    Backend, Db, DbError, DeviceKeys, KernelKind, Level, NewReport, RecordedReport, Result, Tally, VotePolicy, Winner, now_ms, random_id,
    ranked_weight,
};

// Each level filters on its own column; the SQL must be static text, so the
// three variants are spelled out by one macro.
macro_rules! votes_sql {
    ($col:literal) => {
        concat!(
            "SELECT r.session_id AS session_id, r.id AS report_id, r.created_at AS created_at, ",
            "m.kernel_sha256 AS kernel_sha256, m.weight AS weight, m.median_us AS median_us ",
            "FROM measurements m JOIN reports r ON m.report_id = r.id ",
            "WHERE r.op = $1 AND r.shape = $2 AND r.target = $3 AND r.space_checksum = $4 AND r.",
            $col,
            " = $5 AND m.weight > 0"
        )
    };
}

macro_rules! flags_sql {
    ($col:literal) => {
        concat!(
            "SELECT kernel_sha256, COUNT(DISTINCT session_id) AS n FROM flags ",
            "WHERE op = $1 AND shape = $2 AND target = $3 AND ",
            $col,
            " = $4 GROUP BY kernel_sha256"
        )
    };
}

impl Db {
    /// Stores a top-N report and its raw measurements, then re-elects the
    /// winner at each of the session's three levels under `policy`, all in
    /// one transaction. Entries whose client-side check failed also flag
    /// their kernel for this device.
    ///
    /// The caller has checked the tickets' signatures and that each kernel
    /// belongs to `report.kind`; this checks that every kernel is stored and
    /// that no ticket was used before.
    pub async fn record_report(&self, report: &NewReport, keys: &DeviceKeys, policy: &VotePolicy) -> Result<RecordedReport> {
        let id = random_id()?;
        let now = now_ms();
        let _w = self.write.lock().await;
        let mut tx = self.pool.begin().await?;
        self.serialise_writers(&mut tx).await?;
        for e in &report.entries {
            let known = sqlx::query("SELECT op, shape, target FROM kernels WHERE sha256 = $1")
                .bind(&e.kernel_sha256)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(known) = known else { return Err(DbError::UnknownKernel(e.kernel_sha256.clone())) };
            let kind = KernelKind { op: known.try_get("op")?, shape: known.try_get("shape")?, target: known.try_get("target")? };
            if kind != report.kind {
                return Err(DbError::WrongKind { kernel: e.kernel_sha256.clone(), is: kind, reported: report.kind.clone() });
            }
            if ticket_used(&mut tx, &e.ticket).await? {
                return Err(DbError::TicketReused(e.kernel_sha256.clone()));
            }
        }
        sqlx::query(
            "INSERT INTO reports (id, session_id, op, shape, target, space_checksum, device_key, arch_key, vendor_key, rho, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&id)
        .bind(&report.session_id)
        .bind(&report.kind.op)
        .bind(&report.kind.shape)
        .bind(&report.kind.target)
        .bind(&report.space_checksum)
        .bind(&keys.device_key)
        .bind(&keys.arch_key)
        .bind(&keys.vendor_key)
        .bind(&keys.rho)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        for (i, e) in report.entries.iter().enumerate() {
            let rank = i + 1;
            sqlx::query(
                "INSERT INTO measurements (report_id, rank, kernel_sha256, ticket, median_us, runs, output_ok, weight) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&id)
            .bind(rank as i64)
            .bind(&e.kernel_sha256)
            .bind(&e.ticket)
            .bind(e.median_us)
            .bind(e.runs)
            .bind(e.output_ok as i64)
            .bind(ranked_weight(rank, e.output_ok))
            .execute(&mut *tx)
            .await?;
        }
        for e in report.entries.iter().filter(|e| !e.output_ok) {
            insert_flag(&mut tx, &e.kernel_sha256, &report.kind, keys, &report.session_id, None, "client-check", now).await?;
        }
        let mut winners = Vec::new();
        for level in Level::STORED {
            if let Some(w) = self.elect(&mut tx, &report.kind, &report.space_checksum, level, keys, policy, now).await? {
                winners.push(w);
            }
        }
        tx.commit().await?;
        Ok(RecordedReport { report_id: id, winners })
    }

    /// PostgreSQL: one transaction-scoped advisory lock, so that servers
    /// sharing the database elect winners one at a time and never from a
    /// tally that misses a concurrent report. (SQLite allows one writer.)
    async fn serialise_writers(&self, tx: &mut sqlx::Transaction<'_, Any>) -> Result<()> {
        if self.backend == Backend::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock(7765) AS locked").fetch_one(&mut **tx).await?;
        }
        Ok(())
    }

    /// Re-elects the winner of `kind` at one level of `keys` from every
    /// session's latest report in space `space`, and stores it (or removes a
    /// winner that is no longer eligible).
    #[allow(clippy::too_many_arguments)]
    async fn elect(
        &self,
        tx: &mut sqlx::Transaction<'_, Any>,
        kind: &KernelKind,
        space: &str,
        level: Level,
        keys: &DeviceKeys,
        policy: &VotePolicy,
        now: i64,
    ) -> Result<Option<Winner>> {
        let key = keys.key(level).unwrap_or_default();
        let tallies = self.tally_in(tx, kind, space, level, key).await?;
        let incumbent: Option<String> = sqlx::query(
            "SELECT kernel_sha256 FROM winners WHERE op = $1 AND shape = $2 AND target = $3 AND level = $4 AND level_key = $5 AND space_checksum = $6",
        )
        .bind(&kind.op)
        .bind(&kind.shape)
        .bind(&kind.target)
        .bind(level.name())
        .bind(key)
        .bind(space)
        .fetch_optional(&mut **tx)
        .await?
        .map(|r| r.try_get("kernel_sha256"))
        .transpose()?;
        let Some(win) = elect(&tallies, incumbent.as_deref(), policy) else {
            sqlx::query("DELETE FROM winners WHERE op = $1 AND shape = $2 AND target = $3 AND level = $4 AND level_key = $5")
                .bind(&kind.op)
                .bind(&kind.shape)
                .bind(&kind.target)
                .bind(level.name())
                .bind(key)
                .execute(&mut **tx)
                .await?;
            return Ok(None);
        };
        let w = Winner {
            kind: kind.clone(),
            level,
            level_key: key.to_string(),
            space_checksum: space.to_string(),
            kernel_sha256: win.kernel_sha256.clone(),
            votes: win.votes,
            total_votes: tallies.iter().map(|t| t.votes).sum(),
            reports: tallies.iter().map(|t| t.sessions()).max().unwrap_or(0) as i64,
            best_median_us: win.median_us(),
            updated_at: now,
        };
        sqlx::query(
            "INSERT INTO winners (op, shape, target, level, level_key, space_checksum, kernel_sha256, votes, total_votes, reports, best_median_us, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (op, shape, target, level, level_key) DO UPDATE SET \
             space_checksum = excluded.space_checksum, kernel_sha256 = excluded.kernel_sha256, votes = excluded.votes, \
             total_votes = excluded.total_votes, reports = excluded.reports, best_median_us = excluded.best_median_us, \
             updated_at = excluded.updated_at",
        )
        .bind(&w.kind.op)
        .bind(&w.kind.shape)
        .bind(&w.kind.target)
        .bind(level.name())
        .bind(&w.level_key)
        .bind(&w.space_checksum)
        .bind(&w.kernel_sha256)
        .bind(w.votes)
        .bind(w.total_votes)
        .bind(w.reports)
        .bind(w.best_median_us)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        Ok(Some(w))
    }

    /// Every kernel's tally at one key, from each session's latest report.
    async fn tally_in(
        &self,
        tx: &mut sqlx::Transaction<'_, Any>,
        kind: &KernelKind,
        space: &str,
        level: Level,
        key: &str,
    ) -> Result<Vec<Tally>> {
        let (votes, flags) = match level {
            Level::Device => (votes_sql!("device_key"), flags_sql!("device_key")),
            Level::Arch => (votes_sql!("arch_key"), flags_sql!("arch_key")),
            _ => (votes_sql!("vendor_key"), flags_sql!("vendor_key")),
        };
        let rows =
            sqlx::query(votes).bind(&kind.op).bind(&kind.shape).bind(&kind.target).bind(space).bind(key).fetch_all(&mut **tx).await?;
        // (session, report, created_at, kernel, weight, median)
        let mut votes: Vec<(String, String, i64, String, i64, f64)> = Vec::with_capacity(rows.len());
        for r in &rows {
            votes.push((
                r.try_get("session_id")?,
                r.try_get("report_id")?,
                r.try_get("created_at")?,
                r.try_get("kernel_sha256")?,
                r.try_get("weight")?,
                r.try_get("median_us")?,
            ));
        }
        // A session's weight is capped at one report: its latest.
        let mut latest: std::collections::HashMap<&str, (i64, &str)> = std::collections::HashMap::new();
        for v in &votes {
            let e = latest.entry(&v.0).or_insert((v.2, &v.1));
            if (v.2, v.1.as_str()) > (e.0, e.1) {
                *e = (v.2, &v.1);
            }
        }
        let mut by_kernel: std::collections::BTreeMap<&str, Tally> = std::collections::BTreeMap::new();
        for v in votes.iter().filter(|v| latest.get(v.0.as_str()).is_some_and(|l| l.1 == v.1)) {
            let t =
                by_kernel.entry(&v.3).or_insert_with(|| Tally { kernel_sha256: v.3.clone(), votes: 0, times: Vec::new(), flagged_by: 0 });
            t.votes += v.4;
            t.times.push((v.0.clone(), v.5));
        }
        let flag_rows = sqlx::query(flags).bind(&kind.op).bind(&kind.shape).bind(&kind.target).bind(key).fetch_all(&mut **tx).await?;
        for r in &flag_rows {
            let sha: String = r.try_get("kernel_sha256")?;
            if let Some(t) = by_kernel.get_mut(sha.as_str()) {
                t.flagged_by = r.try_get::<i64, _>("n")? as usize;
            }
        }
        let mut out: Vec<Tally> = by_kernel.into_values().collect();
        for t in &mut out {
            t.times.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Ok(out)
    }

    /// Whether `ticket` was already quoted by a measurement or a flag.
    /// Advisory (the answer may change before the caller acts on it):
    /// [`Db::record_report`] and [`Db::flag`] check again in their
    /// transactions. The server asks first so that a used ticket is refused
    /// before any of its entry's other checks.
    pub async fn ticket_used(&self, ticket: &str) -> Result<bool> {
        ticket_used(&mut *self.pool.acquire().await?, ticket).await
    }

    /// Flags `kernel` as wrong on the device of `keys` (the server's own
    /// recomputation disagreed with a client's samples), then re-elects the
    /// winners of every space at the three keys, so a kernel flagged by a
    /// quorum of sessions stops winning at once. The flag consumes `ticket`,
    /// the one the samples were sent under: a ticket already used by a
    /// measurement or a flag is refused with [`DbError::TicketReused`], so
    /// one ticket flags at most once and never after it voted.
    #[allow(clippy::too_many_arguments)]
    pub async fn flag(
        &self,
        kernel: &str,
        kind: &KernelKind,
        keys: &DeviceKeys,
        session_id: &str,
        ticket: &str,
        reason: &str,
        policy: &VotePolicy,
    ) -> Result<()> {
        let now = now_ms();
        let _w = self.write.lock().await;
        let mut tx = self.pool.begin().await?;
        self.serialise_writers(&mut tx).await?;
        if ticket_used(&mut tx, ticket).await? {
            return Err(DbError::TicketReused(kernel.to_string()));
        }
        insert_flag(&mut tx, kernel, kind, keys, session_id, Some(ticket), reason, now).await?;
        for level in Level::STORED {
            let key = keys.key(level).unwrap_or_default();
            let space: Option<String> = sqlx::query(
                "SELECT space_checksum FROM winners WHERE op = $1 AND shape = $2 AND target = $3 AND level = $4 AND level_key = $5",
            )
            .bind(&kind.op)
            .bind(&kind.shape)
            .bind(&kind.target)
            .bind(level.name())
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| r.try_get("space_checksum"))
            .transpose()?;
            if let Some(space) = space {
                self.elect(&mut tx, kind, &space, level, keys, policy, now).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Distinct sessions that flagged `kernel` for `kind` on `device_key`.
    pub async fn flags_for(&self, kernel: &str, kind: &KernelKind, device_key: &str) -> Result<i64> {
        let r = sqlx::query(
            "SELECT COUNT(DISTINCT session_id) AS n FROM flags WHERE kernel_sha256 = $1 AND op = $2 AND shape = $3 AND target = $4 AND device_key = $5",
        )
        .bind(kernel)
        .bind(&kind.op)
        .bind(&kind.shape)
        .bind(&kind.target)
        .bind(device_key)
        .fetch_one(&self.pool)
        .await?;
        Ok(r.try_get("n")?)
    }
}

/// Whether a measurement or a flag already quoted `ticket`, on `conn` (a
/// pooled connection, or a transaction's).
async fn ticket_used(conn: &mut AnyConnection, ticket: &str) -> Result<bool> {
    for sql in ["SELECT 1 AS one FROM measurements WHERE ticket = $1", "SELECT 1 AS one FROM flags WHERE ticket = $1"] {
        if sqlx::query(sql).bind(ticket).fetch_optional(&mut *conn).await?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

#[allow(clippy::too_many_arguments)]
async fn insert_flag(
    tx: &mut sqlx::Transaction<'_, Any>,
    kernel: &str,
    kind: &KernelKind,
    keys: &DeviceKeys,
    session_id: &str,
    ticket: Option<&str>,
    reason: &str,
    now: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO flags (kernel_sha256, op, shape, target, device_key, arch_key, vendor_key, session_id, reason, created_at, ticket) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(kernel)
    .bind(&kind.op)
    .bind(&kind.shape)
    .bind(&kind.target)
    .bind(&keys.device_key)
    .bind(&keys.arch_key)
    .bind(&keys.vendor_key)
    .bind(session_id)
    .bind(reason)
    .bind(now)
    .bind(ticket)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
