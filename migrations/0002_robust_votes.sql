-- 0002: a crowd that cannot be fooled (issue 7).
--
-- Kernels that a client found wrong, or whose output samples the server
-- recomputed and found wrong, are flagged per device key. A flag alone
-- changes nothing (one client could flag a good kernel); a kernel flagged by
-- a quorum of distinct sessions of one key is excluded from that key's
-- winners, which is what a driver that miscomputes on one device class
-- produces.
CREATE TABLE flags (
    kernel_sha256 TEXT NOT NULL REFERENCES kernels (sha256),
    op            TEXT NOT NULL,
    shape         TEXT NOT NULL,
    target        TEXT NOT NULL,
    device_key    TEXT NOT NULL,
    arch_key      TEXT NOT NULL,
    vendor_key    TEXT NOT NULL,
    session_id    TEXT NOT NULL,
    reason        TEXT NOT NULL,              -- 'client-check' or 'server-check: ...'
    created_at    BIGINT NOT NULL
);
CREATE INDEX flags_by_kernel ON flags (op, shape, target, kernel_sha256);

-- Votes are tallied per session (its latest report counts), so reports are
-- looked up by session.
CREATE INDEX reports_by_session ON reports (session_id, op, shape, target);
