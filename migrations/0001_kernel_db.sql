-- 0001: the crowdsourced kernel database (issue 5).
--
-- One file serves SQLite and PostgreSQL, so it uses only types both accept
-- with the same meaning: TEXT, BIGINT (64-bit integers; SQLite gives it
-- INTEGER affinity), DOUBLE PRECISION (SQLite: REAL) and BYTEA (PostgreSQL's
-- byte string; SQLite stores the value as a BLOB). Identifiers are random
-- hex strings made by the application, so no auto-increment syntax is needed.
-- Times are Unix milliseconds. Booleans are BIGINT 0/1.
--
-- Applied migrations are never edited: later changes go in 0002_... and on.

-- A distinct fingerprint seen from a client, and the keys the tuner derived
-- from it: the exact device key and the two coarser fallback levels.
CREATE TABLE devices (
    fingerprint_sha256 TEXT PRIMARY KEY,      -- SHA-256 of the canonical fingerprint JSON
    fingerprint        TEXT NOT NULL,         -- the fingerprint JSON as received (canonical form)
    device_key         TEXT NOT NULL,         -- exact key: hardware id and primitive vector rho
    arch_key           TEXT NOT NULL,         -- first fallback level
    vendor_key         TEXT NOT NULL,         -- second fallback level
    rho                TEXT NOT NULL,         -- NNJIT's primitive vector, e.g. "1011"
    first_seen         BIGINT NOT NULL,
    last_seen          BIGINT NOT NULL
);
CREATE INDEX devices_by_key ON devices (device_key);

-- One tuning session of one client (one browser tab, one `webtune tune`).
CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY,
    fingerprint_sha256 TEXT NOT NULL REFERENCES devices (fingerprint_sha256),
    device_key         TEXT NOT NULL,
    arch_key           TEXT NOT NULL,
    vendor_key         TEXT NOT NULL,
    rho                TEXT NOT NULL,
    created_at         BIGINT NOT NULL
);

-- Compiled kernels, content-addressed: the primary key is the SHA-256 of
-- `bytes`, so a row never changes once written.
CREATE TABLE kernels (
    sha256      TEXT PRIMARY KEY,
    op          TEXT NOT NULL,                -- e.g. "matmul"
    shape       TEXT NOT NULL,                -- e.g. "384,768,768"
    target      TEXT NOT NULL,                -- "wasm" or "wgsl"
    schedule    TEXT NOT NULL,                -- the schedule JSON it was compiled from
    meta        TEXT NOT NULL,                -- the kernel metadata JSON (kernel.json)
    bytes       BYTEA NOT NULL,
    created_at  BIGINT NOT NULL
);

-- One top-N report from one session for one (op, shape, target). The device
-- keys are copied from the session so that votes can be counted per level
-- without joins, and the checksum names the candidate space the client was
-- tuning: votes from another space never count toward the current winner.
CREATE TABLE reports (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id),
    op             TEXT NOT NULL,
    shape          TEXT NOT NULL,
    target         TEXT NOT NULL,
    space_checksum TEXT NOT NULL,
    device_key     TEXT NOT NULL,
    arch_key       TEXT NOT NULL,
    vendor_key     TEXT NOT NULL,
    rho            TEXT NOT NULL,
    created_at     BIGINT NOT NULL
);
CREATE INDEX reports_by_device ON reports (op, shape, target, device_key);
CREATE INDEX reports_by_arch ON reports (op, shape, target, arch_key);
CREATE INDEX reports_by_vendor ON reports (op, shape, target, vendor_key);
CREATE INDEX reports_by_time ON reports (created_at);

-- Every raw measurement of every report, append only: rows are inserted and
-- never updated or deleted, so votes and winners can always be re-derived and
-- audited. `weight` is the ranked weight of the vote (rank 1 of 5 weighs 5).
CREATE TABLE measurements (
    report_id     TEXT NOT NULL REFERENCES reports (id),
    rank          BIGINT NOT NULL,            -- 1 = fastest
    kernel_sha256 TEXT NOT NULL REFERENCES kernels (sha256),
    ticket        TEXT NOT NULL,              -- the ticket the server issued with the candidate
    median_us     DOUBLE PRECISION NOT NULL,
    runs          BIGINT NOT NULL,
    output_ok     BIGINT NOT NULL,            -- 1 when the client's output check passed
    weight        BIGINT NOT NULL,            -- 0 when the output check failed
    PRIMARY KEY (report_id, rank)
);
-- A ticket is good for one measurement: a replayed report is refused.
CREATE UNIQUE INDEX measurements_ticket ON measurements (ticket);
CREATE INDEX measurements_by_kernel ON measurements (kernel_sha256);

-- Winners derived from the votes, one per (op, shape, target) and fallback
-- level: level is 'device', 'arch' or 'vendor', level_key the key at that
-- level. space_checksum is the candidate space the votes were cast in; a
-- lookup made under a different space ignores the row (it is stale).
CREATE TABLE winners (
    op             TEXT NOT NULL,
    shape          TEXT NOT NULL,
    target         TEXT NOT NULL,
    level          TEXT NOT NULL,
    level_key      TEXT NOT NULL,
    space_checksum TEXT NOT NULL,
    kernel_sha256  TEXT NOT NULL REFERENCES kernels (sha256),
    votes          BIGINT NOT NULL,           -- summed ranked weights of the winner
    total_votes    BIGINT NOT NULL,           -- summed weights of all candidates at this key
    reports        BIGINT NOT NULL,           -- reports counted
    best_median_us DOUBLE PRECISION NOT NULL,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (op, shape, target, level, level_key)
);

-- Server-wide settings shared by every server on one database, such as the
-- ticket secret: tickets then survive restarts, and several servers on one
-- PostgreSQL accept each other's tickets.
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
