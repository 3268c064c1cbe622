-- 0007: every statement on the report path seeks an index that matches it
-- (issue 39).
--
-- A report replaces its session's ballots: `SELECT`/`DELETE ... FROM ballots
-- WHERE session_id IN (...) AND op = .. AND shape = .. AND target = .. AND
-- space_checksum = ..`. The primary key leads with `session_id` and serves
-- that. But `ballots_by_time` led with (op, shape, target, space_checksum),
-- the same four equalities: PostgreSQL, without statistics for the table
-- (never analysed while a crowd reports), takes four equalities as very
-- selective and scanned every ballot of the kernel's key range, filtering
-- by session; so a report cost what the history held (20-31 ms per group,
-- growing). Reordered with the columns the session statements never name
-- first, the index offers them no seek at all, so the primary key is the
-- only index they can use, with or without statistics. Elections still
-- find a kernel's latest ballots at a key with one seek: every column
-- before `created_at` is an equality there.
DROP INDEX ballots_by_time;
CREATE INDEX ballots_by_kernel ON ballots (level_key, kernel_sha256, level, op, shape, target, space_checksum, created_at, report_id);

-- Each election counts the distinct sessions flagging each kernel at its
-- keys (`GROUP BY kernel_sha256`). SQLite preferred `flags_by_kernel`,
-- which yields that order, and read every flag of the kind; with the
-- kernel and the session in the key indexes, one seek serves the count.
DROP INDEX flags_by_device;
DROP INDEX flags_by_arch;
DROP INDEX flags_by_vendor;
CREATE INDEX flags_by_device ON flags (op, shape, target, device_key, kernel_sha256, session_id);
CREATE INDEX flags_by_arch ON flags (op, shape, target, arch_key, kernel_sha256, session_id);
CREATE INDEX flags_by_vendor ON flags (op, shape, target, vendor_key, kernel_sha256, session_id);
