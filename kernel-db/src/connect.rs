//! Connecting: database URLs, the pool, embedded migrations, and the few
//! statements about the database itself (settings, health); on SQLite the
//! checkpointer task ([`start_checkpointer`]).

use std::borrow::Cow;

use sqlx::any::Any;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::pool::{Pool, PoolOptions};
use sqlx::{Executor, Row, SqlSafeStr};

use crate::{Backend, DbError, Result};

/// The migrations, embedded so the binary carries its schema. A version
/// may differ by backend (a database only ever sees one).
fn migrator(backend: Backend) -> Migrator {
    let pg = backend == Backend::Postgres;
    let m = |version: i64, description: &'static str, sql: &'static str| {
        Migration::new(version, Cow::Borrowed(description), MigrationType::Simple, sql.into_sql_str(), false)
    };
    Migrator {
        migrations: Cow::Owned(vec![
            m(1, "kernel db", include_str!("../../migrations/0001_kernel_db.sql")),
            m(2, "robust votes", include_str!("../../migrations/0002_robust_votes.sql")),
            m(3, "model latency", include_str!("../../migrations/0003_model_latency.sql")),
            m(4, "flag tickets", include_str!("../../migrations/0004_flag_tickets.sql")),
            m(5, "running tallies", include_str!("../../migrations/0005_running_tallies.sql")),
            m(6, "retention", include_str!("../../migrations/0006_retention.sql")),
            m(7, "report path indexes", include_str!("../../migrations/0007_report_path_indexes.sql")),
            m(8, "uncounted", include_str!("../../migrations/0008_uncounted.sql")),
            m(9, "ballots once", include_str!("../../migrations/0009_ballots_once.sql")),
            m(
                10,
                "no shared row locks",
                if pg {
                    include_str!("../../migrations/0010_no_shared_row_locks.postgres.sql")
                } else {
                    include_str!("../../migrations/0010_no_shared_row_locks.sqlite.sql")
                },
            ),
        ]),
        ..Migrator::DEFAULT
    }
}

/// For tests of upgrades: opens the database at `url` (for SQLite creates
/// it) and applies the migrations up to `version` only, as an older
/// webtune would have left it; a pool on it, with no writer or elector.
/// A later [`Db::connect`] applies the rest.
#[doc(hidden)]
pub async fn migrate_to(url: &str, version: i64) -> Result<Pool<Any>> {
    sqlx::any::install_default_drivers();
    let (backend, url) = normalise_url(url)?;
    let pool = PoolOptions::<Any>::new().max_connections(1).connect(&url).await?;
    let all = migrator(backend);
    let migrator = Migrator { migrations: Cow::Owned(all.migrations.iter().filter(|m| m.version <= version).cloned().collect()), ..all };
    migrator.run(&pool).await?;
    Ok(pool)
}

/// Normalises a database URL: a bare path means a SQLite file, created if
/// missing.
fn normalise_url(url: &str) -> Result<(Backend, String)> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok((Backend::Postgres, url.to_string()));
    }
    let path = if let Some(rest) = url.strip_prefix("sqlite://") {
        rest
    } else if let Some(rest) = url.strip_prefix("sqlite:") {
        rest
    } else if url.contains("://") {
        return Err(DbError::BadUrl(url.to_string()));
    } else {
        url
    };
    if path.is_empty() {
        return Err(DbError::BadUrl(url.to_string()));
    }
    let sep = if path.contains('?') { '&' } else { '?' };
    let url = if path.contains("mode=") { format!("sqlite://{path}") } else { format!("sqlite://{path}{sep}mode=rwc") };
    Ok((Backend::Sqlite, url))
}

/// SQLite: the log's size, in pages (80 MB), past which a commit copies it
/// into the database file itself; see [`start_checkpointer`].
const WAL_BACKSTOP: &str = "PRAGMA wal_autocheckpoint = 20000";

/// SQLite: how often the checkpointer copies the log into the file.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// SQLite: copies the write-ahead log into the database file every
/// [`CHECKPOINT_EVERY`] on a pooled connection of its own (a passive
/// checkpoint: it waits for no reader or writer, and the writer goes on
/// meanwhile), so that the one writer's commits no longer stop for it
/// (at SQLite's default of 1,000 pages, the commit that crosses it does
/// that work, copying the pages and syncing the file, while every report
/// waits behind it). The
/// commits stay durable as before: each syncs the log (`synchronous =
/// FULL`), and a checkpoint syncs the file before the log may be reused.
/// Ends once the [`Db`] (its elector) is dropped or the pool closed.
fn start_checkpointer(pool: Pool<Any>, alive: std::sync::Weak<crate::elector::Elector>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(CHECKPOINT_EVERY).await;
            if alive.upgrade().is_none() || pool.is_closed() {
                break;
            }
            // A failure (the file busy, a closed pool) leaves the log to
            // the next try, or to the backstop.
            let _ = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").fetch_all(&pool).await;
        }
    });
}

/// SQLite: the page cache of the one connection the writers' lock writes
/// through ([`WriteConn`]), in KiB (SQLite's default is 2,000).
const WRITE_CACHE_KIB: i64 = 65_536;

/// The statements every SQLite connection starts with: readers wait for
/// the single writer instead of failing; references are checked; every
/// commit syncs the log (`synchronous = FULL`, see the crate's
/// invariants); the log is copied into the file by the checkpointer task,
/// beside the writer, and a commit checkpoints itself only past
/// [`WAL_BACKSTOP`]'s pages (80 MB), should that task fall behind.
async fn sqlite_pragmas(conn: &mut sqlx::AnyConnection) -> std::result::Result<(), sqlx::Error> {
    conn.execute("PRAGMA busy_timeout = 10000").await?;
    conn.execute("PRAGMA foreign_keys = ON").await?;
    conn.execute("PRAGMA synchronous = FULL").await?;
    conn.execute(WAL_BACKSTOP).await?;
    Ok(())
}

/// What the writers' lock of a [`Db`] guards. On SQLite, besides the
/// file's one writer, the one connection that the holders of the lock
/// write reports and elections through (the report writer's groups and
/// the elector's passes, which alternate under the lock).
///
/// One connection, not one from the pool each time: SQLite drops a
/// connection's whole page cache when it begins a transaction after
/// another connection committed, so a writer and an elector that took
/// pooled connections in turn (the pool hands them out in rotation) read
/// every page they touched back through the operating system in each
/// transaction. Kept out of the pool, this one sees only its own commits
/// and keeps its pages, in a cache of [`WRITE_CACHE_KIB`].
///
/// Its commits are synchronous (`synchronous = FULL`) but while an
/// elector's pass runs ([`WriteConn::unsynced`]); every report's
/// transaction takes it through [`WriteConn::synced`], which makes it
/// synchronous again first and fails rather than commit otherwise.
/// Sessions commit through it too ([`Db::open_session`]); other writes
/// under the lock (kernels, imports, compaction) still use the pool.
/// PostgreSQL: nothing (its writers use the pool).
#[derive(Debug, Default)]
pub(crate) struct WriteConn {
    /// The SQLite URL; empty on PostgreSQL.
    url: String,
    conn: Option<sqlx::AnyConnection>,
    /// Whether `conn` is known to be at `synchronous = FULL`.
    full: bool,
    /// [`Db::close`] closed it: it is not opened again.
    closed: bool,
}

impl WriteConn {
    /// The connection, opened first where it is not (or was lost), for a
    /// statement outside a transaction that writes nothing.
    pub(crate) async fn open(&mut self) -> Result<&mut sqlx::AnyConnection> {
        if self.closed {
            return Err(DbError::Group("the database is closed".into()));
        }
        if self.conn.is_none() {
            debug_assert!(!self.url.is_empty(), "a write connection on SQLite only");
            let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&self.url).await?;
            sqlite_pragmas(&mut conn).await?;
            conn.execute(sqlx::AssertSqlSafe(format!("PRAGMA cache_size = -{WRITE_CACHE_KIB}"))).await?;
            self.full = true;
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("opened above"))
    }

    /// The connection at `synchronous = FULL`: what a report's transaction
    /// commits through.
    pub(crate) async fn synced(&mut self) -> Result<&mut sqlx::AnyConnection> {
        self.open().await?;
        if !self.full {
            let conn = self.conn.as_mut().expect("opened above");
            conn.execute("PRAGMA synchronous = FULL").await?;
            self.full = true;
        }
        Ok(self.conn.as_mut().expect("opened above"))
    }

    /// A write transaction (`BEGIN IMMEDIATE`) on the connection at
    /// `synchronous = FULL`: a report group's, or a session's.
    pub(crate) async fn begin(&mut self) -> Result<sqlx::Transaction<'_, sqlx::Any>> {
        Ok(sqlx::Connection::begin_with(self.synced().await?, "BEGIN IMMEDIATE").await?)
    }

    /// The connection at `synchronous = NORMAL`, for an elector's pass: its
    /// commit writes the log without syncing it (the next report's commit
    /// syncs it with everything before). The next [`WriteConn::synced`]
    /// makes it synchronous again.
    pub(crate) async fn unsynced(&mut self) -> Result<&mut sqlx::AnyConnection> {
        self.open().await?;
        self.full = false;
        let conn = self.conn.as_mut().expect("opened above");
        conn.execute("PRAGMA synchronous = NORMAL").await?;
        Ok(conn)
    }

    /// After `e` on the connection: one that failed other than by the
    /// database refusing a statement (its thread gone, an I/O error) is
    /// closed, and the next use opens another.
    pub(crate) fn failed(&mut self, e: &DbError) {
        if !matches!(e, DbError::Sqlx(sqlx::Error::Database(_))) {
            self.conn = None;
        }
    }

    /// For tests: the `synchronous` setting (2 is FULL) that a report's
    /// transaction would commit with now.
    pub(crate) async fn synchronous(&mut self) -> Result<i64> {
        let conn = self.synced().await?;
        Ok(sqlx::query("PRAGMA synchronous").fetch_one(&mut *conn).await?.try_get(0)?)
    }
}

/// The kernel database. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Db {
    pub(crate) pool: Pool<Any>,
    pub(crate) backend: Backend,
    /// Serialises this process's writers (see the crate's invariants); on
    /// SQLite it holds the connection reports and elections write through.
    pub(crate) write: std::sync::Arc<tokio::sync::Mutex<WriteConn>>,
    /// The report writer's queue (group commit, see `reports`).
    pub(crate) reports: tokio::sync::mpsc::Sender<crate::reports::Job>,
    pub(crate) groups: std::sync::Arc<crate::reports::GroupCounters>,
    /// Taken (read) by the flusher around each flush; see
    /// [`Db::hold_acknowledgements`].
    pub(crate) hold: std::sync::Arc<tokio::sync::RwLock<()>>,
    /// Counts stored reports and elects (see `elector`).
    pub(crate) elector: std::sync::Arc<crate::elector::Elector>,
}

impl Db {
    /// Opens (and for SQLite creates) the database at `url` and brings its
    /// schema up to date. `url` is `sqlite://PATH`, a bare path (SQLite), or
    /// `postgres://USER@HOST:PORT/DB`.
    pub async fn connect(url: &str) -> Result<Db> {
        sqlx::any::install_default_drivers();
        let (backend, url) = normalise_url(url)?;
        // No ping before each use: it is a round trip per query (to the
        // connection's thread on SQLite), and a broken connection fails its
        // query anyway.
        let opts = PoolOptions::<Any>::new()
            .max_connections(if backend == Backend::Sqlite { 8 } else { 16.max(crate::reports::pg_writers() as u32 + 8) })
            .test_before_acquire(false);
        let opts = opts.after_connect(|conn, _meta| {
            Box::pin(async move {
                if conn.backend_name().eq_ignore_ascii_case("sqlite") {
                    sqlite_pragmas(conn).await?;
                }
                Ok(())
            })
        });
        let pool = opts.connect(&url).await?;
        if backend == Backend::Sqlite {
            // WAL is a property of the file: set once, it persists.
            sqlx::query("PRAGMA journal_mode = WAL").fetch_all(&pool).await?;
        }
        migrator(backend).run(&pool).await?;
        let write =
            WriteConn { url: if backend == Backend::Sqlite { url.clone() } else { String::new() }, conn: None, full: false, closed: false };
        let write = std::sync::Arc::new(tokio::sync::Mutex::new(write));
        let groups = std::sync::Arc::default();
        let hold = std::sync::Arc::default();
        let elector: std::sync::Arc<crate::elector::Elector> = std::sync::Arc::default();
        let reports = crate::reports::start_writer(
            pool.clone(),
            backend,
            write.clone(),
            std::sync::Arc::clone(&groups),
            std::sync::Arc::clone(&hold),
            std::sync::Arc::clone(&elector),
        );
        crate::elector::start(pool.clone(), backend, write.clone(), std::sync::Arc::downgrade(&elector));
        if backend == Backend::Sqlite {
            start_checkpointer(pool.clone(), std::sync::Arc::downgrade(&elector));
        }
        Ok(Db { pool, backend, write, reports, groups, hold, elector })
    }

    /// For tests of durability: while the returned guard lives, reports on
    /// PostgreSQL are committed but not acknowledged (the flusher waits
    /// before proving them durable), so a test can crash the database in
    /// that window. SQLite acknowledges at commit and ignores it.
    #[doc(hidden)]
    pub async fn hold_acknowledgements(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        std::sync::Arc::clone(&self.hold).write_owned().await
    }

    /// For tests: while the returned guard lives, this handle's elector
    /// task counts nothing (after the pass it may be running), so reports
    /// stay uncounted until [`Db::flush_elections`] or the guard's drop.
    #[doc(hidden)]
    pub async fn hold_elections(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        self.elector.hold().await
    }

    /// For tests: SQLite's `synchronous` setting on the connection that
    /// reports commit through (2: FULL), as the next report would find it.
    #[doc(hidden)]
    pub async fn report_synchronous(&self) -> Result<i64> {
        self.write.lock().await.synchronous().await
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Group commit so far: transactions, the reports they carried, the
    /// largest group, and the time spent inside them.
    pub fn group_stats(&self) -> crate::GroupStats {
        self.groups.read()
    }

    /// Closes the pool, waiting for open connections to finish, and the
    /// writers' connection first (on SQLite the last connection to close
    /// copies the log into the file and removes it).
    pub async fn close(&self) {
        let mut w = self.write.lock().await;
        w.closed = true;
        if let Some(conn) = w.conn.take() {
            let _ = sqlx::Connection::close(conn).await;
        }
        drop(w);
        self.pool.close().await
    }

    /// The value of setting `name`, storing `init` first if it has none.
    /// Every server on one database therefore reads the same value.
    pub async fn setting_or_init(&self, name: &str, init: &str) -> Result<String> {
        let _w = self.write.lock().await;
        sqlx::query("INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
            .bind(name)
            .bind(init)
            .execute(&self.pool)
            .await?;
        let row = sqlx::query("SELECT value FROM settings WHERE name = $1").bind(name).fetch_one(&self.pool).await?;
        Ok(row.try_get("value")?)
    }

    /// PostgreSQL: creates an empty database `name` on the same server (for
    /// test isolation and setup scripts). `name` is letters, digits and `_`.
    pub async fn create_database(&self, name: &str) -> Result<()> {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(DbError::BadUrl(format!("database name `{name}`")));
        }
        // Identifiers cannot be bound as parameters; the name was checked above.
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&self.pool).await?;
        Ok(())
    }

    /// SQLite: the journal mode (`wal` once connected). Other engines: `""`.
    pub async fn journal_mode(&self) -> Result<String> {
        if self.backend != Backend::Sqlite {
            return Ok(String::new());
        }
        let row = sqlx::query("PRAGMA journal_mode").fetch_one(&self.pool).await?;
        Ok(row.try_get::<String, _>(0)?.to_lowercase())
    }

    /// Answers a trivial query: the database is reachable.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1 AS one").fetch_one(&self.pool).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writers' connection commits an elector's pass without a sync
    /// and is synchronous again for the next report's transaction.
    #[tokio::test]
    async fn the_write_connection_is_synchronous_for_reports() {
        let dir = std::env::temp_dir().join(format!("webtune-kdb-{}", crate::random_id().unwrap()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::connect(&format!("sqlite://{}", dir.join("t.sqlite").display())).await.unwrap();
        let mut w = db.write.lock().await;
        async fn read(c: &mut sqlx::AnyConnection) -> i64 {
            sqlx::query("PRAGMA synchronous").fetch_one(c).await.unwrap().try_get(0).unwrap()
        }
        assert_eq!(read(w.synced().await.unwrap()).await, 2, "FULL");
        assert_eq!(read(w.unsynced().await.unwrap()).await, 1, "NORMAL for a pass");
        assert_eq!(read(w.synced().await.unwrap()).await, 2, "FULL again");
        let cache: i64 = sqlx::query("PRAGMA cache_size").fetch_one(w.synced().await.unwrap()).await.unwrap().try_get(0).unwrap();
        assert_eq!(cache, -WRITE_CACHE_KIB);
        drop(w);
        assert_eq!(db.report_synchronous().await.unwrap(), 2);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn urls() {
        assert_eq!(normalise_url("webtune.sqlite").unwrap(), (Backend::Sqlite, "sqlite://webtune.sqlite?mode=rwc".into()));
        assert_eq!(normalise_url("sqlite:///tmp/a.db").unwrap().1, "sqlite:///tmp/a.db?mode=rwc");
        assert_eq!(normalise_url("postgres://u@h/d").unwrap().0, Backend::Postgres);
        assert!(normalise_url("mysql://x").is_err());
    }
}
