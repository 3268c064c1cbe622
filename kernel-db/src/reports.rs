//! Reports, their raw measurements and flags; the re-election a flag
//! triggers, in its own transaction; and the election rule's statements
//! over the running tallies, which the elector's passes run.
//!
//! Elections read running tallies (migration 0005): each counted report
//! replaces its session's ballot at each of its three keys and adjusts the
//! per-kernel sums, so an election costs what the key's candidates cost,
//! not what its history does. Medians and per-session times are read only
//! when the rule asks for them ([`elect_step`]). Counting and elections
//! are the elector's (`elector`), off the report's path: a report's
//! transaction only adds rows of its own (the report, its measurements and
//! flags, and its row of `uncounted`) and locks no key.
//!
//! Reports are committed in groups: a writer task of the [`Db`] takes every
//! report waiting, checks them all, writes those that pass with one
//! statement per step for the whole group (a report that fails a check
//! fails alone), commits once, and only then answers each caller. Under
//! load, one disk flush then acknowledges many reports.
//!
//! On PostgreSQL a group commits without waiting for its flush
//! (`synchronous_commit = off` for that transaction only), so the writers
//! queue on nothing but their own statements, not on fsync. Its reports
//! are answered by the [`Db`]'s flusher, which
//! proves them durable first: one statement, in its own synchronous
//! transaction, that writes a WAL record and reads which of the waiting
//! reports it sees. The reports it sees committed before it, so their
//! commit records precede its own in the log, and its commit returns only
//! once the log is on disk up to its own record. A report it does not see
//! was lost by a crash of the database since its commit (the log's tail
//! was never written) and is answered with an error; so is every report
//! of a flush that failed. An unacknowledged report may be lost; an
//! acknowledged one never is. Until the flush, other transactions may see
//! a group's rows (the elector may count them before they are durable);
//! a crash in that window takes them back with the report, and the
//! count with them.

use std::sync::Arc;

use sqlx::any::{Any, AnyArguments};
use sqlx::pool::Pool;
use sqlx::{AnyConnection, Row};

use crate::elect::{Ballot, Evidence, Standing, Step, TIME_WINDOW, elect_step, flag_excluded};
use crate::{
    Backend, Db, DbError, DeviceKeys, GroupStats, KernelKind, Level, NewReport, RecordedReport, Result, VotePolicy, Winner, now_ms,
    random_id, ranked_weight,
};

/// Most reports committed in one transaction on SQLite: its one writer
/// commits (and syncs) a group at a time, so more clients wait in larger
/// groups; its statements' variables stay under SQLite's limit of 32,766
/// (the measurements' insert binds 40 a report).
const GROUP_MAX: usize = 256;

/// Most reports committed in one transaction on PostgreSQL: under load the
/// hot keys' elections, which cost the same for one report as for many,
/// are shared by larger groups (the ballots' insert binds 180 values a
/// report, under PostgreSQL's limit of 65,535 a statement).
const PG_GROUP_MAX: usize = 256;

/// A statement with its arguments bound, on either engine.
pub(crate) type AnyQuery<'q> = sqlx::query::Query<'q, Any, AnyArguments>;

/// A kernel's ballots at a key of one level, whose column `$col` holds
/// that level's key (migration 0009): the key bound as `$1`..`$5` by
/// [`At::bind_ballots`], the kernel as `$6`.
macro_rules! at_level {
    ($col:literal) => {
        concat!("op = $1 AND shape = $2 AND target = $3 AND space_checksum = $4 AND ", $col, " = $5 AND kernel_sha256 = $6")
    };
}

/// One key of one candidate space: where a ballot is cast and a winner elected.
pub(crate) struct At<'a> {
    pub(crate) kind: &'a KernelKind,
    pub(crate) space: &'a str,
    pub(crate) level: Level,
    pub(crate) key: &'a str,
}

impl At<'_> {
    pub(crate) fn same(&self, other: &At) -> bool {
        (self.kind, self.space, self.level, self.key) == (other.kind, other.space, other.level, other.key)
    }

    pub(crate) fn new<'a>(kind: &'a KernelKind, space: &'a str, level: Level, keys: &'a DeviceKeys) -> At<'a> {
        At { kind, space, level, key: keys.key(level).unwrap_or_default() }
    }

    /// Binds the key as `$1`..`$6`: op, shape, target, space, level, key
    /// (the key columns of `winners` and `tallies`).
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.kind.op.clone())
            .bind(self.kind.shape.clone())
            .bind(self.kind.target.clone())
            .bind(self.space.to_string())
            .bind(self.level.name())
            .bind(self.key.to_string())
    }

    /// Binds the key as `$1`..`$5`: op, shape, target, space, and the key
    /// in its level's column of `ballots` (see [`at_level`]).
    fn bind_ballots<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.kind.op.clone())
            .bind(self.kind.shape.clone())
            .bind(self.kind.target.clone())
            .bind(self.space.to_string())
            .bind(self.key.to_string())
    }

    /// Which of the per-level statements (device, arch, vendor) serves it.
    fn level_index(&self) -> usize {
        match self.level {
            Level::Device => 0,
            Level::Arch => 1,
            _ => 2,
        }
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
    /// The report's id, made by the caller (who may wait for its count).
    id: String,
    report: NewReport,
    keys: DeviceKeys,
    /// Whether the caller waits for the count (then the winners standing
    /// at commit are not read for it).
    counted: bool,
    done: tokio::sync::oneshot::Sender<Result<RecordedReport>>,
}

/// Writer tasks per [`Db`] on PostgreSQL, unless `WEBTUNE_PG_WRITERS` says
/// otherwise (1 to 64): a group's transaction writes only rows of its own
/// reports and takes no key lock, so groups commit side by side, each on
/// its own connection of the pool. 8 did 1.33x the reports of 4 with one
/// server on 16 cores, and the same with three (BENCHMARKS.md, issue 39,
/// 2026-12-02). SQLite has one writer (the file has one write lock).
const PG_WRITERS: usize = 8;

/// [`PG_WRITERS`], or the environment's `WEBTUNE_PG_WRITERS` where it is a
/// number from 1 to 64 (anything else is refused with a warning).
pub(crate) fn pg_writers() -> usize {
    static WRITERS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *WRITERS.get_or_init(|| match std::env::var("WEBTUNE_PG_WRITERS") {
        Err(_) => PG_WRITERS,
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n @ 1..=64) => n,
            _ => {
                eprintln!("webtune: WEBTUNE_PG_WRITERS={v:?} is not a number from 1 to 64; using {PG_WRITERS} writers");
                PG_WRITERS
            }
        },
    })
}

/// Times a group is tried again after its transaction failed on a
/// conflict with another writer (a ticket quoted in two groups at once,
/// or a deadlock PostgreSQL broke), before its reports are failed.
const RETRIES: usize = 3;

/// PostgreSQL: the writers ask for the tables a report writes to be
/// analysed ([`analyse_if_grown`]) once this [`Db`] has committed this
/// many reports, and again each time the count doubles. A fresh database has no statistics until autovacuum's first
/// pass (a minute or more), and without them PostgreSQL took four equal
/// key columns as very selective and read a whole key's ballots where the
/// primary key seeks a few sessions' (plans pinned by `tests/plans.rs`).
pub(crate) const ANALYZE_FIRST: u64 = 256;

/// When the writers of one [`Db`] analyse next (see [`ANALYZE_FIRST`]).
struct Analyse {
    committed: std::sync::atomic::AtomicU64,
    next: std::sync::atomic::AtomicU64,
    running: std::sync::atomic::AtomicBool,
}

impl Analyse {
    /// Counts `n` committed reports and, at a threshold, starts `ANALYZE`
    /// on a pooled connection beside the writers (it takes no lock that a
    /// writer waits for).
    fn committed(self: &Arc<Self>, n: usize, pool: &Pool<Any>) {
        use std::sync::atomic::Ordering::SeqCst;
        let total = self.committed.fetch_add(n as u64, SeqCst) + n as u64;
        let next = self.next.load(SeqCst);
        if total < next || self.next.compare_exchange(next, next.saturating_mul(2), SeqCst, SeqCst).is_err() {
            return;
        }
        if self.running.swap(true, SeqCst) {
            return;
        }
        let (me, pool) = (self.clone(), pool.clone());
        tokio::spawn(async move {
            // Statistics are an optimisation: a failure changes no data.
            let _ = analyse_if_grown(&pool).await;
            me.running.store(false, SeqCst);
        });
    }
}

/// PostgreSQL: `ANALYZE`s the tables a report writes unless another server
/// analyses them now, or did since they last doubled. Each [`Db`] asks at
/// its own thresholds ([`ANALYZE_FIRST`], doubling), but the answer is the
/// database's: the rows written since the last analysis (anyone's, from
/// `pg_stat_user_tables`) against the rows there were then. Three servers
/// that each analysed at their own thresholds spent 0.8 ms of PostgreSQL's
/// time a report on `ANALYZE`, the most of any statement (16 cores,
/// 2026-12-02). The counters lag by up to a second; where they still read
/// zero the tables are analysed, as when nothing ever was.
async fn analyse_if_grown(pool: &Pool<Any>) -> Result<bool> {
    let mut tx = pool.begin().await?;
    let got: bool = sqlx::query("SELECT pg_try_advisory_xact_lock(7768) AS got").fetch_one(&mut *tx).await?.try_get("got")?;
    if !got {
        return Ok(false);
    }
    let row = sqlx::query(
        "SELECT COALESCE(SUM(n_mod_since_analyze), 0)::bigint AS changed, COALESCE(SUM(n_live_tup), 0)::bigint AS live \
         FROM pg_stat_user_tables WHERE relname IN ('ballots', 'measurements')",
    )
    .fetch_one(&mut *tx)
    .await?;
    let (changed, live): (i64, i64) = (row.try_get("changed")?, row.try_get("live")?);
    if !grown_since_analysed(changed, live) {
        return Ok(false);
    }
    sqlx::query("ANALYZE ballots, tallies, measurements, reports, flags, uncounted").execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(true)
}

/// Whether tables holding `live` rows, `changed` of them written since
/// their last analysis, have at least doubled since (true where nothing
/// was ever analysed, or the counters have not caught up: both zero).
fn grown_since_analysed(changed: i64, live: i64) -> bool {
    changed >= live.saturating_sub(changed)
}

/// Starts the writer tasks of a [`Db`]: they commit the reports sent on
/// the returned channel in groups. On SQLite one task does, holding `lock`
/// (this process's writers' lock) while it does, and answers each report
/// once its group committed; on PostgreSQL [`pg_writers`] tasks do, side
/// by side (a group writes only its own reports' rows and locks no key;
/// the elector counts them), and commit without waiting for the flush:
/// the flusher ([`flusher`]) answers their reports once it has proved them
/// durable. They end when the [`Db`] (the channel's sender)
/// is dropped.
pub(crate) fn start_writer(
    pool: Pool<Any>,
    backend: Backend,
    lock: Arc<tokio::sync::Mutex<crate::connect::WriteConn>>,
    stats: Arc<GroupCounters>,
    hold: Arc<tokio::sync::RwLock<()>>,
    elector: Arc<crate::elector::Elector>,
) -> tokio::sync::mpsc::Sender<Job> {
    let pg = backend == Backend::Postgres;
    let group_max = if pg { PG_GROUP_MAX } else { GROUP_MAX };
    let (tx, rx) = tokio::sync::mpsc::channel::<Job>(4 * group_max);
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let writers = if pg { pg_writers() } else { 1 };
    let analyse = Arc::new(Analyse { committed: Default::default(), next: ANALYZE_FIRST.into(), running: Default::default() });
    // PostgreSQL: committed groups on their way to the flusher.
    let (flush_tx, flush_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<(Job, RecordedReport)>>();
    if pg {
        tokio::spawn(flusher(pool.clone(), flush_rx, hold));
    }
    for _ in 0..writers {
        let (pool, lock, stats, rx, analyse, flush_tx, elector) =
            (pool.clone(), lock.clone(), stats.clone(), rx.clone(), analyse.clone(), flush_tx.clone(), elector.clone());
        tokio::spawn(async move {
            loop {
                // One writer at a time takes what is waiting; the others
                // wait for the next reports.
                let group = {
                    let mut rx = rx.lock().await;
                    let Some(first) = rx.recv().await else { break };
                    let mut group = vec![first];
                    while group.len() < group_max {
                        match rx.try_recv() {
                            Ok(job) => group.push(job),
                            Err(_) => break,
                        }
                    }
                    group
                };
                let mut _w = if pg { None } else { Some(lock.lock().await) };
                let t0 = std::time::Instant::now();
                let mut committed = Vec::new();
                let outcomes = commit_group(&pool, backend, _w.as_deref_mut(), &group, &mut committed).await;
                stats.record(group.len(), t0.elapsed());
                if !pg && !committed.is_empty() {
                    // Before the lock goes: no pass can claim them sooner.
                    elector.committed(committed);
                }
                drop(_w);
                if outcomes.iter().any(|o| o.is_ok()) {
                    // Their counts may start before they are durable: a
                    // crash that loses them loses the count with them.
                    elector.kick();
                }
                if pg {
                    analyse.committed(outcomes.iter().filter(|o| o.is_ok()).count(), &pool);
                }
                let mut committed = Vec::new();
                for (job, outcome) in group.into_iter().zip(outcomes) {
                    match outcome {
                        // Committed, not yet known to be on disk.
                        Ok(recorded) if pg => committed.push((job, recorded)),
                        // A caller that stopped waiting finds its report stored anyway.
                        outcome => {
                            let _ = job.done.send(outcome);
                        }
                    }
                }
                if !committed.is_empty() {
                    // The flusher ends only when every writer has (it holds
                    // the channel's receiver until all senders are gone).
                    let _ = flush_tx.send(committed);
                }
            }
        });
    }
    tx
}

/// The flush that proves committed reports durable (see the module's
/// header): one synchronous transaction that writes a WAL record (a
/// transactional logical message, which any role may emit and no reader
/// sees) and lists which of `ids` it sees. Returns those ids.
async fn confirm_durable(pool: &Pool<Any>, ids: &[&str]) -> Result<std::collections::HashSet<String>> {
    let mut conn = pool.acquire().await?;
    let mut q = Sql::new(
        &conn,
        "SELECT pg_logical_emit_message(true, 'webtune', 'durable')::text AS lsn, \
         (SELECT string_agg(id, ' ') FROM reports WHERE id IN (",
    );
    q.list(ids.iter().map(|id| id.to_string())).push(")) AS seen");
    let row = q.query()?.fetch_one(&mut *conn).await?;
    let seen: Option<String> = row.try_get("seen")?;
    Ok(seen.unwrap_or_default().split(' ').filter(|s| !s.is_empty()).map(str::to_string).collect())
}

/// PostgreSQL: answers committed reports once [`confirm_durable`] proved
/// them on disk, every report waiting at once with one flush (while one
/// flush runs, the writers go on and the next flush takes what they
/// committed meanwhile). `hold` is taken (read) around each flush, so a
/// test can hold acknowledgements back ([`Db::hold_acknowledgements`]).
async fn flusher(
    pool: Pool<Any>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Vec<(Job, RecordedReport)>>,
    hold: Arc<tokio::sync::RwLock<()>>,
) {
    while let Some(mut batch) = rx.recv().await {
        let _held = hold.read().await;
        while let Ok(more) = rx.try_recv() {
            batch.extend(more);
        }
        let ids: Vec<&str> = batch.iter().map(|(_, r)| r.report_id.as_str()).collect();
        let mut tries = 0;
        let outcome = loop {
            match confirm_durable(&pool, &ids).await {
                // A flush that failed on a conflict (none is expected: it
                // locks nothing) is tried again; it proves only what it sees.
                Err(e) if tries < RETRIES && is_conflict(&e) => tries += 1,
                outcome => break outcome,
            }
        };
        for (job, recorded) in batch {
            let answer = match &outcome {
                Ok(seen) if seen.contains(&recorded.report_id) => Ok(recorded),
                Ok(_) => Err(DbError::Group(format!(
                    "report {} was committed but is gone: the database lost the end of its log (a crash) before writing it",
                    recorded.report_id
                ))),
                Err(e) => Err(DbError::Group(format!("the database committed the report but could not confirm it durable: {e}"))),
            };
            let _ = job.done.send(answer);
        }
    }
}

/// Stores `group` in one transaction and answers each report; a failure
/// of the transaction itself fails them all (after [`RETRIES`] more tries
/// where it failed on a conflict with another writer). Every report is
/// checked first (known kernels of its kind, unused tickets), and only the
/// ones that pass are written, so one bad report fails alone. Then each
/// step is one statement for the whole group, since each statement is a
/// round trip to the database and those, not the work, dominated a
/// report's cost. Each key the group touched is elected once, after all of
/// its ballots: the winner the group leaves is the election over every
/// session's latest report with the incumbent from before the group.
///
/// On SQLite `write` is the writers' connection (see
/// [`crate::connect::WriteConn`]), made synchronous before the group's
/// transaction begins; on PostgreSQL `None`, and the group takes a pooled
/// connection.
async fn commit_group(
    pool: &Pool<Any>,
    backend: Backend,
    mut write: Option<&mut crate::connect::WriteConn>,
    group: &[Job],
    committed: &mut Vec<crate::elector::Uncounted>,
) -> Vec<Result<RecordedReport>> {
    let failed = |e: &DbError| (0..group.len()).map(|_| Err(DbError::Group(e.to_string()))).collect();
    // Only SQLite's elector takes what the writer stored (PostgreSQL's passes read it back).
    let keep = write.is_some();
    let mut tries = 0;
    loop {
        let outcome = async {
            let mut tx = match write.as_deref_mut() {
                Some(w) => w.begin().await?,
                None => begin_report(pool, backend, Durability::Flusher).await?,
            };
            committed.clear();
            let outcomes = store_group(&mut tx, group, if keep { Some(&mut *committed) } else { None }).await?;
            tx.commit().await?;
            Ok::<_, DbError>(outcomes)
        }
        .await;
        match outcome {
            Ok(outcomes) => return outcomes,
            Err(e) if tries < RETRIES && is_conflict(&e) => tries += 1,
            Err(e) => {
                committed.clear();
                if let Some(w) = write.as_deref_mut() {
                    w.failed(&e);
                }
                return failed(&e);
            }
        }
    }
}

/// Whether `e` is PostgreSQL refusing a transaction for what a concurrent
/// one did (unique violation, deadlock, serialisation failure): trying
/// again, after the other committed, gives a real answer.
pub(crate) fn is_conflict(e: &DbError) -> bool {
    match e {
        DbError::Sqlx(sqlx::Error::Database(d)) => matches!(d.code().as_deref(), Some("23505" | "40P01" | "40001")),
        _ => false,
    }
}

/// One accepted report of a group and what it writes.
struct Accepted<'a> {
    job: &'a Job,
    /// Its position in the group.
    index: usize,
}

/// With `committed`, fills it with the accepted reports as the elector
/// counts them (see `Elector::committed`), for the caller to hand over once
/// the transaction committed.
async fn store_group(
    conn: &mut AnyConnection,
    group: &[Job],
    committed: Option<&mut Vec<crate::elector::Uncounted>>,
) -> Result<Vec<Result<RecordedReport>>> {
    let now = now_ms();
    let mut shas: Vec<&str> = group.iter().flat_map(|j| j.report.entries.iter().map(|e| e.kernel_sha256.as_str())).collect();
    shas.sort_unstable();
    shas.dedup();
    let known = kernels_of(conn, &shas).await?;
    let tickets: Vec<&str> = group.iter().flat_map(|j| j.report.entries.iter().map(|e| e.ticket.as_str())).collect();
    let mut used = tickets_in_use(conn, &tickets).await?;
    let mut outcomes: Vec<Option<Result<RecordedReport>>> = group.iter().map(|_| None).collect();
    let mut accepted = Vec::new();
    for (index, job) in group.iter().enumerate() {
        let report = &job.report;
        let check = || -> Result<()> {
            for e in &report.entries {
                match known.get(&e.kernel_sha256) {
                    None => return Err(DbError::UnknownKernel(e.kernel_sha256.clone())),
                    Some(kind) if *kind != report.kind => {
                        return Err(DbError::WrongKind {
                            kernel: e.kernel_sha256.clone(),
                            is: kind.clone(),
                            reported: report.kind.clone(),
                        });
                    }
                    Some(_) => {}
                }
            }
            for (i, e) in report.entries.iter().enumerate() {
                if used.contains(e.ticket.as_str()) || report.entries[..i].iter().any(|p| p.ticket == e.ticket) {
                    return Err(DbError::TicketReused(e.kernel_sha256.clone()));
                }
            }
            Ok(())
        };
        if let Err(e) = check() {
            outcomes[index] = Some(Err(e));
            continue;
        }
        used.extend(report.entries.iter().map(|e| e.ticket.clone()));
        accepted.push(Accepted { job, index });
    }
    if accepted.is_empty() {
        return Ok(outcomes.into_iter().map(|o| o.expect("every report answered")).collect());
    }
    insert_reports(conn, &accepted, now).await?;
    for a in &accepted {
        let r = &a.job.report;
        for e in r.entries.iter().filter(|e| !e.output_ok) {
            insert_flag(conn, &e.kernel_sha256, &r.kind, &a.job.keys, &r.session_id, None, "client-check", now).await?;
        }
    }
    // Counting is the elector's (see `elector`): the reports wait in
    // `uncounted`, and nothing of any key is locked, read or written here.
    let mut q = Sql::new(conn, "INSERT INTO uncounted (report_id, created_at) VALUES ");
    for a in &accepted {
        q.row().bind(a.job.id.clone()).push(", ").bind(now).push(")");
    }
    q.query()?.execute(&mut *conn).await?;
    if let Some(c) = committed {
        c.extend(accepted.iter().map(|a| uncounted_of(a.job, now)));
    }
    // Callers that do not wait for the count are answered with the winners
    // standing now (in their spaces), one read per kind.
    let mut by_kind: std::collections::BTreeMap<&KernelKind, Vec<At>> = std::collections::BTreeMap::new();
    for a in accepted.iter().filter(|a| !a.job.counted) {
        let r = &a.job.report;
        let ats = by_kind.entry(&r.kind).or_default();
        for level in Level::STORED {
            let at = At::new(&r.kind, &r.space_checksum, level, &a.job.keys);
            if !ats.iter().any(|x| x.same(&at)) {
                ats.push(at);
            }
        }
    }
    let mut standing: Vec<(At, Option<Winner>)> = Vec::new();
    for (_, ats) in by_kind {
        let winners = crate::elector::standing(conn, &ats).await?;
        standing.extend(ats.into_iter().zip(winners));
    }
    for a in &accepted {
        let r = &a.job.report;
        let winners = Level::STORED
            .iter()
            .filter_map(|&level| {
                let at = At::new(&r.kind, &r.space_checksum, level, &a.job.keys);
                standing.iter().find(|(x, _)| x.same(&at)).and_then(|(_, w)| w.clone())
            })
            .collect();
        outcomes[a.index] = Some(Ok(RecordedReport { report_id: a.job.id.clone(), winners, seats_changed: false }));
    }
    Ok(outcomes.into_iter().map(|o| o.expect("every report answered")).collect())
}

/// `job`'s report stored at `now` as the elector reads it back from its
/// rows (`elector::uncounted_sql`): its positive-weight votes by rank.
fn uncounted_of(job: &Job, now: i64) -> crate::elector::Uncounted {
    let r = &job.report;
    crate::elector::Uncounted {
        id: job.id.clone(),
        session: r.session_id.clone(),
        kind: r.kind.clone(),
        space: r.space_checksum.clone(),
        keys: job.keys.clone(),
        created_at: now,
        votes: r
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.kernel_sha256.clone(), ranked_weight(i + 1, e.output_ok), e.median_us))
            .filter(|(_, w, _)| *w > 0)
            .collect(),
    }
}

/// The kinds of the stored kernels among `shas`.
async fn kernels_of(conn: &mut AnyConnection, shas: &[&str]) -> Result<std::collections::HashMap<String, KernelKind>> {
    let mut known = std::collections::HashMap::new();
    if shas.is_empty() {
        return Ok(known);
    }
    for r in kernels_sql(conn, shas).query()?.fetch_all(&mut *conn).await? {
        let kind = KernelKind { op: r.try_get("op")?, shape: r.try_get("shape")?, target: r.try_get("target")? };
        known.insert(r.try_get::<String, _>("sha256")?, kind);
    }
    Ok(known)
}

fn kernels_sql(conn: &AnyConnection, shas: &[&str]) -> Sql {
    let mut q = Sql::new(conn, "SELECT sha256, op, shape, target FROM kernels WHERE sha256 IN (");
    q.list(shas.iter().map(|s| s.to_string())).push(")");
    q
}

/// The reports and their measurements, one statement each.
async fn insert_reports(conn: &mut AnyConnection, accepted: &[Accepted<'_>], now: i64) -> Result<()> {
    let mut q = Sql::new(
        conn,
        "INSERT INTO reports (id, session_id, op, shape, target, space_checksum, device_key, arch_key, vendor_key, rho, created_at) VALUES ",
    );
    for a in accepted {
        let (r, k) = (&a.job.report, &a.job.keys);
        q.row();
        q.list(
            [
                &a.job.id,
                &r.session_id,
                &r.kind.op,
                &r.kind.shape,
                &r.kind.target,
                &r.space_checksum,
                &k.device_key,
                &k.arch_key,
                &k.vendor_key,
                &k.rho,
            ]
            .map(|v| v.clone()),
        );
        q.push(", ").bind(now).push(")");
    }
    q.query()?.execute(&mut *conn).await?;
    let mut q =
        Sql::new(conn, "INSERT INTO measurements (report_id, rank, kernel_sha256, ticket, median_us, runs, output_ok, weight) VALUES ");
    for a in accepted {
        for (i, e) in a.job.report.entries.iter().enumerate() {
            q.row()
                .bind(a.job.id.clone())
                .push(", ")
                .bind((i + 1) as i64)
                .push(", ")
                .bind(e.kernel_sha256.clone())
                .push(", ")
                .bind(e.ticket.clone());
            q.push(", ").bind(e.median_us).push(", ").bind(e.runs).push(", ").bind(e.output_ok as i64);
            q.push(", ").bind(ranked_weight(i + 1, e.output_ok)).push(")");
        }
    }
    if q.rows > 0 {
        q.query()?.execute(&mut *conn).await?;
    }
    Ok(())
}

/// `verb` (`SELECT columns` or `DELETE`) over the ballots of `sessions` in
/// one kind and space: the primary key's first five columns.
pub(crate) fn session_ballots_sql(conn: &AnyConnection, verb: &str, kind: &KernelKind, space: &str, sessions: &[&str]) -> Sql {
    let mut q = Sql::new(conn, verb);
    q.push(" FROM ballots WHERE session_id IN (").list(sessions.iter().map(|s| s.to_string()));
    q.push(") AND op = ").bind(kind.op.clone()).push(" AND shape = ").bind(kind.shape.clone());
    q.push(" AND target = ").bind(kind.target.clone()).push(" AND space_checksum = ").bind(space.to_string());
    q
}

/// A transaction that will write, holding the writers' lock from its first
/// statement, alone: nothing else writes while it runs. For writes that
/// are not reports ([`Db::import_winners`], [`Db::compact`]).
/// - SQLite: `BEGIN IMMEDIATE` takes the file's write lock before the first
///   read, waiting (`busy_timeout`) for another process's writer; a deferred
///   transaction that read first could not upgrade its lock then and failed
///   at once with "database is locked".
/// - PostgreSQL: the writers' advisory lock, exclusively: it waits for every
///   transaction of [`begin_report`] on any server to end, and they for it.
pub(crate) async fn begin_write(pool: &Pool<Any>, backend: Backend) -> Result<sqlx::Transaction<'static, Any>> {
    match backend {
        Backend::Sqlite => Ok(pool.begin_with("BEGIN IMMEDIATE").await?),
        Backend::Postgres => {
            let mut tx = pool.begin().await?;
            sqlx::query("SELECT pg_advisory_xact_lock(7765) AS locked").fetch_one(&mut *tx).await?;
            Ok(tx)
        }
    }
}

/// When a PostgreSQL transaction of [`begin_report`] is durable.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Durability {
    /// Its commit returns once the log is on disk (the server's setting).
    AtCommit,
    /// Its commit returns once its commit record is written, before the
    /// flush (`synchronous_commit = off`, this transaction only), and
    /// releases its locks then; nothing it stored may be acknowledged
    /// before the flusher has proved it durable (see the module's header).
    Flusher,
}

/// A transaction that stores reports or flags and elects the winners of
/// their keys, which it must lock with [`lock_keys`] before it reads or
/// writes anything of those keys.
/// - SQLite: `BEGIN IMMEDIATE`, as [`begin_write`]: one writer at a time
///   (`durability` is always at commit).
/// - PostgreSQL: the writers' advisory lock, shared: any number of these
///   run at once, on every server, and wait only for [`begin_write`]'s.
pub(crate) async fn begin_report(pool: &Pool<Any>, backend: Backend, durability: Durability) -> Result<sqlx::Transaction<'static, Any>> {
    match backend {
        Backend::Sqlite => Ok(pool.begin_with("BEGIN IMMEDIATE").await?),
        Backend::Postgres => {
            let mut tx = pool.begin().await?;
            let text = match durability {
                Durability::AtCommit => "SELECT pg_advisory_xact_lock_shared(7765) AS locked",
                Durability::Flusher => {
                    "SELECT pg_advisory_xact_lock_shared(7765) AS locked, set_config('synchronous_commit', 'off', true) AS durability"
                }
            };
            sqlx::query(text).fetch_one(&mut *tx).await?;
            Ok(tx)
        }
    }
}

/// PostgreSQL: takes the advisory lock of each winner key (kind, level,
/// key) in `keys` until the transaction ends, in one fixed order (by the
/// lock's number), so two transactions never wait for each other in a
/// circle. Two reports wait for each other only where they elect at the
/// same key; an election then always sees every report committed before
/// it, and one that committed after it elects again. (A winner key, not a
/// space's: the winner row is shared by the spaces.) Keys are hashed to 32
/// bits in their own lock space (two-number advisory locks, class 7766); a
/// collision only makes two keys wait for each other. SQLite: nothing (the
/// transaction is already the only writer).
pub(crate) async fn lock_keys(conn: &mut AnyConnection, keys: &[(&KernelKind, Level, &str)]) -> Result<()> {
    if !conn.backend_name().eq_ignore_ascii_case("postgresql") || keys.is_empty() {
        return Ok(());
    }
    let mut ids: Vec<i32> = keys
        .iter()
        .map(|(kind, level, key)| {
            use sha2::{Digest, Sha256};
            let text = [kind.op.as_str(), &kind.shape, &kind.target, level.name(), key].join("\0");
            let d = Sha256::digest(text.as_bytes());
            i32::from_le_bytes([d[0], d[1], d[2], d[3]])
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    // One statement; a VALUES list is read in its order.
    let mut q = Sql::new(conn, "SELECT pg_advisory_xact_lock(7766, k) AS locked FROM (VALUES ");
    for id in ids {
        q.row().bind(id).push(")");
    }
    q.push(") AS v(k)");
    q.query()?.execute(&mut *conn).await?;
    Ok(())
}

/// SQL text built together with its arguments, so that its placeholders
/// take each engine's cheap form: `$N` on PostgreSQL, plain `?` on SQLite.
/// (SQLite looks `$N` and `?N` up by name, a linear search per parameter
/// both when parsing and when binding: a statement with ten thousand of
/// them took 135 ms.) Values are always bound, never spliced in.
pub(crate) struct Sql {
    text: String,
    n: usize,
    /// Rows opened by [`Sql::row`].
    rows: usize,
    pub(crate) pg: bool,
    args: AnyArguments,
    error: Option<sqlx::error::BoxDynError>,
}

impl Sql {
    pub(crate) fn new(conn: &AnyConnection, text: &str) -> Sql {
        let pg = conn.backend_name().eq_ignore_ascii_case("postgresql");
        Sql { text: text.to_string(), n: 0, rows: 0, pg, args: AnyArguments::default(), error: None }
    }

    pub(crate) fn push(&mut self, text: &str) -> &mut Sql {
        self.text.push_str(text);
        self
    }

    /// Opens the next row of a `VALUES` list (`(`, or `, (` after the
    /// first); the caller closes it with `)`.
    pub(crate) fn row(&mut self) -> &mut Sql {
        self.rows += 1;
        self.push(if self.rows == 1 { "(" } else { ", (" })
    }

    /// A placeholder for `value`.
    pub(crate) fn bind<T>(&mut self, value: T) -> &mut Sql
    where
        T: for<'q> sqlx::Encode<'q, Any> + sqlx::Type<Any> + Send + 'static,
    {
        use sqlx::Arguments;
        self.n += 1;
        if self.pg {
            self.text.push_str(&format!("${}", self.n));
        } else {
            self.text.push('?');
        }
        if let Err(e) = self.args.add(value) {
            self.error.get_or_insert(e);
        }
        self
    }

    /// Placeholders for `values`, separated by commas.
    pub(crate) fn list<T>(&mut self, values: impl IntoIterator<Item = T>) -> &mut Sql
    where
        T: for<'q> sqlx::Encode<'q, Any> + sqlx::Type<Any> + Send + 'static,
    {
        for (i, v) in values.into_iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.bind(v);
        }
        self
    }

    /// `(level IN (..) AND level_key IN (..) [AND space_checksum IN (..)] AND
    /// (exact tuples))` for `ats`. The `IN` lists are what let SQLite seek the
    /// primary key once per combination (it does not split an `OR` of
    /// conjunctions into seeks); the exact tuples then filter.
    pub(crate) fn keys(&mut self, ats: &[At<'_>], with_space: bool) -> &mut Sql {
        self.push("level IN (").list(ats.iter().map(|a| a.level.name().to_string())).push(") AND level_key IN (");
        self.list(ats.iter().map(|a| a.key.to_string())).push(")");
        if with_space {
            self.push(" AND space_checksum IN (").list(ats.iter().map(|a| a.space.to_string())).push(")");
        }
        self.push(" AND (");
        for (i, a) in ats.iter().enumerate() {
            self.push(if i == 0 { "(level = " } else { " OR (level = " }).bind(a.level.name().to_string());
            self.push(" AND level_key = ").bind(a.key.to_string());
            if with_space {
                self.push(" AND space_checksum = ").bind(a.space.to_string());
            }
            self.push(")");
        }
        self.push(")")
    }

    pub(crate) fn query(&mut self) -> Result<AnyQuery<'static>> {
        if let Some(e) = self.error.take() {
            return Err(DbError::Sqlx(sqlx::Error::Encode(e)));
        }
        let text = std::mem::take(&mut self.text);
        Ok(sqlx::query_with(sqlx::AssertSqlSafe(text), std::mem::take(&mut self.args)))
    }
}

/// One key's election: its winner, and whether the seat changed hands.
pub(crate) struct Elected {
    pub(crate) winner: Option<Winner>,
    /// Another kernel took the seat, or the winner was removed.
    pub(crate) seat_changed: bool,
}

/// The standings at `levels` (one kind).
fn standings_sql(conn: &AnyConnection, levels: &[At<'_>]) -> Sql {
    let kind = levels[0].kind;
    let mut q = Sql::new(conn, "SELECT level, level_key, space_checksum, kernel_sha256, votes, sessions FROM tallies WHERE op = ");
    q.bind(kind.op.clone()).push(" AND shape = ").bind(kind.shape.clone()).push(" AND target = ").bind(kind.target.clone());
    q.push(" AND sessions > 0 AND ").keys(levels, true).push(" ORDER BY kernel_sha256");
    q
}

/// The winners standing at `levels` (one kind).
fn incumbents_sql(conn: &AnyConnection, levels: &[At<'_>]) -> Sql {
    let kind = levels[0].kind;
    let mut q = Sql::new(conn, "SELECT level, level_key, space_checksum, kernel_sha256 FROM winners WHERE op = ");
    q.bind(kind.op.clone()).push(" AND shape = ").bind(kind.shape.clone()).push(" AND target = ").bind(kind.target.clone());
    q.push(" AND ").keys(levels, true);
    q
}

/// Distinct flagging sessions per kernel at each of `levels` (one kind):
/// flags are per key, whatever the space.
fn flags_sql(conn: &AnyConnection, levels: &[At<'_>]) -> Sql {
    let kind = levels[0].kind;
    let mut q = Sql::new(conn, "");
    for (i, l) in levels.iter().enumerate() {
        let col = match l.level {
            Level::Device => "device_key",
            Level::Arch => "arch_key",
            _ => "vendor_key",
        };
        if i > 0 {
            q.push(" UNION ALL ");
        }
        q.push(&format!("SELECT {i} AS at, kernel_sha256, COUNT(DISTINCT session_id) AS n FROM flags WHERE op = "));
        q.bind(kind.op.clone()).push(" AND shape = ").bind(kind.shape.clone()).push(" AND target = ").bind(kind.target.clone());
        q.push(&format!(" AND {col} = ")).bind(l.key.to_string()).push(" GROUP BY kernel_sha256");
    }
    q
}

/// Re-elects the winner at each of `levels` (one kind; any spaces) from
/// the running tallies and stores them; where no kernel is eligible, the
/// standing winner of the same space is removed only if flags exclude it
/// (another space's winner is never touched). The winners, by level.
pub(crate) async fn elect_levels(conn: &mut AnyConnection, levels: &[At<'_>], policy: &VotePolicy, now: i64) -> Result<Vec<Elected>> {
    let kind = levels[0].kind;
    debug_assert!(levels.iter().all(|l| l.kind == kind));
    // Standings, incumbents and flags of every level in one statement
    // each; a level's row is matched by (level, key, space).
    let tally_rows = standings_sql(conn, levels).query()?.fetch_all(&mut *conn).await?;
    let incumbent_rows = incumbents_sql(conn, levels).query()?.fetch_all(&mut *conn).await?;
    let flag_rows = flags_sql(conn, levels).query()?.fetch_all(&mut *conn).await?;

    let matches = |r: &sqlx::any::AnyRow, l: &At| -> Result<bool> {
        Ok(r.try_get::<String, _>("level")? == l.level.name()
            && r.try_get::<String, _>("level_key")? == l.key
            && r.try_get::<String, _>("space_checksum")? == l.space)
    };
    let mut out = Vec::with_capacity(levels.len());
    let mut upserts = Vec::new();
    for (i, at) in levels.iter().enumerate() {
        // Distinct sessions that flagged each kernel at this level's key.
        let mut flagged: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for r in &flag_rows {
            if r.try_get::<i64, _>("at")? as usize == i {
                flagged.insert(r.try_get("kernel_sha256")?, r.try_get::<i64, _>("n")? as usize);
            }
        }
        let mut standings = Vec::new();
        for r in &tally_rows {
            if matches(r, at)? {
                let kernel_sha256: String = r.try_get("kernel_sha256")?;
                let flagged_by = flagged.get(&kernel_sha256).copied().unwrap_or(0);
                standings.push(Standing {
                    kernel_sha256,
                    votes: r.try_get("votes")?,
                    sessions: r.try_get::<i64, _>("sessions")? as usize,
                    flagged_by,
                });
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
                Step::Ballots(ks) => {
                    for k in ks {
                        ev.ballots.insert(k.to_string(), ballots_of(conn, at, k).await?);
                    }
                }
                Step::Weights(k, sessions) => {
                    ev.weights.insert(k.to_string(), weights_of(conn, at, k, &sessions).await?);
                }
            }
        };
        let Some(win) = won else {
            // Nothing eligible: the standing winner of this space stays
            // unless flags exclude it (see `flag_excluded`).
            let mut seat_changed = false;
            if let Some(inc) = &incumbent {
                let sessions = standings.iter().find(|s| &s.kernel_sha256 == inc).map_or(0, |s| s.sessions);
                if flag_excluded(flagged.get(inc).copied().unwrap_or(0), sessions, policy.quorum) {
                    seat_changed = true;
                    at.bind(sqlx::query(
                        "DELETE FROM winners WHERE op = $1 AND shape = $2 AND target = $3 AND space_checksum = $4 AND level = $5 \
                         AND level_key = $6",
                    ))
                    .execute(&mut *conn)
                    .await?;
                }
            }
            out.push(Elected { winner: None, seat_changed });
            continue;
        };
        let best_median_us = match ev.median(&win.kernel_sha256) {
            Some(m) => m,
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
        out.push(Elected { seat_changed: incumbent.as_deref() != Some(win.kernel_sha256.as_str()), winner: Some(w) });
    }
    if !upserts.is_empty() {
        let mut q = Sql::new(
            conn,
            "INSERT INTO winners (op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, total_votes, reports, \
             best_median_us, updated_at) VALUES ",
        );
        for w in upserts {
            q.row().list([
                w.kind.op,
                w.kind.shape,
                w.kind.target,
                w.space_checksum,
                w.level.name().to_string(),
                w.level_key,
                w.kernel_sha256,
            ]);
            q.push(", ").list([w.votes, w.total_votes, w.reports]).push(", ").bind(w.best_median_us).push(", ").bind(now).push(")");
        }
        q.push(
            " ON CONFLICT (op, shape, target, level, level_key) DO UPDATE SET \
             space_checksum = excluded.space_checksum, kernel_sha256 = excluded.kernel_sha256, votes = excluded.votes, \
             total_votes = excluded.total_votes, reports = excluded.reports, best_median_us = excluded.best_median_us, \
             updated_at = excluded.updated_at",
        );
        q.query()?.execute(&mut *conn).await?;
    }
    Ok(out)
}

/// A kernel's median over its latest ballots at a key (see [`median_of`]),
/// at the device, arch and vendor level.
macro_rules! median_sql {
    ($col:literal) => {
        concat!(
            "SELECT median_us FROM (SELECT median_us FROM ballots WHERE ",
            at_level!($col),
            " ORDER BY created_at DESC, report_id DESC LIMIT $7) AS recent ORDER BY median_us LIMIT $8 OFFSET $9"
        )
    };
}
const MEDIAN_SQL: [&str; 3] = [median_sql!("device_key"), median_sql!("arch_key"), median_sql!("vendor_key")];

/// A kernel's latest ballots at a key (see [`ballots_of`]), by level.
macro_rules! ballots_sql {
    ($col:literal) => {
        concat!(
            "SELECT session_id, weight, median_us FROM ballots WHERE ",
            at_level!($col),
            " ORDER BY created_at DESC, report_id DESC LIMIT $7"
        )
    };
}
const BALLOTS_SQL: [&str; 3] = [ballots_sql!("device_key"), ballots_sql!("arch_key"), ballots_sql!("vendor_key")];

/// The median of `kernel`'s times at `at` over its latest `n` ballots
/// (`n` at most [`TIME_WINDOW`]), computed in the database: the middle
/// value, or the mean of the middle two.
async fn median_of(conn: &mut AnyConnection, at: &At<'_>, kernel: &str, sessions: usize) -> Result<f64> {
    let n = sessions.min(TIME_WINDOW);
    if n == 0 {
        return Ok(f64::NAN);
    }
    let rows = at
        .bind_ballots(sqlx::query(MEDIAN_SQL[at.level_index()]))
        .bind(kernel.to_string())
        .bind(n as i64)
        .bind(if n.is_multiple_of(2) { 2i64 } else { 1 })
        .bind(((n - 1) / 2) as i64)
        .fetch_all(&mut *conn)
        .await?;
    let v: Vec<f64> = rows.iter().map(|r| r.try_get("median_us")).collect::<std::result::Result<_, _>>()?;
    match v[..] {
        [m] if !n.is_multiple_of(2) => Ok(m),
        [a, b] if n.is_multiple_of(2) => Ok(0.5 * (a + b)),
        _ => Err(DbError::Corrupt(format!("tally of {kernel} at {} counts {sessions} sessions, ballots disagree", at.key))),
    }
}

/// `kernel`'s latest [`TIME_WINDOW`] ballots at `at`, most recent first.
async fn ballots_of(conn: &mut AnyConnection, at: &At<'_>, kernel: &str) -> Result<Vec<Ballot>> {
    let rows = at
        .bind_ballots(sqlx::query(BALLOTS_SQL[at.level_index()]))
        .bind(kernel.to_string())
        .bind(TIME_WINDOW as i64)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|r| Ok(Ballot { session: r.try_get("session_id")?, weight: r.try_get("weight")?, median_us: r.try_get("median_us")? }))
        .collect()
}

/// The weights `kernel` has at `at` in the ballots of these sessions (a
/// session that did not rank it is missing).
async fn weights_of(
    conn: &mut AnyConnection,
    at: &At<'_>,
    kernel: &str,
    sessions: &[String],
) -> Result<std::collections::HashMap<String, i64>> {
    let rows = weights_sql(conn, at, kernel, sessions).query()?.fetch_all(&mut *conn).await?;
    rows.iter().map(|r| Ok((r.try_get("session_id")?, r.try_get("weight")?))).collect()
}

/// The sessions come from ballots at `at`'s key, and all of a session's
/// ballot rows of one kind and space carry the same keys (one report's):
/// so the key is not named, and the primary key is the only index that
/// the statement can seek (naming it let SQLite, before statistics, read
/// every ballot of the kernel at the key instead).
fn weights_sql(conn: &AnyConnection, at: &At<'_>, kernel: &str, sessions: &[String]) -> Sql {
    let mut q = Sql::new(conn, "SELECT session_id, weight FROM ballots WHERE op = ");
    q.bind(at.kind.op.clone()).push(" AND shape = ").bind(at.kind.shape.clone()).push(" AND target = ").bind(at.kind.target.clone());
    q.push(" AND space_checksum = ").bind(at.space.to_string());
    q.push(" AND kernel_sha256 = ").bind(kernel.to_string());
    q.push(" AND session_id IN (").list(sessions.iter().cloned()).push(")");
    q
}

/// The index of the first of `tickets` already quoted by a measurement or
/// a flag, on `conn` (a pooled connection, or a transaction's).
async fn tickets_used(conn: &mut AnyConnection, tickets: &[&str]) -> Result<Option<usize>> {
    let used = tickets_in_use(conn, tickets).await?;
    Ok(tickets.iter().position(|t| used.contains(*t)))
}

/// Those of `tickets` already quoted by a measurement or a flag.
async fn tickets_in_use(conn: &mut AnyConnection, tickets: &[&str]) -> Result<std::collections::HashSet<String>> {
    if tickets.is_empty() {
        return Ok(Default::default());
    }
    Ok(tickets_sql(conn, tickets)
        .query()?
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| r.try_get("ticket"))
        .collect::<std::result::Result<_, _>>()?)
}

fn tickets_sql(conn: &AnyConnection, tickets: &[&str]) -> Sql {
    let mut q = Sql::new(conn, "SELECT ticket FROM measurements WHERE ticket IN (");
    q.list(tickets.iter().map(|t| t.to_string())).push(") UNION ALL SELECT ticket FROM flags WHERE ticket IN (");
    q.list(tickets.iter().map(|t| t.to_string())).push(")");
    q
}

impl Db {
    /// Stores a top-N report and its raw measurements, and answers once it
    /// is durable and counted: the elector (`elector`) has cast
    /// the session's ballots and re-elected the winner at each of the
    /// session's three levels under `policy`. The report's transaction may
    /// be shared with other reports waiting at the same time (group
    /// commit), and its count with every report stored meanwhile (one
    /// election per key a pass). Entries whose client-side check failed
    /// also flag their kernel for this device. The answer's winners are
    /// the ones its count elected, and `seats_changed` says whether a seat
    /// changed hands in that count (always true where another server's
    /// elector counted it: this one cannot tell).
    ///
    /// The caller has checked the tickets' signatures and that each kernel
    /// belongs to `report.kind`; this checks that every kernel is stored and
    /// that no ticket was used before.
    pub async fn record_report(&self, report: &NewReport, keys: &DeviceKeys, policy: &VotePolicy) -> Result<RecordedReport> {
        self.elector.set_policy(*policy);
        let id = random_id()?;
        let counted = self.elector.expect(&id);
        if let Err(e) = self.submit(&id, report, keys, true).await {
            self.elector.forget(&id);
            return Err(e);
        }
        self.elector.stored(&id, &report.kind, &report.space_checksum, keys);
        self.elector.kick();
        let c = counted.await.map_err(|_| DbError::Group("the database's elector has stopped".into()))??;
        Ok(RecordedReport { report_id: id, winners: c.winners, seats_changed: c.seats_changed })
    }

    /// Stores a top-N report as [`Db::record_report`] does, but answers
    /// once it is durable, before it is counted: the elector counts it
    /// within about two of its passes (lookups and the winners may lag by
    /// that; [`Db::election_stats`] measures it). The answer's winners are
    /// those standing when the report was stored, and `seats_changed` is
    /// false: seats change in the elector's passes, which bump
    /// [`Db::election_epoch`].
    pub async fn store_report(&self, report: &NewReport, keys: &DeviceKeys, policy: &VotePolicy) -> Result<RecordedReport> {
        self.elector.set_policy(*policy);
        let id = random_id()?;
        self.submit(&id, report, keys, false).await
    }

    async fn submit(&self, id: &str, report: &NewReport, keys: &DeviceKeys, counted: bool) -> Result<RecordedReport> {
        let (done, outcome) = tokio::sync::oneshot::channel();
        let job = Job { id: id.to_string(), report: report.clone(), keys: keys.clone(), counted, done };
        self.reports.send(job).await.map_err(|_| DbError::Group("the database's writer has stopped".into()))?;
        outcome.await.map_err(|_| DbError::Group("the database's writer has stopped".into()))?
    }

    /// The policy this handle's elector elects by, until a report brings
    /// another (a server sets its own at start; every server of one
    /// database must use the same).
    pub fn set_vote_policy(&self, policy: &VotePolicy) {
        self.elector.set_policy(*policy);
    }

    /// Counts every report stored so far (before this call) that is still
    /// uncounted, waiting for those another server's elector is counting:
    /// afterwards the tallies and winners include them. For tests, tools
    /// and compaction; under a steady crowd it returns once it found
    /// nothing left at one moment.
    pub async fn flush_elections(&self) -> Result<()> {
        loop {
            match crate::elector::pass(&self.pool, self.backend, &self.write, &self.elector).await {
                Ok(0) => {}
                Ok(_) => continue,
                Err(e) if is_conflict(&e) => continue,
                Err(e) => return Err(e),
            }
            let left = sqlx::query("SELECT report_id FROM uncounted LIMIT 1").fetch_optional(&self.pool).await?;
            if left.is_none() {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// A number that this handle's elector bumps whenever a pass changed a
    /// seat, or elected at a key with no winner (whose provisional answer
    /// may have moved): a cache of lookups is stale once it changed.
    pub fn election_epoch(&self) -> u64 {
        self.elector.epoch()
    }

    /// What this handle's elector has done: passes, reports counted, time,
    /// and how long reports waited to be counted.
    pub fn election_stats(&self) -> crate::ElectionStats {
        self.elector.stats()
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
        let mut tx = begin_report(&self.pool, self.backend, Durability::AtCommit).await?;
        let locks: Vec<(&KernelKind, Level, &str)> =
            Level::STORED.iter().map(|&level| (kind, level, keys.key(level).unwrap_or_default())).collect();
        lock_keys(&mut tx, &locks).await?;
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

/// Where [`Db::report_path_plans`] asks its statements about: values as
/// a report would bring them.
#[derive(Clone, Debug)]
pub struct PlanSample {
    pub kind: KernelKind,
    pub space: String,
    pub keys: DeviceKeys,
    /// Sessions whose ballots a group replaces (a group's worth).
    pub sessions: Vec<String>,
    /// Tickets a group checks.
    pub tickets: Vec<String>,
    /// Kernels a group names; the first is the one elections read.
    pub kernels: Vec<String>,
    /// Reports a pass of the elector counts, and the first and last of
    /// their times (ms).
    pub reports: Vec<String>,
    pub first: i64,
    pub last: i64,
}

/// One statement of the report path and the engine's plan for it:
/// PostgreSQL's `EXPLAIN` text, or SQLite's `EXPLAIN QUERY PLAN` details,
/// one step a line.
#[derive(Clone, Debug)]
pub struct StatementPlan {
    pub statement: &'static str,
    pub plan: String,
}

impl Db {
    /// The plans the engine would use now for every statement of the
    /// report path and the elector's passes that reads or deletes rows by a
    /// key (the inserts go by the primary key), built by the same code that
    /// runs them, over the values of `sample`. For tests that pin the
    /// plans; it changes nothing.
    pub async fn report_path_plans(&self, sample: &PlanSample) -> Result<Vec<StatementPlan>> {
        let mut conn = self.pool.acquire().await?;
        let conn: &mut AnyConnection = &mut conn;
        let pg = self.backend == Backend::Postgres;
        let s = sample;
        let sessions: Vec<&str> = s.sessions.iter().map(String::as_str).collect();
        let tickets: Vec<&str> = s.tickets.iter().map(String::as_str).collect();
        let kernels: Vec<&str> = s.kernels.iter().map(String::as_str).collect();
        let ats: Vec<At> = Level::STORED.iter().map(|&l| At::new(&s.kind, &s.space, l, &s.keys)).collect();
        let window: Vec<String> = s.sessions.iter().cycle().take(TIME_WINDOW).cloned().collect();
        let mut statements: Vec<(&'static str, Sql)> = vec![
            ("kernels of a group", kernels_sql(conn, &kernels)),
            ("tickets in use", tickets_sql(conn, &tickets)),
            ("sessions' ballots", session_ballots_sql(conn, crate::elector::SESSION_BALLOTS, &s.kind, &s.space, &sessions)),
            ("sessions' ballots deleted", session_ballots_sql(conn, "DELETE", &s.kind, &s.space, &sessions)),
            ("standings", standings_sql(conn, &ats)),
            ("incumbents", incumbents_sql(conn, &ats)),
            ("flags", flags_sql(conn, &ats)),
            ("weights in sessions", weights_sql(conn, &ats[0], kernels[0], &window)),
            ("standing winners", crate::elector::standing_sql(conn, &ats)),
            ("uncounted claimed", crate::elector::claim_sql(conn, 320)),
            ("uncounted reports", crate::elector::uncounted_sql(conn, &s.reports, s.first, s.last)),
            ("uncounted left", crate::elector::left_sql(conn, &s.reports[..s.reports.len().min(crate::elector::LEFT_CHUNK)])),
            ("counted deleted", crate::elector::counted_sql(conn, &s.reports, s.first, s.last)),
            ("ballots cast", crate::elector::cast_sql(conn, &s.reports, s.first, s.last)),
        ];
        let mut out = Vec::new();
        for (statement, mut q) in statements.drain(..) {
            q.text.insert_str(0, if pg { "EXPLAIN " } else { "EXPLAIN QUERY PLAN " });
            let rows = q.query()?.fetch_all(&mut *conn).await?;
            out.push(StatementPlan { statement, plan: plan_text(&rows, pg)? });
        }
        // At every level: each has its own index.
        let levels =
            [("median", "latest ballots"), ("median at arch", "latest ballots at arch"), ("median at vendor", "latest ballots at vendor")];
        for (at, (median, latest)) in ats.iter().zip(levels) {
            for (statement, text) in [(median, MEDIAN_SQL[at.level_index()]), (latest, BALLOTS_SQL[at.level_index()])] {
                let text = format!("{}{text}", if pg { "EXPLAIN " } else { "EXPLAIN QUERY PLAN " });
                let mut q = at.bind_ballots(sqlx::query(sqlx::AssertSqlSafe(text))).bind(s.kernels[0].clone()).bind(TIME_WINDOW as i64);
                if statement == median {
                    q = q.bind(2i64).bind(10i64);
                }
                let rows = q.fetch_all(&mut *conn).await?;
                out.push(StatementPlan { statement, plan: plan_text(&rows, pg)? });
            }
        }
        Ok(out)
    }
}

/// The lines of an `EXPLAIN` (PostgreSQL) or `EXPLAIN QUERY PLAN` (SQLite).
fn plan_text(rows: &[sqlx::any::AnyRow], pg: bool) -> Result<String> {
    let lines: Vec<String> = rows
        .iter()
        .map(|r| if pg { r.try_get::<String, _>(0) } else { r.try_get::<String, _>("detail") })
        .collect::<std::result::Result<_, _>>()?;
    Ok(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::grown_since_analysed;

    #[test]
    fn analyses_once_the_tables_doubled_since_the_last() {
        // Never analysed, or counters not yet flushed.
        assert!(grown_since_analysed(0, 0));
        assert!(grown_since_analysed(300, 300));
        // 1,000 rows at the last analysis.
        assert!(!grown_since_analysed(999, 1_999));
        assert!(grown_since_analysed(1_000, 2_000));
        // Another server analysed a moment ago.
        assert!(!grown_since_analysed(10, 5_010));
    }
}
