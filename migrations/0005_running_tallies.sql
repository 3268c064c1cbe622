-- 0005: running tallies (issue 20).
--
-- An election used to recount every report ever made at its key. Now each
-- report updates two small tables in its own transaction:
--
-- ballots: each session's latest report's votes at each key (one row per
--   kernel with a positive weight), which is what counts: a session's
--   weight is capped at its latest report. Replacing a session's ballot
--   takes its old rows out of the tallies and puts the new ones in.
-- tallies: per key and kernel, the summed weights and the sessions voting.
--
-- `reports` and `measurements` stay the append-only record; both tables
-- below can be rebuilt from them, and are, once, here.
CREATE TABLE ballots (
    op             TEXT NOT NULL,
    shape          TEXT NOT NULL,
    target         TEXT NOT NULL,
    space_checksum TEXT NOT NULL,
    level          TEXT NOT NULL,             -- 'device', 'arch' or 'vendor'
    level_key      TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    kernel_sha256  TEXT NOT NULL,
    report_id      TEXT NOT NULL,             -- the session's latest report at this key
    created_at     BIGINT NOT NULL,           -- that report's time (ms)
    weight         BIGINT NOT NULL,
    median_us      DOUBLE PRECISION NOT NULL,
    -- Led by the session: a report replaces its session's ballots.
    PRIMARY KEY (session_id, op, shape, target, space_checksum, level, level_key, kernel_sha256)
);
-- A kernel's latest ballots at a key: elections read its times from the
-- most recent ones (elect::TIME_WINDOW).
CREATE INDEX ballots_by_time ON ballots (op, shape, target, space_checksum, level, level_key, kernel_sha256, created_at, report_id);

CREATE TABLE tallies (
    op             TEXT NOT NULL,
    shape          TEXT NOT NULL,
    target         TEXT NOT NULL,
    space_checksum TEXT NOT NULL,
    level          TEXT NOT NULL,
    level_key      TEXT NOT NULL,
    kernel_sha256  TEXT NOT NULL,
    votes          BIGINT NOT NULL,           -- summed weights of the sessions' latest reports
    sessions       BIGINT NOT NULL,           -- sessions voting for it (0: none any more)
    PRIMARY KEY (op, shape, target, space_checksum, level, level_key, kernel_sha256)
);

-- Flags are counted per key at every election.
CREATE INDEX flags_by_device ON flags (op, shape, target, device_key);
CREATE INDEX flags_by_arch ON flags (op, shape, target, arch_key);
CREATE INDEX flags_by_vendor ON flags (op, shape, target, vendor_key);

-- The ballots of the history so far: per session and key, the latest report
-- (by time, then id) with a positive weight.
INSERT INTO ballots (op, shape, target, space_checksum, level, level_key, session_id, kernel_sha256, report_id, created_at, weight, median_us)
SELECT r.op, r.shape, r.target, r.space_checksum, 'device', r.device_key, r.session_id, m.kernel_sha256, r.id, r.created_at, m.weight, m.median_us
FROM reports r JOIN measurements m ON m.report_id = r.id
WHERE m.weight > 0 AND r.id = (
    SELECT r2.id FROM reports r2 WHERE r2.session_id = r.session_id AND r2.op = r.op AND r2.shape = r.shape
      AND r2.target = r.target AND r2.space_checksum = r.space_checksum AND r2.device_key = r.device_key
      AND EXISTS (SELECT 1 FROM measurements m2 WHERE m2.report_id = r2.id AND m2.weight > 0)
    ORDER BY r2.created_at DESC, r2.id DESC LIMIT 1);
INSERT INTO ballots (op, shape, target, space_checksum, level, level_key, session_id, kernel_sha256, report_id, created_at, weight, median_us)
SELECT r.op, r.shape, r.target, r.space_checksum, 'arch', r.arch_key, r.session_id, m.kernel_sha256, r.id, r.created_at, m.weight, m.median_us
FROM reports r JOIN measurements m ON m.report_id = r.id
WHERE m.weight > 0 AND r.id = (
    SELECT r2.id FROM reports r2 WHERE r2.session_id = r.session_id AND r2.op = r.op AND r2.shape = r.shape
      AND r2.target = r.target AND r2.space_checksum = r.space_checksum AND r2.arch_key = r.arch_key
      AND EXISTS (SELECT 1 FROM measurements m2 WHERE m2.report_id = r2.id AND m2.weight > 0)
    ORDER BY r2.created_at DESC, r2.id DESC LIMIT 1);
INSERT INTO ballots (op, shape, target, space_checksum, level, level_key, session_id, kernel_sha256, report_id, created_at, weight, median_us)
SELECT r.op, r.shape, r.target, r.space_checksum, 'vendor', r.vendor_key, r.session_id, m.kernel_sha256, r.id, r.created_at, m.weight, m.median_us
FROM reports r JOIN measurements m ON m.report_id = r.id
WHERE m.weight > 0 AND r.id = (
    SELECT r2.id FROM reports r2 WHERE r2.session_id = r.session_id AND r2.op = r.op AND r2.shape = r.shape
      AND r2.target = r.target AND r2.space_checksum = r.space_checksum AND r2.vendor_key = r.vendor_key
      AND EXISTS (SELECT 1 FROM measurements m2 WHERE m2.report_id = r2.id AND m2.weight > 0)
    ORDER BY r2.created_at DESC, r2.id DESC LIMIT 1);

INSERT INTO tallies (op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, sessions)
SELECT op, shape, target, space_checksum, level, level_key, kernel_sha256, SUM(weight), COUNT(*)
FROM ballots GROUP BY op, shape, target, space_checksum, level, level_key, kernel_sha256;
