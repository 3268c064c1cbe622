//! The elector: counts stored reports into the running tallies and
//! re-elects the keys they touch, off the report's path.
//!
//! A report's transaction stores the report, its measurements and flags
//! and a row of `uncounted` (migration 0008), and takes no key lock: it
//! writes only rows of its own. Each [`Db`](crate::Db) runs one elector
//! task. On PostgreSQL one pass runs at a time on the database (a
//! transaction-scoped try-lock, class 7767: a server that finds another
//! server's elector counting leaves the reports to it, since every pass
//! elects at the hot keys and two passes would only queue on their locks).
//! A pass takes the oldest uncounted reports (`FOR UPDATE SKIP LOCKED` as
//! well), locks the winner keys they touch (the advisory locks every election
//! takes, see `reports::lock_keys`), replaces each session's ballots,
//! adjusts the tallies, elects every touched key once, and deletes its
//! `uncounted` rows, all in one transaction. So a report is counted exactly
//! once; a pass lost to a crash leaves its rows to the next; and however
//! many reports arrive, a hot key (every report of an architecture shares
//! its arch and vendor keys) is elected once a pass, not once a report.
//!
//! The task runs a pass as soon as a report of its own [`Db`] committed,
//! and again while the last pass was full, and every [`POLL`] otherwise
//! (for reports that servers without a running elector stored). So under
//! load a pass counts what arrived during the one before, and a report is
//! counted within about two passes of its commit. [`Db::flush_elections`]
//! waits until nothing is left uncounted, for tests and tools.
//!
//! A caller of [`Db::record_report`] waits until its report is counted
//! (read-your-writes: the answer names the winners its votes helped
//! elect); one of [`Db::store_report`] is answered once the report is
//! durable.
//!
//! A pass commits without waiting for the disk (`synchronous_commit =
//! off` on PostgreSQL): its rows are derived from reports already durable
//! or about to be, and a crash that loses it loses its deletes from
//! `uncounted` too, so the next pass counts the same reports again.
//!
//! [`Db`]: crate::Db
//! [`Db::flush_elections`]: crate::Db::flush_elections
//! [`Db::record_report`]: crate::Db::record_report
//! [`Db::store_report`]: crate::Db::store_report

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::any::Any;
use sqlx::pool::Pool;
use sqlx::{AnyConnection, Row};

use crate::reports::{At, Durability, Elected, Sql, begin_report, elect_levels, is_conflict, lock_keys, session_ballots_sql};
use crate::{Backend, DbError, DeviceKeys, ElectionStats, KernelKind, Level, Result, VotePolicy, Winner, now_ms};

/// Most reports one pass counts on PostgreSQL (the ballots' insert binds
/// 180 values a report, under its limit of 65,535 a statement).
const PG_PASS_MAX: usize = 320;

/// Most reports one pass counts on SQLite. Its statements bind about one
/// variable a report (the claimed ids), far under SQLite's limit of 32,766;
/// at 256 clients passes of 160 were mostly full (dev-epyc, 2026-12-03),
/// and a pass's elections cost the same whatever its size.
const SQLITE_PASS_MAX: usize = 320;

/// Whether anything is left uncounted (a row, or none).
const ANY_UNCOUNTED: &str = "SELECT report_id FROM uncounted LIMIT 1";

/// Most committed reports [`Elector::committed`] keeps for the passes.
const RECENT_MAX: usize = 65_536;

/// How often an idle elector looks for uncounted reports that it was not
/// told of (stored by another server whose elector is busy or gone).
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// The longest an elector under load waits to gather reports before its
/// next pass (see [`start`]).
const GATHER_MAX: Duration = Duration::from_millis(50);

/// How often the task looks again while callers wait for reports that
/// another server's elector may be counting.
const SETTLE_POLL: Duration = Duration::from_millis(10);

/// Ids a statement asks `uncounted` about at once (waiters).
pub(crate) const LEFT_CHUNK: usize = 32;

/// What counting a report gave: the winners at its keys in its space after
/// the pass, and whether any of their seats changed hands in it.
#[derive(Debug)]
pub(crate) struct Counted {
    pub winners: Vec<Winner>,
    pub seats_changed: bool,
}

/// A caller of [`crate::Db::record_report`] waiting for its report's count.
struct Waiter {
    tx: tokio::sync::oneshot::Sender<Result<Counted>>,
    /// Set once the report is stored: its kind, space and keys. Only then
    /// does a report missing from `uncounted` mean it was counted (by
    /// another server's elector).
    stored: Option<(KernelKind, String, DeviceKeys)>,
}

/// The elector of one [`crate::Db`]: its wake-up, its waiters, the policy
/// it elects by and what it did.
#[derive(Debug, Default)]
pub(crate) struct Elector {
    kick: tokio::sync::Notify,
    /// Taken (read) by the task around its passes; see [`Elector::hold`].
    held: Arc<tokio::sync::RwLock<()>>,
    waiters: std::sync::Mutex<HashMap<String, Waiter>>,
    policy: std::sync::Mutex<Option<VotePolicy>>,
    /// Bumped by every pass that changed a seat or elected at a key
    /// without a winner (whose provisional answer may have moved).
    epoch: AtomicU64,
    passes: AtomicU64,
    reports: AtomicU64,
    busy_us: AtomicU64,
    lag_max_ms: AtomicU64,
    lag_sum_ms: AtomicU64,
    /// SQLite: the reports this process's writer committed and no pass
    /// has counted yet, by id, as [`uncounted_sql`] would read them back;
    /// see [`Elector::committed`].
    recent: std::sync::Mutex<HashMap<String, Uncounted>>,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter").field("stored", &self.stored.is_some()).finish()
    }
}

impl Elector {
    /// Wakes the task: a report committed, or a caller waits.
    pub(crate) fn kick(&self) {
        self.kick.notify_one();
    }

    /// Keeps the task from counting while the guard lives (for tests).
    pub(crate) async fn hold(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        Arc::clone(&self.held).write_owned().await
    }

    pub(crate) fn set_policy(&self, policy: VotePolicy) {
        *self.policy.lock().unwrap_or_else(|p| p.into_inner()) = Some(policy);
    }

    /// The policy of the server (the last one given), else the default.
    fn policy(&self) -> VotePolicy {
        self.policy.lock().unwrap_or_else(|p| p.into_inner()).unwrap_or_default()
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn stats(&self) -> ElectionStats {
        let passes = self.passes.load(Relaxed);
        let reports = self.reports.load(Relaxed);
        ElectionStats {
            passes,
            reports,
            busy_us: self.busy_us.load(Relaxed),
            lag_max_ms: self.lag_max_ms.load(Relaxed),
            lag_mean_ms: if reports == 0 { 0.0 } else { self.lag_sum_ms.load(Relaxed) as f64 / reports as f64 },
        }
    }

    fn waiters(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiter>> {
        self.waiters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a caller that will wait for report `id` to be counted.
    pub(crate) fn expect(&self, id: &str) -> tokio::sync::oneshot::Receiver<Result<Counted>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.waiters().insert(id.to_string(), Waiter { tx, stored: None });
        rx
    }

    /// The report was not stored: nobody waits for it.
    pub(crate) fn forget(&self, id: &str) {
        self.waiters().remove(id);
    }

    /// The report is stored (and durable).
    pub(crate) fn stored(&self, id: &str, kind: &KernelKind, space: &str, keys: &DeviceKeys) {
        if let Some(w) = self.waiters().get_mut(id) {
            w.stored = Some((kind.clone(), space.to_string(), keys.clone()));
        }
    }

    /// SQLite: the writer committed `reports` (under the writers' lock,
    /// before it lets a pass run). A pass that claims one of them counts it
    /// from here instead of reading its rows back: a pass of 150 reports
    /// spent about a third of its time reading their 750 rows back through
    /// the driver (2-core dev-epyc, 2026-12-03). Only what is claimed from
    /// `uncounted` is counted, so an entry is used only for a report whose
    /// row was committed; a report another process counts leaves its entry
    /// behind, and past [`RECENT_MAX`] entries the cache is emptied (the
    /// passes read those reports back instead).
    pub(crate) fn committed(&self, reports: Vec<Uncounted>) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() + reports.len() > RECENT_MAX {
            recent.clear();
        }
        recent.extend(reports.into_iter().map(|u| (u.id.clone(), u)));
    }

    /// Those of `ids` this process's writer committed (see
    /// [`Elector::committed`]), taken out of the cache, by position in `ids`.
    fn take_recent(&self, ids: &[String]) -> Vec<Option<Uncounted>> {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.is_empty() {
            return ids.iter().map(|_| None).collect();
        }
        ids.iter().map(|id| recent.remove(id)).collect()
    }

    fn answer(&self, id: &str, outcome: Result<Counted>) {
        if let Some(w) = self.waiters().remove(id) {
            let _ = w.tx.send(outcome);
        }
    }
}

/// Starts the elector task of a [`crate::Db`]; it ends once the elector
/// (the `Db`) is dropped or the pool closed.
pub(crate) fn start(pool: Pool<Any>, backend: Backend, lock: Arc<tokio::sync::Mutex<crate::connect::WriteConn>>, elector: Weak<Elector>) {
    tokio::spawn(async move {
        let mut last_pass = Duration::ZERO;
        loop {
            let Some(el) = elector.upgrade() else { break };
            // Sooner while callers wait for reports another server may be
            // counting (see `settle_elsewhere`).
            let wait = if el.waiters().values().any(|w| w.stored.is_some()) { SETTLE_POLL } else { POLL };
            let _ = tokio::time::timeout(wait, el.kick.notified()).await;
            if pool.is_closed() {
                break;
            }
            // Under load, gather: wait as long as the last pass took
            // before counting again (at most GATHER_MAX), so that a pass
            // counts what arrived meanwhile in one go. A pass's cost is
            // mostly its elections, one per touched key whatever the
            // number of reports, and on SQLite it holds the one write lock
            // that the reports' writer needs.
            if last_pass > Duration::ZERO {
                tokio::time::sleep(last_pass.min(GATHER_MAX)).await;
            }
            last_pass = Duration::ZERO;
            let _held = el.held.read().await;
            loop {
                let t0 = std::time::Instant::now();
                match pass(&pool, backend, &lock, &el).await {
                    Ok(n) if n == pass_max(backend) => continue,
                    Ok(0) => break,
                    Ok(_) => {
                        last_pass = t0.elapsed();
                        break;
                    }
                    // The reports stay uncounted; the next pass tries again
                    // (waiters of a pass that failed otherwise were told).
                    Err(_) => {
                        tokio::time::sleep(POLL).await;
                        break;
                    }
                }
            }
            let _ = settle_elsewhere(&pool, &el).await;
        }
    });
}

fn pass_max(backend: Backend) -> usize {
    if backend == Backend::Postgres { PG_PASS_MAX } else { SQLITE_PASS_MAX }
}

/// Counts the oldest uncounted reports (at most a pass's worth) in one
/// transaction; how many it counted. `lock` is the process's writers' lock
/// (held on SQLite, whose file has one writer).
pub(crate) async fn pass(
    pool: &Pool<Any>,
    backend: Backend,
    lock: &tokio::sync::Mutex<crate::connect::WriteConn>,
    el: &Elector,
) -> Result<usize> {
    let mut w = if backend == Backend::Sqlite { Some(lock.lock().await) } else { None };
    let t0 = std::time::Instant::now();
    let policy = el.policy();
    let (ids, outcome) = match backend {
        Backend::Postgres => {
            let mut tx = begin_report(pool, backend, Durability::Flusher).await?;
            // One pass at a time on the database: every pass elects at the
            // hot keys (an architecture's, a vendor's), so electors of
            // several servers would only queue on those keys' locks with
            // small passes; a server that finds another counting leaves
            // the reports to it (its pass takes them all).
            let counting: bool =
                sqlx::query("SELECT pg_try_advisory_xact_lock(7767) AS counting").fetch_one(&mut *tx).await?.try_get("counting")?;
            if !counting {
                tx.rollback().await?;
                return Ok(0);
            }
            claim_and_count(tx, backend, &policy, el).await?
        }
        Backend::Sqlite => {
            // The pass commits without waiting for the disk, as on
            // PostgreSQL: `synchronous = NORMAL` on the writers' connection
            // for the pass (under WAL a commit then writes the log but does
            // not sync it; the next synchronous commit, a report's, syncs it
            // with everything before). The report writer makes the
            // connection synchronous again before its next transaction
            // (`WriteConn::synced`).
            let w = w.as_deref_mut().expect("the writers' lock is held on SQLite");
            // Nothing uncounted (a wake for reports an earlier pass already
            // took, or the idle poll): one read, no transaction. An empty
            // pass was four round trips to the connection's thread under
            // the lock (2-core dev-epyc: two of three passes were empty).
            let probe = async { Ok::<_, DbError>(sqlx::query(ANY_UNCOUNTED).fetch_optional(w.open().await?).await?.is_none()) }.await;
            match probe {
                Ok(true) => return Ok(0),
                Ok(false) => {}
                Err(e) => {
                    w.failed(&e);
                    return Err(e);
                }
            }
            let outcome = async {
                let conn = w.unsynced().await?;
                let tx = sqlx::Connection::begin_with(conn, "BEGIN IMMEDIATE").await?;
                claim_and_count(tx, backend, &policy, el).await
            }
            .await;
            if let Err(e) | Ok((_, Err(e))) = &outcome {
                w.failed(e);
            }
            outcome?
        }
    };
    if ids.is_empty() {
        return Ok(0);
    }
    let pass = match outcome {
        Ok(pass) => pass,
        Err(e) => {
            // A conflict is tried again by the next pass; anything else
            // fails those who wait for these reports (they are stored).
            if !is_conflict(&e) {
                for id in &ids {
                    el.answer(id, Err(DbError::Group(format!("report {id} is stored, but counting it failed: {e}"))));
                }
            }
            return Err(e);
        }
    };
    let now = now_ms();
    el.passes.fetch_add(1, Relaxed);
    el.reports.fetch_add(ids.len() as u64, Relaxed);
    el.busy_us.fetch_add(t0.elapsed().as_micros() as u64, Relaxed);
    for &t in &pass.created {
        let lag = (now - t).max(0) as u64;
        el.lag_max_ms.fetch_max(lag, Relaxed);
        el.lag_sum_ms.fetch_add(lag, Relaxed);
    }
    if pass.moved {
        el.epoch.fetch_add(1, std::sync::atomic::Ordering::Release);
    }
    for (id, counted) in pass.counted {
        el.answer(&id, Ok(counted));
    }
    Ok(ids.len())
}

/// Claims the oldest uncounted reports in `tx`, counts them and commits
/// (or rolls back where none was claimed). The claimed ids, and the pass
/// or why it failed after the claim (their waiters are told).
async fn claim_and_count(
    mut tx: sqlx::Transaction<'_, Any>,
    backend: Backend,
    policy: &VotePolicy,
    el: &Elector,
) -> Result<(Vec<String>, Result<Pass>)> {
    let (ids, first, last) = claim(&mut tx, pass_max(backend)).await?;
    if ids.is_empty() {
        tx.rollback().await?;
        return Ok((ids, Ok(Pass::default())));
    }
    let claimed = &ids;
    let outcome = async move {
        let c = count(&mut tx, claimed, first, last, policy, el).await?;
        counted_sql(&tx, claimed, first, last).query()?.execute(&mut *tx).await?;
        tx.commit().await?;
        Ok::<_, DbError>(c)
    }
    .await;
    Ok((ids, outcome))
}

/// Answers the waiters whose stored reports another server's elector
/// counted: the winners standing now, and "changed" (this server cannot
/// tell, and forgetting its cache costs only lookups).
async fn settle_elsewhere(pool: &Pool<Any>, el: &Elector) -> Result<()> {
    let stored: Vec<(String, KernelKind, String, DeviceKeys)> = el
        .waiters()
        .iter()
        .filter_map(|(id, w)| w.stored.as_ref().map(|(k, s, keys)| (id.clone(), k.clone(), s.clone(), keys.clone())))
        .collect();
    if stored.is_empty() {
        return Ok(());
    }
    let mut conn = pool.acquire().await?;
    let ids: Vec<String> = stored.iter().map(|s| s.0.clone()).collect();
    let mut left: HashSet<String> = HashSet::new();
    // In lists of the size the plan test pins (a long list of ids made
    // PostgreSQL read the table whole before it had statistics).
    for chunk in ids.chunks(LEFT_CHUNK) {
        for r in left_sql(&conn, chunk).query()?.fetch_all(&mut *conn).await? {
            left.insert(r.try_get("report_id")?);
        }
    }
    for (id, kind, space, keys) in stored.iter().filter(|s| !left.contains(&s.0)) {
        let ats: Vec<At> = Level::STORED.iter().map(|&l| At::new(kind, space, l, keys)).collect();
        let winners = standing(&mut conn, &ats).await?.into_iter().flatten().collect();
        el.answer(id, Ok(Counted { winners, seats_changed: true }));
    }
    Ok(())
}

/// The claim of a pass: the oldest uncounted reports, `limit` at most,
/// with their times; PostgreSQL locks them and skips those another
/// elector holds.
pub(crate) fn claim_sql(conn: &AnyConnection, limit: usize) -> Sql {
    let mut q = Sql::new(conn, "SELECT report_id, created_at FROM uncounted ORDER BY created_at, report_id LIMIT ");
    q.bind(limit as i64);
    if q.pg {
        q.push(" FOR UPDATE SKIP LOCKED");
    }
    q
}

/// The claimed reports (`ids`, made from `first` to `last` ms) leave
/// `uncounted`. The time bounds let the engine seek the claim's stretch
/// of the time index even before it has statistics (with a list of ids
/// alone, PostgreSQL read a backlog of 66,667 rows whole).
pub(crate) fn counted_sql(conn: &AnyConnection, ids: &[String], first: i64, last: i64) -> Sql {
    let mut q = Sql::new(conn, "DELETE FROM uncounted WHERE created_at >= ");
    q.bind(first).push(" AND created_at <= ").bind(last).push(" AND report_id IN (");
    q.list(ids.iter().cloned()).push(")");
    q
}

async fn claim(conn: &mut AnyConnection, limit: usize) -> Result<(Vec<String>, i64, i64)> {
    let rows = claim_sql(conn, limit).query()?.fetch_all(&mut *conn).await?;
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    let mut ids = Vec::with_capacity(rows.len());
    for r in &rows {
        let t: i64 = r.try_get("created_at")?;
        (first, last) = (first.min(t), last.max(t));
        ids.push(r.try_get("report_id")?);
    }
    Ok((ids, first, last))
}

/// The claimed reports (`ids`, made from `first` to `last` ms) and their
/// measurements, a row per measurement: reached from their `uncounted`
/// rows, whose time bounds make the engine start from the claim's few
/// rows and seek the reports and measurements by key (with a list of ids
/// alone, PostgreSQL read a million measurements whole before it had
/// statistics).
pub(crate) fn uncounted_sql(conn: &AnyConnection, ids: &[String], first: i64, last: i64) -> Sql {
    let mut q = Sql::new(
        conn,
        "SELECT r.id, r.session_id, r.op, r.shape, r.target, r.space_checksum, r.device_key, r.arch_key, r.vendor_key, r.rho, \
         r.created_at, m.kernel_sha256, m.weight, m.median_us \
         FROM uncounted u JOIN reports r ON r.id = u.report_id JOIN measurements m ON m.report_id = u.report_id \
         WHERE u.created_at >= ",
    );
    q.bind(first).push(" AND u.created_at <= ").bind(last).push(" AND u.report_id IN (");
    q.list(ids.iter().cloned()).push(")");
    q
}

/// Which of `ids` are still uncounted (a few at a time: see
/// [`settle_elsewhere`]).
pub(crate) fn left_sql(conn: &AnyConnection, ids: &[String]) -> Sql {
    let mut q = Sql::new(conn, "SELECT report_id FROM uncounted WHERE report_id IN (");
    q.list(ids.iter().cloned()).push(")");
    q
}

/// A stored report being counted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Uncounted {
    pub id: String,
    pub session: String,
    pub kind: KernelKind,
    pub space: String,
    pub keys: DeviceKeys,
    pub created_at: i64,
    /// Its positive-weight votes: (kernel, weight, median µs).
    pub votes: Vec<(String, i64, f64)>,
}

/// What one pass did.
#[derive(Default)]
struct Pass {
    /// Each report's count, by id.
    counted: Vec<(String, Counted)>,
    /// When the counted reports were made.
    created: Vec<i64>,
    /// A seat changed, or a key has none.
    moved: bool,
}

/// Counts the claimed reports `ids`: those this process's writer committed
/// from what it kept of them ([`Elector::committed`]), the others read back
/// from their rows.
async fn count(conn: &mut AnyConnection, ids: &[String], first: i64, last: i64, policy: &VotePolicy, el: &Elector) -> Result<Pass> {
    let mut known = el.take_recent(ids);
    let missing: Vec<String> = ids.iter().zip(&known).filter(|(_, k)| k.is_none()).map(|(id, _)| id.clone()).collect();
    let read = if missing.is_empty() { Vec::new() } else { read_uncounted(conn, &missing, first, last).await? };
    // In the claim's order, whichever way each was found.
    let mut read: HashMap<String, Uncounted> = read.into_iter().map(|u| (u.id.clone(), u)).collect();
    let reports: Vec<Uncounted> = ids.iter().zip(known.iter_mut()).filter_map(|(id, k)| k.take().or_else(|| read.remove(id))).collect();
    count_reports(conn, reports, policy).await
}

/// The uncounted reports `ids` (made from `first` to `last` ms) read back
/// from their rows ([`uncounted_sql`]).
async fn read_uncounted(conn: &mut AnyConnection, ids: &[String], first: i64, last: i64) -> Result<Vec<Uncounted>> {
    let mut read: Vec<Uncounted> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for r in uncounted_sql(conn, ids, first, last).query()?.fetch_all(&mut *conn).await? {
        let id: String = r.try_get("id")?;
        let i = match at.get(&id) {
            Some(&i) => i,
            None => {
                at.insert(id.clone(), read.len());
                read.push(uncounted(&r, id)?);
                read.len() - 1
            }
        };
        let weight: i64 = r.try_get("weight")?;
        if weight > 0 {
            read[i].votes.push((r.try_get("kernel_sha256")?, weight, r.try_get("median_us")?));
        }
    }
    Ok(read)
}

fn uncounted(r: &sqlx::any::AnyRow, id: String) -> Result<Uncounted> {
    Ok(Uncounted {
        id,
        session: r.try_get("session_id")?,
        kind: KernelKind { op: r.try_get("op")?, shape: r.try_get("shape")?, target: r.try_get("target")? },
        space: r.try_get("space_checksum")?,
        keys: DeviceKeys {
            device_key: r.try_get("device_key")?,
            arch_key: r.try_get("arch_key")?,
            vendor_key: r.try_get("vendor_key")?,
            rho: r.try_get("rho")?,
        },
        created_at: r.try_get("created_at")?,
        votes: Vec::new(),
    })
}

async fn count_reports(conn: &mut AnyConnection, reports: Vec<Uncounted>, policy: &VotePolicy) -> Result<Pass> {
    // Everything from here reads or writes what belongs to the reports'
    // keys: ballots, tallies, flags read by elections, winners.
    let mut locks: Vec<(&KernelKind, Level, &str)> = Vec::new();
    for u in &reports {
        for level in Level::STORED {
            locks.push((&u.kind, level, u.keys.key(level).unwrap_or_default()));
        }
    }
    lock_keys(conn, &locks).await?;
    let mut by_space: BTreeMap<(&KernelKind, &str), Vec<&Uncounted>> = BTreeMap::new();
    for u in &reports {
        by_space.entry((&u.kind, u.space.as_str())).or_default().push(u);
    }
    for ((kind, space), batch) in &by_space {
        cast_ballots(conn, kind, space, batch).await?;
    }
    let mut by_kind: BTreeMap<&KernelKind, Vec<At>> = BTreeMap::new();
    for u in &reports {
        let ats = by_kind.entry(&u.kind).or_default();
        for level in Level::STORED {
            let at = At::new(&u.kind, &u.space, level, &u.keys);
            if !ats.iter().any(|x| x.same(&at)) {
                ats.push(at);
            }
        }
    }
    let now = now_ms();
    let mut elected: Vec<(At, Elected)> = Vec::new();
    for (_, ats) in by_kind {
        let winners = elect_levels(conn, &ats, policy, now).await?;
        elected.extend(ats.into_iter().zip(winners));
    }
    let moved = elected.iter().any(|(_, e)| e.seat_changed || e.winner.is_none());
    let mut counted = Vec::with_capacity(reports.len());
    for u in &reports {
        let mine: Vec<&Elected> = Level::STORED
            .iter()
            .filter_map(|&level| {
                let at = At::new(&u.kind, &u.space, level, &u.keys);
                elected.iter().find(|(x, _)| x.same(&at)).map(|(_, e)| e)
            })
            .collect();
        let winners = mine.iter().filter_map(|e| e.winner.clone()).collect();
        counted.push((u.id.clone(), Counted { winners, seats_changed: mine.iter().any(|e| e.seat_changed) }));
    }
    Ok(Pass { counted, created: reports.iter().map(|u| u.created_at).collect(), moved })
}

/// Makes each report of `batch` (one kind, one space) its session's
/// ballot at its three keys, except where the session already has a
/// later one (by time, then report id: the order the migration used),
/// or the batch holds a later report of the session: the old ballot's
/// weights and session leave the tallies, the new ones enter, as one net
/// change per tally row.
async fn cast_ballots(conn: &mut AnyConnection, kind: &KernelKind, space: &str, batch: &[&Uncounted]) -> Result<()> {
    // The latest report of each session in the batch (with votes) holds
    // its ballot at all three keys.
    let mut fresh: BTreeMap<&str, &Uncounted> = BTreeMap::new();
    for u in batch.iter().filter(|u| !u.votes.is_empty()) {
        let e = fresh.entry(u.session.as_str()).or_insert(u);
        if (u.created_at, u.id.as_str()) > (e.created_at, e.id.as_str()) {
            *e = u;
        }
    }
    if fresh.is_empty() {
        return Ok(());
    }
    let sessions: Vec<&str> = fresh.keys().copied().collect();
    let old = session_ballots_sql(conn, SESSION_BALLOTS, kind, space, &sessions).query()?.fetch_all(&mut *conn).await?;
    // Sessions whose stored ballot is later than the batch's (a report
    // made earlier but counted later, or clocks of servers that differ)
    // keep it.
    let mut keep: HashSet<String> = HashSet::new();
    for r in &old {
        let (t, rid): (i64, String) = (r.try_get("created_at")?, r.try_get("report_id")?);
        let session: String = r.try_get("session_id")?;
        let u = fresh[session.as_str()];
        if (t, rid.as_str()) > (u.created_at, u.id.as_str()) {
            keep.insert(session);
        }
    }
    // (level, level key, kernel) -> (votes, sessions) to add.
    let mut delta: BTreeMap<(String, String, String), (i64, i64)> = BTreeMap::new();
    for r in &old {
        if keep.contains(&r.try_get::<String, _>("session_id")?) {
            continue;
        }
        // A ballot counts at each of the keys it carries.
        let (kernel, weight): (String, i64) = (r.try_get("kernel_sha256")?, r.try_get("weight")?);
        for (level, column) in [(Level::Device, "device_key"), (Level::Arch, "arch_key"), (Level::Vendor, "vendor_key")] {
            let d = delta.entry((level.name().to_string(), r.try_get(column)?, kernel.clone())).or_default();
            d.0 -= weight;
            d.1 -= 1;
        }
    }
    let replaced: Vec<&Uncounted> = fresh.iter().filter(|(s, _)| !keep.contains(**s)).map(|(_, u)| *u).collect();
    if replaced.is_empty() {
        return Ok(());
    }
    let gone: Vec<&str> = replaced.iter().map(|u| u.session.as_str()).collect();
    session_ballots_sql(conn, "DELETE", kind, space, &gone).query()?.execute(&mut *conn).await?;
    // The new ballots are built by the database from the rows the reports
    // stored (a row per positive vote, carrying the three keys it counts
    // at), not sent back to it: a statement binding every value took 30 µs
    // a ballot.
    for u in &replaced {
        for level in Level::STORED {
            let key = u.keys.key(level).unwrap_or_default();
            for (kernel, weight, _) in &u.votes {
                let d = delta.entry((level.name().to_string(), key.to_string(), kernel.clone())).or_default();
                d.0 += weight;
                d.1 += 1;
            }
        }
    }
    let ids: Vec<String> = replaced.iter().map(|u| u.id.clone()).collect();
    let first = replaced.iter().map(|u| u.created_at).min().unwrap_or_default();
    let last = replaced.iter().map(|u| u.created_at).max().unwrap_or_default();
    let mut q = cast_sql(conn, &ids, first, last);
    q.query()?.execute(&mut *conn).await?;
    let delta: Vec<_> = delta.into_iter().filter(|(_, d)| *d != (0, 0)).collect();
    if delta.is_empty() {
        return Ok(());
    }
    let mut q =
        Sql::new(conn, "INSERT INTO tallies (op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, sessions) VALUES ");
    for ((level, key, kernel), (votes, sessions)) in delta {
        q.row().list([kind.op.clone(), kind.shape.clone(), kind.target.clone(), space.to_string(), level, key, kernel]);
        q.push(", ").bind(votes).push(", ").bind(sessions).push(")");
    }
    q.push(
        " ON CONFLICT (op, shape, target, space_checksum, level, level_key, kernel_sha256) \
         DO UPDATE SET votes = tallies.votes + excluded.votes, sessions = tallies.sessions + excluded.sessions",
    );
    q.query()?.execute(&mut *conn).await?;
    Ok(())
}

/// The columns of a session's stored ballot that replacing it reads.
pub(crate) const SESSION_BALLOTS: &str =
    "SELECT session_id, kernel_sha256, weight, created_at, report_id, device_key, arch_key, vendor_key";

/// The ballots of the claimed reports `ids` (made from `first` to `last`
/// ms), built from their rows: one per positive vote with the report's
/// three keys (migration 0009), reached from `uncounted` as
/// [`uncounted_sql`] reaches them.
pub(crate) fn cast_sql(conn: &AnyConnection, ids: &[String], first: i64, last: i64) -> Sql {
    let mut q = Sql::new(
        conn,
        "INSERT INTO ballots (session_id, op, shape, target, space_checksum, kernel_sha256, device_key, arch_key, vendor_key, \
         report_id, created_at, weight, median_us) \
         SELECT r.session_id, r.op, r.shape, r.target, r.space_checksum, m.kernel_sha256, r.device_key, r.arch_key, r.vendor_key, \
         r.id, r.created_at, m.weight, m.median_us \
         FROM uncounted u JOIN reports r ON r.id = u.report_id JOIN measurements m ON m.report_id = u.report_id \
         WHERE m.weight > 0 AND u.created_at >= ",
    );
    q.bind(first).push(" AND u.created_at <= ").bind(last).push(" AND u.report_id IN (");
    q.list(ids.iter().cloned()).push(")");
    q
}

/// The winners standing at `ats` (one kind) in each one's own space, by
/// at: what a report stored but not yet counted is answered with.
pub(crate) fn standing_sql(conn: &AnyConnection, ats: &[At<'_>]) -> Sql {
    let kind = ats[0].kind;
    let mut q = Sql::new(
        conn,
        "SELECT op, shape, target, level, level_key, space_checksum, kernel_sha256, votes, total_votes, reports, best_median_us, \
         updated_at FROM winners WHERE op = ",
    );
    q.bind(kind.op.clone()).push(" AND shape = ").bind(kind.shape.clone()).push(" AND target = ").bind(kind.target.clone());
    q.push(" AND ").keys(ats, true);
    q
}

pub(crate) async fn standing(conn: &mut AnyConnection, ats: &[At<'_>]) -> Result<Vec<Option<Winner>>> {
    if ats.is_empty() {
        return Ok(Vec::new());
    }
    let rows = standing_sql(conn, ats).query()?.fetch_all(&mut *conn).await?;
    let mut out = vec![None; ats.len()];
    for r in &rows {
        let w = crate::winners::winner_row(r, ats[0].kind.clone())?;
        if let Some(i) = ats.iter().position(|a| a.level == w.level && a.key == w.level_key && a.space == w.space_checksum) {
            out[i] = Some(w);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, NewKernel, NewMeasurement, NewReport, random_id, sha256_hex};

    /// What the writer hands a pass for a report it committed is exactly
    /// what the pass would read back from the report's rows, a vote whose
    /// output check failed (weight 0, and a flag) included; and a pass
    /// that counted them leaves nothing behind.
    #[tokio::test]
    async fn committed_reports_are_what_their_rows_read_back() {
        let dir = std::env::temp_dir().join(format!("webtune-kdb-{}", random_id().unwrap()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::connect(&format!("sqlite://{}", dir.join("t.sqlite").display())).await.unwrap();
        let kind = KernelKind { op: "matmul".into(), shape: "64,64,64".into(), target: "wasm".into() };
        let mut shas = Vec::new();
        for n in 0..3u8 {
            let bytes = vec![0, 97, 115, 109, n];
            let sha = sha256_hex(&bytes);
            let k = NewKernel { sha256: sha.clone(), kind: kind.clone(), schedule_json: "{}".into(), meta_json: "{}".into(), bytes };
            db.put_kernel(&k).await.unwrap();
            shas.push(sha);
        }
        let keys = DeviceKeys { device_key: "d".into(), arch_key: "a".into(), vendor_key: "v".into(), rho: "101".into() };
        let fp = db.upsert_device("{}", &keys).await.unwrap();
        let held = db.hold_elections().await;
        let mut ids = Vec::new();
        for s in 0..2 {
            let session = db.create_session(&fp, &keys).await.unwrap().id;
            let entries = shas
                .iter()
                .enumerate()
                .map(|(i, sha)| NewMeasurement {
                    kernel_sha256: sha.clone(),
                    ticket: format!("t{s}-{i}"),
                    median_us: 100.25 + i as f64 / 3.0,
                    runs: 10,
                    output_ok: i != 1,
                })
                .collect();
            let report = NewReport { session_id: session, kind: kind.clone(), space_checksum: "space".into(), entries };
            ids.push(db.store_report(&report, &keys, &VotePolicy::default()).await.unwrap().report_id);
        }
        let mut kept = db.elector.take_recent(&ids);
        assert!(kept.iter().all(Option::is_some), "the writer kept both reports");
        let mut conn = db.pool.acquire().await.unwrap();
        let read = read_uncounted(&mut conn, &ids, 0, i64::MAX).await.unwrap();
        assert_eq!(read.len(), 2);
        for u in read {
            let mut k = kept.iter_mut().find_map(|k| k.take_if(|k| k.id == u.id)).expect("kept");
            let mut u = u;
            k.votes.sort_by(|a, b| a.0.cmp(&b.0));
            u.votes.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(k.votes.len(), 2, "the vote whose check failed weighs nothing");
            assert_eq!(k, u);
        }
        // Counted from the rows now (the cache was emptied above), and
        // nothing is left for a pass to find.
        drop(held);
        db.flush_elections().await.unwrap();
        assert!(db.elector.recent.lock().unwrap().is_empty());
        assert!(db.elector.take_recent(&ids).iter().all(Option::is_none));
        std::fs::remove_dir_all(&dir).ok();
    }
}
