-- 0006: retention (issue 20).
--
-- `webtune db compact --older-than-days N` folds raw reports and
-- measurements older than N days into these per-day sums, in the same
-- transaction that deletes them: nothing is dropped without its aggregate.
-- Elections do not read them (the running tallies hold each session's
-- latest ballot); they keep the history's shape for operators.
CREATE TABLE report_days (
    day            BIGINT NOT NULL,           -- days since 1970-01-01 (UTC)
    op             TEXT NOT NULL,
    shape          TEXT NOT NULL,
    target         TEXT NOT NULL,
    space_checksum TEXT NOT NULL,
    device_key     TEXT NOT NULL,
    arch_key       TEXT NOT NULL,
    vendor_key     TEXT NOT NULL,
    reports        BIGINT NOT NULL,
    sessions       BIGINT NOT NULL,           -- distinct sessions that day (per compaction run)
    PRIMARY KEY (day, op, shape, target, space_checksum, device_key)
);

CREATE TABLE measurement_days (
    day            BIGINT NOT NULL,
    op             TEXT NOT NULL,
    shape          TEXT NOT NULL,
    target         TEXT NOT NULL,
    space_checksum TEXT NOT NULL,
    device_key     TEXT NOT NULL,
    kernel_sha256  TEXT NOT NULL,
    measurements   BIGINT NOT NULL,
    passed         BIGINT NOT NULL,           -- whose output check passed
    first_places   BIGINT NOT NULL,           -- ranked first
    weight         BIGINT NOT NULL,           -- summed ranked weights
    min_median_us  DOUBLE PRECISION NOT NULL,
    sum_median_us  DOUBLE PRECISION NOT NULL, -- with `measurements`, the mean
    max_median_us  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (day, op, shape, target, space_checksum, device_key, kernel_sha256)
);
