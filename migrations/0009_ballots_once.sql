-- 0009: a session's ballot is stored once, not once per level (issue 39).
--
-- `ballots` held each session's latest report at each of its three keys
-- (device, arch, vendor): the same kernels, weights and times three times
-- over, since a session's keys never change (reports copy them from its
-- row). Counting a report wrote fifteen ballots of a top 5 and thirty
-- index entries; the ballots were 77% of a SQLite file's bytes. Now one
-- row per session, kind, space and kernel carries the three keys, an
-- index per level finds a kernel's latest ballots at a key (elections'
-- times and duels), and `tallies` stay per level and key. So a ballot is
-- a session's latest report (with a positive vote) of its kind and space,
-- as the rules say (docs/service.md, "Votes"); it counts at each of the
-- three keys it carries.
--
-- The rows come from the old table's device level, whose key is the
-- session's device key, with the session's arch and vendor keys; a
-- session's rows at more than one device key (never written by webtune:
-- a session has one key) keep only its latest report's. The tallies are
-- then summed again from the new rows, so they are their sums whatever
-- the old ones held. Winners are unchanged.
ALTER TABLE ballots RENAME TO ballots_0008;

CREATE TABLE ballots (
    op             TEXT NOT NULL,
    shape          TEXT NOT NULL,
    target         TEXT NOT NULL,
    space_checksum TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    kernel_sha256  TEXT NOT NULL,
    device_key     TEXT NOT NULL,
    arch_key       TEXT NOT NULL,
    vendor_key     TEXT NOT NULL,
    report_id      TEXT NOT NULL,             -- the session's latest report of this kind and space
    created_at     BIGINT NOT NULL,           -- that report's time (ms)
    weight         BIGINT NOT NULL,
    median_us      DOUBLE PRECISION NOT NULL,
    -- Led by the session: a report replaces its session's ballot.
    CONSTRAINT ballots_by_session PRIMARY KEY (session_id, op, shape, target, space_checksum, kernel_sha256)
);

INSERT INTO ballots (op, shape, target, space_checksum, session_id, kernel_sha256, device_key, arch_key, vendor_key, report_id,
                     created_at, weight, median_us)
SELECT b.op, b.shape, b.target, b.space_checksum, b.session_id, b.kernel_sha256, b.level_key, s.arch_key, s.vendor_key, b.report_id,
       b.created_at, b.weight, b.median_us
FROM ballots_0008 b JOIN sessions s ON s.id = b.session_id
WHERE b.level = 'device' AND NOT EXISTS (
    SELECT 1 FROM ballots_0008 l WHERE l.session_id = b.session_id AND l.op = b.op AND l.shape = b.shape AND l.target = b.target
      AND l.space_checksum = b.space_checksum AND l.level = 'device'
      AND (l.created_at > b.created_at OR (l.created_at = b.created_at AND l.report_id > b.report_id)));

DROP TABLE ballots_0008;

-- A kernel's latest ballots at a key, one index per level: the key first,
-- so that the statements by session (which name no key) can seek only the
-- primary key, with or without statistics (see 0007); every column before
-- `created_at` is an equality in an election.
CREATE INDEX ballots_at_device ON ballots (device_key, kernel_sha256, op, shape, target, space_checksum, created_at, report_id);
CREATE INDEX ballots_at_arch ON ballots (arch_key, kernel_sha256, op, shape, target, space_checksum, created_at, report_id);
CREATE INDEX ballots_at_vendor ON ballots (vendor_key, kernel_sha256, op, shape, target, space_checksum, created_at, report_id);

-- The ballots as they count at each level: what `ballots` held before
-- this migration. Read by tests and audits, never on the report path.
CREATE VIEW ballot_levels AS
    SELECT op, shape, target, space_checksum, 'device' AS level, device_key AS level_key, session_id, kernel_sha256, report_id,
           created_at, weight, median_us FROM ballots
    UNION ALL
    SELECT op, shape, target, space_checksum, 'arch', arch_key, session_id, kernel_sha256, report_id, created_at, weight, median_us
    FROM ballots
    UNION ALL
    SELECT op, shape, target, space_checksum, 'vendor', vendor_key, session_id, kernel_sha256, report_id, created_at, weight, median_us
    FROM ballots;

DELETE FROM tallies;
INSERT INTO tallies (op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, sessions)
SELECT op, shape, target, space_checksum, level, level_key, kernel_sha256, SUM(weight), COUNT(*)
FROM ballot_levels GROUP BY op, shape, target, space_checksum, level, level_key, kernel_sha256;

-- Nothing reads reports by architecture or vendor any more (elections
-- read the running tallies since 0005): two index entries fewer a report.
DROP INDEX reports_by_arch;
DROP INDEX reports_by_vendor;
