//! Reports, their raw measurements, flags, and the re-election of winners
//! that each report or flag triggers, in the same transaction.
//!
//! Elections read running tallies (migration 0005): each report replaces
//! its session's ballot at each of its three keys and adjusts the per-kernel
//! sums, so an election costs what the key's candidates cost, not what its
//! history does. Medians and per-session times are read only when the rule
//! asks for them ([`elect_step`]).
//!
//! Reports are committed in groups: one writer task per [`Db`] takes every
//! report waiting, stores each under its own savepoint (a report that fails
//! a check is rolled back alone), commits once, and only then answers each
//! caller. Under load, one disk flush then acknowledges many reports.

use std::sync::Arc;

use sqlx::any::{Any, AnyArguments};
use sqlx::pool::Pool;
use sqlx::{Acquire, AnyConnection, Row};

use crate::elect::{Evidence, Standing, Step, elect_step};
use crate::{
    Backend, Db, DbError, DeviceKeys, KernelKind, Level, NewReport, RecordedReport, Result, VotePolicy, Winner, now_ms, random_id,
    ranked_weight,
};

/// Most reports committed in one transaction.
const GROUP_MAX: usize = 64;

type AnyQuery<'q> = sqlx::query::Query<'q, Any, AnyArguments>;

/// The key columns of `ballots` and `tallies`, bound as `$1`..`$6` by [`At::bind`].
macro_rules! at_key {
    () => {
        "op = $1 AND shape = $2 AND target = $3 AND space_checksum = $4 AND level = $5 AND level_key = $6"
    };
}

// Flags are per key, whatever the space: each level filters on its own
// column, and SQL must be static text, so the three are spelled by a macro.
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

/// One key of one candidate space: where a ballot is cast and a winner elected.
struct At<'a> {
    kind: &'a KernelKind,
    space: &'a str,
    level: Level,
    key: &'a str,
}

impl At<'_> {
    fn new<'a>(kind: &'a KernelKind, space: &'a str, level: Level, keys: &'a DeviceKeys) -> At<'a> {
        At { kind, space, level, key: keys.key(level).unwrap_or_default() }
    }

    /// Binds the key as `$1`..`$6` (see [`at_key`]).
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.kind.op.clone())
            .bind(self.kind.shape.clone())
            .bind(self.kind.target.clone())
            .bind(self.space.to_string())
            .bind(self.level.name())
            .bind(self.key.to_string())
    }
}

/// A report waiting for the writer, and where its outcome goes.
pub(crate) struct Job {
    report: NewReport,
    keys: DeviceKeys,
    policy: VotePolicy,
    done: tokio::sync::oneshot::Sender<Result<RecordedReport>>,
}

/// Starts the writer task of a [`Db`]: it commits the reports sent on the
/// returned channel in groups, holding `lock` (the writers' lock) while it
/// does. It ends when the [`Db`] (the channel's sender) is dropped.
pub(crate) fn start_writer(pool: Pool<Any>, backend: Backend, lock: Arc<tokio::sync::Mutex<()>>) -> tokio::sync::mpsc::Sender<Job> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Job>(4 * GROUP_MAX);
    tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut group = vec![first];
            while group.len() < GROUP_MAX {
                match rx.try_recv() {
                    Ok(job) => group.push(job),
                    Err(_) => break,
                }
            }
            let _w = lock.lock().await;
            let outcomes = commit_group(&pool, backend, &group).await;
            for (job, outcome) in group.into_iter().zip(outcomes) {
                // A caller that stopped waiting finds its report stored anyway.
                let _ = job.done.send(outcome);
            }
        }
    });
    tx
}

/// Stores `group` in one transaction, each report under a savepoint; the
/// outcomes in order. A failure of the transaction itself fails them all.
async fn commit_group(pool: &Pool<Any>, backend: Backend, group: &[Job]) -> Vec<Result<RecordedReport>> {
    let failed = |e: &DbError, n: usize| (0..n).map(|_| Err(DbError::Group(e.to_string()))).collect();
    let mut tx = match pool.begin().await {
        Ok(tx) => tx,
        Err(e) => return failed(&e.into(), group.len()),
    };
    if let Err(e) = serialise_writers(&mut tx, backend).await {
        return failed(&e, group.len());
    }
    let mut outcomes = Vec::with_capacity(group.len());
    for job in group {
        let step = async {
            let mut sp = tx.begin().await?;
            match record_one(&mut sp, job).await {
                Ok(r) => {
                    sp.commit().await?;
                    Ok(Ok(r))
                }
                Err(e) => {
                    sp.rollback().await?;
                    Ok(Err(e))
                }
            }
        };
        match step.await {
            Ok(outcome) => outcomes.push(outcome),
            Err(e) => return failed(&e, group.len()),
        }
    }
    if let Err(e) = tx.commit().await {
        return failed(&e.into(), group.len());
    }
    outcomes
}

/// PostgreSQL: one transaction-scoped advisory lock, so that servers
/// sharing the database elect winners one at a time and never from a
/// tally that misses a concurrent report. (SQLite allows one writer.)
async fn serialise_writers(tx: &mut AnyConnection, backend: Backend) -> Result<()> {
    if backend == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_xact_lock(7765) AS locked").fetch_one(&mut *tx).await?;
    }
    Ok(())
}

/// Stores one report, casts its ballots and re-elects its three keys, on
/// `conn` (inside the group's transaction).
async fn record_one(conn: &mut AnyConnection, job: &Job) -> Result<RecordedReport> {
    let (report, keys) = (&job.report, &job.keys);
    let id = random_id()?;
    let now = now_ms();
    for e in &report.entries {
        let known = sqlx::query("SELECT op, shape, target FROM kernels WHERE sha256 = $1")
            .bind(&e.kernel_sha256)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(known) = known else { return Err(DbError::UnknownKernel(e.kernel_sha256.clone())) };
        let kind = KernelKind { op: known.try_get("op")?, shape: known.try_get("shape")?, target: known.try_get("target")? };
        if kind != report.kind {
            return Err(DbError::WrongKind { kernel: e.kernel_sha256.clone(), is: kind, reported: report.kind.clone() });
        }
        if ticket_used(conn, &e.ticket).await? {
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
    .execute(&mut *conn)
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
        .execute(&mut *conn)
        .await?;
    }
    for e in report.entries.iter().filter(|e| !e.output_ok) {
        insert_flag(conn, &e.kernel_sha256, &report.kind, keys, &report.session_id, None, "client-check", now).await?;
    }
    let votes: Vec<(&str, i64, f64)> = report
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.kernel_sha256.as_str(), ranked_weight(i + 1, e.output_ok), e.median_us))
        .filter(|v| v.1 > 0)
        .collect();
    let mut winners = Vec::new();
    for level in Level::STORED {
        let at = At::new(&report.kind, &report.space_checksum, level, keys);
        if !votes.is_empty() {
            cast_ballot(conn, &at, &report.session_id, &id, now, &votes).await?;
        }
        if let Some(w) = elect_at(conn, &at, &job.policy, now).await? {
            winners.push(w);
        }
    }
    Ok(RecordedReport { report_id: id, winners })
}

/// Makes report `id` (made at `now`) the session's ballot at `at`, unless
/// the session already has a later one there: the old ballot's weights and
/// session leave the tallies, the new ones enter.
async fn cast_ballot(conn: &mut AnyConnection, at: &At<'_>, session: &str, id: &str, now: i64, votes: &[(&str, i64, f64)]) -> Result<()> {
    let current = at
        .bind(sqlx::query(concat!("SELECT created_at, report_id FROM ballots WHERE ", at_key!(), " AND session_id = $7 LIMIT 1")))
        .bind(session.to_string())
        .fetch_optional(&mut *conn)
        .await?;
    if let Some(c) = current {
        let (t, r): (i64, String) = (c.try_get("created_at")?, c.try_get("report_id")?);
        if (t, r.as_str()) > (now, id) {
            return Ok(());
        }
        at.bind(sqlx::query(concat!(
            "UPDATE tallies SET sessions = sessions - 1, votes = votes - (SELECT b.weight FROM ballots b WHERE b.op = $1 AND b.shape = $2 \
             AND b.target = $3 AND b.space_checksum = $4 AND b.level = $5 AND b.level_key = $6 AND b.session_id = $7 \
             AND b.kernel_sha256 = tallies.kernel_sha256) WHERE ",
            at_key!(),
            " AND kernel_sha256 IN (SELECT kernel_sha256 FROM ballots WHERE ",
            at_key!(),
            " AND session_id = $7)"
        )))
        .bind(session.to_string())
        .execute(&mut *conn)
        .await?;
        at.bind(sqlx::query(concat!("DELETE FROM ballots WHERE ", at_key!(), " AND session_id = $7")))
            .bind(session.to_string())
            .execute(&mut *conn)
            .await?;
    }
    for &(kernel, weight, median_us) in votes {
        at.bind(sqlx::query(
            "INSERT INTO ballots (op, shape, target, space_checksum, level, level_key, session_id, kernel_sha256, report_id, created_at, \
             weight, median_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        ))
        .bind(session.to_string())
        .bind(kernel.to_string())
        .bind(id.to_string())
        .bind(now)
        .bind(weight)
        .bind(median_us)
        .execute(&mut *conn)
        .await?;
        at.bind(sqlx::query(
            "INSERT INTO tallies (op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, sessions) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1) \
             ON CONFLICT (op, shape, target, space_checksum, level, level_key, kernel_sha256) \
             DO UPDATE SET votes = tallies.votes + excluded.votes, sessions = tallies.sessions + 1",
        ))
        .bind(kernel.to_string())
        .bind(weight)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Re-elects the winner at `at` from its running tallies and stores it;
/// with no eligible kernel, removes a winner of the same space (another
/// space's winner stays until its own space elects otherwise).
async fn elect_at(conn: &mut AnyConnection, at: &At<'_>, policy: &VotePolicy, now: i64) -> Result<Option<Winner>> {
    let standings = standings(conn, at).await?;
    let incumbent: Option<String> = at
        .bind(sqlx::query(
            "SELECT kernel_sha256 FROM winners WHERE op = $1 AND shape = $2 AND target = $3 AND space_checksum = $4 AND level = $5 \
             AND level_key = $6",
        ))
        .fetch_optional(&mut *conn)
        .await?
        .map(|r| r.try_get("kernel_sha256"))
        .transpose()?;
    let mut ev = Evidence::default();
    let won = loop {
        match elect_step(&standings, incumbent.as_deref(), policy, &ev) {
            Step::Done(w) => break w.and_then(|w| standings.iter().find(|s| s.kernel_sha256 == w)),
            Step::Medians(ks) => {
                for k in ks {
                    let n = standings.iter().find(|s| s.kernel_sha256 == k).map_or(0, |s| s.sessions);
                    ev.medians.insert(k.to_string(), median_of(conn, at, k, n).await?);
                }
            }
            Step::Times(ks) => {
                for k in ks {
                    ev.times.insert(k.to_string(), times_of(conn, at, k).await?);
                }
            }
        }
    };
    let Some(win) = won else {
        at.bind(sqlx::query(
            "DELETE FROM winners WHERE op = $1 AND shape = $2 AND target = $3 AND space_checksum = $4 AND level = $5 AND level_key = $6",
        ))
        .execute(&mut *conn)
        .await?;
        return Ok(None);
    };
    let best_median_us = match ev.medians.get(&win.kernel_sha256) {
        Some(m) => *m,
        None => median_of(conn, at, &win.kernel_sha256, win.sessions).await?,
    };
    let w = Winner {
        kind: at.kind.clone(),
        level: at.level,
        level_key: at.key.to_string(),
        space_checksum: at.space.to_string(),
        kernel_sha256: win.kernel_sha256.clone(),
        votes: win.votes,
        total_votes: standings.iter().map(|t| t.votes).sum(),
        reports: standings.iter().map(|t| t.sessions).max().unwrap_or(0) as i64,
        best_median_us,
        updated_at: now,
    };
    at.bind(sqlx::query(
        "INSERT INTO winners (op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, total_votes, reports, \
         best_median_us, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT (op, shape, target, level, level_key) DO UPDATE SET \
         space_checksum = excluded.space_checksum, kernel_sha256 = excluded.kernel_sha256, votes = excluded.votes, \
         total_votes = excluded.total_votes, reports = excluded.reports, best_median_us = excluded.best_median_us, \
         updated_at = excluded.updated_at",
    ))
    .bind(w.kernel_sha256.clone())
    .bind(w.votes)
    .bind(w.total_votes)
    .bind(w.reports)
    .bind(w.best_median_us)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(Some(w))
}

/// Every kernel's standing at `at`: its running tally and the distinct
/// sessions that flagged it on this key.
async fn standings(conn: &mut AnyConnection, at: &At<'_>) -> Result<Vec<Standing>> {
    let rows = at
        .bind(sqlx::query(concat!(
            "SELECT kernel_sha256, votes, sessions FROM tallies WHERE ",
            at_key!(),
            " AND sessions > 0 ORDER BY kernel_sha256"
        )))
        .fetch_all(&mut *conn)
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        out.push(Standing {
            kernel_sha256: r.try_get("kernel_sha256")?,
            votes: r.try_get("votes")?,
            sessions: r.try_get::<i64, _>("sessions")? as usize,
            flagged_by: 0,
        });
    }
    let flags = match at.level {
        Level::Device => flags_sql!("device_key"),
        Level::Arch => flags_sql!("arch_key"),
        _ => flags_sql!("vendor_key"),
    };
    let flag_rows =
        sqlx::query(flags).bind(&at.kind.op).bind(&at.kind.shape).bind(&at.kind.target).bind(at.key).fetch_all(&mut *conn).await?;
    for r in &flag_rows {
        let sha: String = r.try_get("kernel_sha256")?;
        if let Some(s) = out.iter_mut().find(|s| s.kernel_sha256 == sha) {
            s.flagged_by = r.try_get::<i64, _>("n")? as usize;
        }
    }
    Ok(out)
}

/// The median of `kernel`'s `n` per-session times at `at`, read from the
/// ordered index: the middle value, or the mean of the middle two.
async fn median_of(conn: &mut AnyConnection, at: &At<'_>, kernel: &str, n: usize) -> Result<f64> {
    if n == 0 {
        return Ok(f64::NAN);
    }
    let rows = at
        .bind(sqlx::query(concat!(
            "SELECT median_us FROM ballots WHERE ",
            at_key!(),
            " AND kernel_sha256 = $7 ORDER BY median_us LIMIT $8 OFFSET $9"
        )))
        .bind(kernel.to_string())
        .bind(if n % 2 == 1 { 1i64 } else { 2 })
        .bind(((n - 1) / 2) as i64)
        .fetch_all(&mut *conn)
        .await?;
    let v: Vec<f64> = rows.iter().map(|r| r.try_get("median_us")).collect::<std::result::Result<_, _>>()?;
    match v[..] {
        [m] if n % 2 == 1 => Ok(m),
        [a, b] if n % 2 == 0 => Ok(0.5 * (a + b)),
        _ => Err(DbError::Corrupt(format!("tally of {kernel} at {} counts {n} sessions, ballots disagree", at.key))),
    }
}

/// `kernel`'s per-session times at `at`, by session.
async fn times_of(conn: &mut AnyConnection, at: &At<'_>, kernel: &str) -> Result<Vec<(String, f64)>> {
    let rows = at
        .bind(sqlx::query(concat!(
            "SELECT session_id, median_us FROM ballots WHERE ",
            at_key!(),
            " AND kernel_sha256 = $7 ORDER BY session_id"
        )))
        .bind(kernel.to_string())
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(|r| Ok((r.try_get("session_id")?, r.try_get("median_us")?))).collect()
}

impl Db {
    /// Stores a top-N report and its raw measurements, casts the session's
    /// ballots and re-elects the winner at each of the session's three
    /// levels under `policy`, all in one transaction, which may be shared
    /// with other reports waiting at the same time (group commit). Answers
    /// once that transaction committed. Entries whose client-side check
    /// failed also flag their kernel for this device.
    ///
    /// The caller has checked the tickets' signatures and that each kernel
    /// belongs to `report.kind`; this checks that every kernel is stored and
    /// that no ticket was used before.
    pub async fn record_report(&self, report: &NewReport, keys: &DeviceKeys, policy: &VotePolicy) -> Result<RecordedReport> {
        let (done, outcome) = tokio::sync::oneshot::channel();
        let job = Job { report: report.clone(), keys: keys.clone(), policy: *policy, done };
        self.reports.send(job).await.map_err(|_| DbError::Group("the database's writer has stopped".into()))?;
        outcome.await.map_err(|_| DbError::Group("the database's writer has stopped".into()))?
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
        serialise_writers(&mut tx, self.backend).await?;
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
                elect_at(&mut tx, &At::new(kind, &space, level, keys), policy, now).await?;
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
    conn: &mut AnyConnection,
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
    .execute(&mut *conn)
    .await?;
    Ok(())
}
