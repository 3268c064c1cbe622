-- 0010 (SQLite): nothing to change. On PostgreSQL this version drops the
-- foreign key from `measurements` to `kernels`, whose check locked the
-- same kernel rows in every report's transaction (see
-- 0010_no_shared_row_locks.postgres.sql). SQLite has one writer at a time
-- and checks a key with an index lookup that locks nothing, so its key
-- stays.
SELECT 1;
