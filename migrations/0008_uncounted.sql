-- 0008: elections off the report's path (issue 39).
--
-- A report's transaction stores its report, measurements and flags, and
-- one row here: the report is stored but its votes are not yet in the
-- running tallies (`ballots`, `tallies`) nor its keys re-elected. Each
-- server's elector takes the oldest rows (on PostgreSQL `FOR UPDATE SKIP
-- LOCKED`, so electors of several servers take different reports), casts
-- their ballots, re-elects every key they touch once, and deletes the rows,
-- all in one transaction: a report is counted exactly once, and a crash
-- before that transaction commits leaves its row for the next pass. Once
-- this table is empty, the tallies and winners are what counting every
-- report at once gives. Rows are only ever inserted and deleted.
CREATE TABLE uncounted (
    report_id  TEXT PRIMARY KEY REFERENCES reports (id),
    created_at BIGINT NOT NULL
);
-- The electors take the oldest first.
CREATE INDEX uncounted_by_time ON uncounted (created_at, report_id);
