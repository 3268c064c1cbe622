-- The running tallies recounted from the raw history (`RECOUNT_SQL`): what
-- counting every stored report at once gives. Tests compare it with what
-- the elector's passes built one report at a time; it replaces both
-- tables, so it is for a test's or an audit's copy of a database (reports
-- folded away by `webtune db compact` are no longer there to recount).
--
-- A session's ballot is its latest report (by time, then id) of a kind and
-- space with a positive vote, one row per kernel it ranked; it counts at
-- its device, arch and vendor keys (`ballot_levels`).
DELETE FROM ballots;
DELETE FROM tallies;
INSERT INTO ballots (op, shape, target, space_checksum, session_id, kernel_sha256, device_key, arch_key, vendor_key, report_id,
                     created_at, weight, median_us)
SELECT r.op, r.shape, r.target, r.space_checksum, r.session_id, m.kernel_sha256, r.device_key, r.arch_key, r.vendor_key, r.id,
       r.created_at, m.weight, m.median_us
FROM reports r JOIN measurements m ON m.report_id = r.id
WHERE m.weight > 0 AND r.id = (
    SELECT r2.id FROM reports r2 WHERE r2.session_id = r.session_id AND r2.op = r.op AND r2.shape = r.shape
      AND r2.target = r.target AND r2.space_checksum = r.space_checksum
      AND EXISTS (SELECT 1 FROM measurements m2 WHERE m2.report_id = r2.id AND m2.weight > 0)
    ORDER BY r2.created_at DESC, r2.id DESC LIMIT 1);
INSERT INTO tallies (op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, sessions)
SELECT op, shape, target, space_checksum, level, level_key, kernel_sha256, SUM(weight), COUNT(*)
FROM ballot_levels GROUP BY op, shape, target, space_checksum, level, level_key, kernel_sha256;
