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

use crate::elect::{Evidence, Standing, Step, elect_step, flag_excluded};
use crate::{
    Backend, Db, DbError, DeviceKeys, GroupStats, KernelKind, Level, NewReport, RecordedReport, Result, VotePolicy, Winner, now_ms,
    random_id, ranked_weight,
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

/// What the writer has done since the [`Db`] was opened (see [`GroupStats`]).
#[derive(Debug, Default)]
pub(crate) struct GroupCounters {
    groups: std::sync::atomic::AtomicU64,
    reports: std::sync::atomic::AtomicU64,
    largest: std::sync::atomic::AtomicU64,
    busy_us: std::sync::atomic::AtomicU64,
}

impl GroupCounters {
    fn record(&self, reports: usize, took: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        self.groups.fetch_add(1, Relaxed);
        self.reports.fetch_add(reports as u64, Relaxed);
        self.largest.fetch_max(reports as u64, Relaxed);
        self.busy_us.fetch_add(took.as_micros() as u64, Relaxed);
    }

    pub(crate) fn read(&self) -> GroupStats {
        use std::sync::atomic::Ordering::Relaxed;
        GroupStats {
            groups: self.groups.load(Relaxed),
            reports: self.reports.load(Relaxed),
            largest: self.largest.load(Relaxed),
            busy_us: self.busy_us.load(Relaxed),
        }
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
pub(crate) fn start_writer(
    pool: Pool<Any>,
    backend: Backend,
    lock: Arc<tokio::sync::Mutex<()>>,
    stats: Arc<GroupCounters>,
) -> tokio::sync::mpsc::Sender<Job> {
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
            let t0 = std::time::Instant::now();
            let outcomes = commit_group(&pool, backend, &group).await;
            stats.record(group.len(), t0.elapsed());
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
/// Every transaction that writes winners takes it.
pub(crate) async fn serialise_writers(tx: &mut AnyConnection, backend: Backend) -> Result<()> {
    if backend == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_xact_lock(7765) AS locked").fetch_one(&mut *tx).await?;
    }
    Ok(())
}

/// `$from, $from+1, ...`: `n` numbered placeholders.
fn params(from: usize, n: usize) -> String {
    (from..from + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// Rows of `cols` numbered placeholders each, from `$from`: `($1, $2), ($3, $4)`.
fn rows(from: usize, n: usize, cols: usize) -> String {
    (0..n).map(|r| format!("({})", params(from + r * cols, cols))).collect::<Vec<_>>().join(", ")
}

/// A condition matching `n` keys whose placeholders start at `$from`, each
/// key taking `cols` of them in the order (level, level key[, space]).
/// Besides the exact pairs it lists each column's values with `IN`, which is
/// what lets SQLite seek the primary key once per combination instead of
/// scanning (it does not split an `OR` of conjunctions into seeks).
fn keys_match(from: usize, n: usize, cols: usize) -> String {
    let names = ["level", "level_key", "space_checksum"];
    let mut parts: Vec<String> = (0..cols)
        .map(|c| format!("{} IN ({})", names[c], (0..n).map(|i| format!("${}", from + i * cols + c)).collect::<Vec<_>>().join(", ")))
        .collect();
    let exact = (0..n)
        .map(|i| format!("({})", (0..cols).map(|c| format!("{} = ${}", names[c], from + i * cols + c)).collect::<Vec<_>>().join(" AND ")))
        .collect::<Vec<_>>()
        .join(" OR ");
    parts.push(format!("({exact})"));
    parts.join(" AND ")
}

/// Text made only of fixed SQL and numbered placeholders (values are bound).
fn dynamic(sql: String) -> AnyQuery<'static> {
    sqlx::query(sqlx::AssertSqlSafe(sql))
}

/// Stores one report, casts its ballots and re-elects its three keys, on
/// `conn` (inside the group's transaction). Statements are batched across
/// entries and levels (about a dozen per report): each statement is a
/// round trip to the database, and those dominate the cost of a report.
async fn record_one(conn: &mut AnyConnection, job: &Job) -> Result<RecordedReport> {
    let (report, keys) = (&job.report, &job.keys);
    let id = random_id()?;
    let now = now_ms();
    let n = report.entries.len();
    if n == 0 {
        return Ok(RecordedReport { report_id: id, winners: vec![] });
    }
    let mut q = dynamic(format!("SELECT sha256, op, shape, target FROM kernels WHERE sha256 IN ({})", params(1, n)));
    for e in &report.entries {
        q = q.bind(e.kernel_sha256.clone());
    }
    let mut known = std::collections::HashMap::new();
    for r in q.fetch_all(&mut *conn).await? {
        let kind = KernelKind { op: r.try_get("op")?, shape: r.try_get("shape")?, target: r.try_get("target")? };
        known.insert(r.try_get::<String, _>("sha256")?, kind);
    }
    for e in &report.entries {
        match known.get(&e.kernel_sha256) {
            None => return Err(DbError::UnknownKernel(e.kernel_sha256.clone())),
            Some(kind) if *kind != report.kind => {
                return Err(DbError::WrongKind { kernel: e.kernel_sha256.clone(), is: kind.clone(), reported: report.kind.clone() });
            }
            Some(_) => {}
        }
    }
    let tickets: Vec<&str> = report.entries.iter().map(|e| e.ticket.as_str()).collect();
    if let Some(i) = tickets_used(conn, &tickets).await? {
        return Err(DbError::TicketReused(report.entries[i].kernel_sha256.clone()));
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
    let mut q = dynamic(format!(
        "INSERT INTO measurements (report_id, rank, kernel_sha256, ticket, median_us, runs, output_ok, weight) VALUES {}",
        rows(1, n, 8)
    ));
    for (i, e) in report.entries.iter().enumerate() {
        q = q
            .bind(id.clone())
            .bind((i + 1) as i64)
            .bind(e.kernel_sha256.clone())
            .bind(e.ticket.clone())
            .bind(e.median_us)
            .bind(e.runs)
            .bind(e.output_ok as i64)
            .bind(ranked_weight(i + 1, e.output_ok));
    }
    q.execute(&mut *conn).await?;
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
    let levels = Level::STORED.map(|level| At::new(&report.kind, &report.space_checksum, level, keys));
    if !votes.is_empty() {
        cast_ballots(conn, &levels, &report.session_id, &id, now, &votes).await?;
    }
    let winners = elect_levels(conn, &levels, &job.policy, now).await?;
    Ok(RecordedReport { report_id: id, winners: winners.into_iter().flatten().collect() })
}

/// Makes report `id` (made at `now`) the session's ballot at each of
/// `levels` (one kind, one space), except where the session already has a
/// later one: the old ballot's weights and session leave the tallies, the
/// new ones enter, as one net change per tally row.
async fn cast_ballots(
    conn: &mut AnyConnection,
    levels: &[At<'_>],
    session: &str,
    id: &str,
    now: i64,
    votes: &[(&str, i64, f64)],
) -> Result<()> {
    let at = &levels[0];
    // The session's ballots at these keys, found through the primary key.
    let pick = keys_match(6, levels.len(), 2);
    let mut q = dynamic(format!(
        "SELECT level, level_key, kernel_sha256, weight, created_at, report_id FROM ballots \
         WHERE op = $1 AND shape = $2 AND target = $3 AND space_checksum = $4 AND ({pick}) AND session_id = $5"
    ))
    .bind(at.kind.op.clone())
    .bind(at.kind.shape.clone())
    .bind(at.kind.target.clone())
    .bind(at.space.to_string())
    .bind(session.to_string());
    for l in levels {
        q = q.bind(l.level.name()).bind(l.key.to_string());
    }
    let old = q.fetch_all(&mut *conn).await?;
    // (level, level key, kernel) -> (votes, sessions) to add.
    let mut delta: std::collections::BTreeMap<(&'static str, String, String), (i64, i64)> = std::collections::BTreeMap::new();
    let mut replaced: Vec<&At> = levels.iter().collect();
    for r in &old {
        let level: String = r.try_get("level")?;
        let Some(l) = levels.iter().find(|l| l.level.name() == level) else { continue };
        let (t, rid): (i64, String) = (r.try_get("created_at")?, r.try_get("report_id")?);
        if (t, rid.as_str()) > (now, id) {
            replaced.retain(|x| x.level != l.level);
            continue;
        }
        let d = delta.entry((l.level.name(), r.try_get("level_key")?, r.try_get("kernel_sha256")?)).or_default();
        d.0 -= r.try_get::<i64, _>("weight")?;
        d.1 -= 1;
    }
    // Rows of levels kept (a later ballot exists) were not counted above.
    if replaced.is_empty() {
        return Ok(());
    }
    let pick = keys_match(6, replaced.len(), 2);
    let mut q = dynamic(format!(
        "DELETE FROM ballots WHERE op = $1 AND shape = $2 AND target = $3 AND space_checksum = $4 AND ({pick}) AND session_id = $5"
    ))
    .bind(at.kind.op.clone())
    .bind(at.kind.shape.clone())
    .bind(at.kind.target.clone())
    .bind(at.space.to_string())
    .bind(session.to_string());
    for l in &replaced {
        q = q.bind(l.level.name()).bind(l.key.to_string());
    }
    q.execute(&mut *conn).await?;
    let mut q = dynamic(format!(
        "INSERT INTO ballots (op, shape, target, space_checksum, level, level_key, session_id, kernel_sha256, report_id, created_at, \
         weight, median_us) VALUES {}",
        rows(1, replaced.len() * votes.len(), 12)
    ));
    for l in &replaced {
        for &(kernel, weight, median_us) in votes {
            q = l.bind(q).bind(session.to_string()).bind(kernel.to_string()).bind(id.to_string()).bind(now).bind(weight).bind(median_us);
            let d = delta.entry((l.level.name(), l.key.to_string(), kernel.to_string())).or_default();
            d.0 += weight;
            d.1 += 1;
        }
    }
    q.execute(&mut *conn).await?;
    let delta: Vec<_> = delta.into_iter().filter(|(_, d)| *d != (0, 0)).collect();
    if delta.is_empty() {
        return Ok(());
    }
    let mut q = dynamic(format!(
        "INSERT INTO tallies (op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, sessions) VALUES {} \
         ON CONFLICT (op, shape, target, space_checksum, level, level_key, kernel_sha256) \
         DO UPDATE SET votes = tallies.votes + excluded.votes, sessions = tallies.sessions + excluded.sessions",
        rows(1, delta.len(), 9)
    ));
    for ((level, key, kernel), (votes, sessions)) in delta {
        q = q
            .bind(at.kind.op.clone())
            .bind(at.kind.shape.clone())
            .bind(at.kind.target.clone())
            .bind(at.space.to_string())
            .bind(level)
            .bind(key)
            .bind(kernel)
            .bind(votes)
            .bind(sessions);
    }
    q.execute(&mut *conn).await?;
    Ok(())
}

/// Re-elects the winner at each of `levels` (one kind; any spaces) from
/// the running tallies and stores them; where no kernel is eligible,
/// removes a winner of the same space (another space's winner stays until
/// its own space elects otherwise). The winners, by level.
async fn elect_levels(conn: &mut AnyConnection, levels: &[At<'_>], policy: &VotePolicy, now: i64) -> Result<Vec<Option<Winner>>> {
    let kind = levels[0].kind;
    debug_assert!(levels.iter().all(|l| l.kind == kind));
    // Standings and incumbents of every level in one statement each; a
    // level's row is matched by (level, key, space).
    let pick = keys_match(4, levels.len(), 3);
    let bind_levels = |mut q: AnyQuery<'static>| {
        q = q.bind(kind.op.clone()).bind(kind.shape.clone()).bind(kind.target.clone());
        for l in levels {
            q = q.bind(l.level.name()).bind(l.key.to_string()).bind(l.space.to_string());
        }
        q
    };
    let tally_rows = bind_levels(dynamic(format!(
        "SELECT level, level_key, space_checksum, kernel_sha256, votes, sessions FROM tallies \
         WHERE op = $1 AND shape = $2 AND target = $3 AND sessions > 0 AND ({pick}) ORDER BY kernel_sha256"
    )))
    .fetch_all(&mut *conn)
    .await?;
    let incumbent_rows = bind_levels(dynamic(format!(
        "SELECT level, level_key, space_checksum, kernel_sha256 FROM winners WHERE op = $1 AND shape = $2 AND target = $3 AND ({pick})"
    )))
    .fetch_all(&mut *conn)
    .await?;
    // Flags are per key, whatever the space.
    let flag_sql = levels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let col = match l.level {
                Level::Device => "device_key",
                Level::Arch => "arch_key",
                _ => "vendor_key",
            };
            format!(
                "SELECT {i} AS at, kernel_sha256, COUNT(DISTINCT session_id) AS n FROM flags \
                 WHERE op = $1 AND shape = $2 AND target = $3 AND {col} = ${} GROUP BY kernel_sha256",
                4 + i
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let mut q = dynamic(flag_sql).bind(kind.op.clone()).bind(kind.shape.clone()).bind(kind.target.clone());
    for l in levels {
        q = q.bind(l.key.to_string());
    }
    let flag_rows = q.fetch_all(&mut *conn).await?;

    let matches = |r: &sqlx::any::AnyRow, l: &At| -> Result<bool> {
        Ok(r.try_get::<String, _>("level")? == l.level.name()
            && r.try_get::<String, _>("level_key")? == l.key
            && r.try_get::<String, _>("space_checksum")? == l.space)
    };
    let mut out = Vec::with_capacity(levels.len());
    let mut upserts = Vec::new();
    for (i, at) in levels.iter().enumerate() {
        let mut standings = Vec::new();
        for r in &tally_rows {
            if matches(r, at)? {
                standings.push(Standing {
                    kernel_sha256: r.try_get("kernel_sha256")?,
                    votes: r.try_get("votes")?,
                    sessions: r.try_get::<i64, _>("sessions")? as usize,
                    flagged_by: 0,
                });
            }
        }
        for r in &flag_rows {
            if r.try_get::<i64, _>("at")? as usize == i {
                let sha: String = r.try_get("kernel_sha256")?;
                if let Some(s) = standings.iter_mut().find(|s| s.kernel_sha256 == sha) {
                    s.flagged_by = r.try_get::<i64, _>("n")? as usize;
                }
            }
        }
        let mut incumbent = None;
        for r in &incumbent_rows {
            if matches(r, at)? {
                incumbent = Some(r.try_get::<String, _>("kernel_sha256")?);
            }
        }
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
            // Nothing eligible: the standing winner of this space stays
            // unless flags exclude it (see `flag_excluded`).
            if let Some(inc) = &incumbent {
                let sessions = standings.iter().find(|s| &s.kernel_sha256 == inc).map_or(0, |s| s.sessions);
                let mut flagged_by = 0;
                for r in &flag_rows {
                    if r.try_get::<i64, _>("at")? as usize == i && r.try_get::<String, _>("kernel_sha256")? == *inc {
                        flagged_by = r.try_get::<i64, _>("n")? as usize;
                    }
                }
                if flag_excluded(flagged_by, sessions, policy.quorum) {
                    at.bind(sqlx::query(
                        "DELETE FROM winners WHERE op = $1 AND shape = $2 AND target = $3 AND space_checksum = $4 AND level = $5 \
                         AND level_key = $6",
                    ))
                    .execute(&mut *conn)
                    .await?;
                }
            }
            out.push(None);
            continue;
        };
        let best_median_us = match ev.medians.get(&win.kernel_sha256) {
            Some(m) => *m,
            None => median_of(conn, at, &win.kernel_sha256, win.sessions).await?,
        };
        let w = Winner {
            kind: kind.clone(),
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
        upserts.push(w.clone());
        out.push(Some(w));
    }
    if !upserts.is_empty() {
        let mut q = dynamic(format!(
            "INSERT INTO winners (op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, total_votes, reports, \
             best_median_us, updated_at) VALUES {} \
             ON CONFLICT (op, shape, target, level, level_key) DO UPDATE SET \
             space_checksum = excluded.space_checksum, kernel_sha256 = excluded.kernel_sha256, votes = excluded.votes, \
             total_votes = excluded.total_votes, reports = excluded.reports, best_median_us = excluded.best_median_us, \
             updated_at = excluded.updated_at",
            rows(1, upserts.len(), 12)
        ));
        for w in upserts {
            q = q
                .bind(w.kind.op)
                .bind(w.kind.shape)
                .bind(w.kind.target)
                .bind(w.space_checksum)
                .bind(w.level.name())
                .bind(w.level_key)
                .bind(w.kernel_sha256)
                .bind(w.votes)
                .bind(w.total_votes)
                .bind(w.reports)
                .bind(w.best_median_us)
                .bind(now);
        }
        q.execute(&mut *conn).await?;
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
        .bind(if n.is_multiple_of(2) { 2i64 } else { 1 })
        .bind(((n - 1) / 2) as i64)
        .fetch_all(&mut *conn)
        .await?;
    let v: Vec<f64> = rows.iter().map(|r| r.try_get("median_us")).collect::<std::result::Result<_, _>>()?;
    match v[..] {
        [m] if !n.is_multiple_of(2) => Ok(m),
        [a, b] if n.is_multiple_of(2) => Ok(0.5 * (a + b)),
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

/// The index of the first of `tickets` already quoted by a measurement or
/// a flag, on `conn` (a pooled connection, or a transaction's).
async fn tickets_used(conn: &mut AnyConnection, tickets: &[&str]) -> Result<Option<usize>> {
    if tickets.is_empty() {
        return Ok(None);
    }
    let n = tickets.len();
    let mut q = dynamic(format!(
        "SELECT ticket FROM measurements WHERE ticket IN ({}) UNION ALL SELECT ticket FROM flags WHERE ticket IN ({})",
        params(1, n),
        params(1 + n, n)
    ));
    for _ in 0..2 {
        for t in tickets {
            q = q.bind(t.to_string());
        }
    }
    let used: std::collections::HashSet<String> =
        q.fetch_all(&mut *conn).await?.iter().map(|r| r.try_get("ticket")).collect::<std::result::Result<_, _>>()?;
    Ok(tickets.iter().position(|t| used.contains(*t)))
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
        Ok(self.tickets_used(&[ticket]).await?.is_some())
    }

    /// The index of the first of `tickets` already quoted by a measurement
    /// or a flag, in one statement. Advisory, like [`Db::ticket_used`].
    pub async fn tickets_used(&self, tickets: &[&str]) -> Result<Option<usize>> {
        tickets_used(&mut *self.pool.acquire().await?, tickets).await
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
        if tickets_used(&mut tx, &[ticket]).await?.is_some() {
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
                elect_levels(&mut tx, &[At::new(kind, &space, level, keys)], policy, now).await?;
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
