-- 0003: backend choice by measurement (issue 18, item 4).
--
-- Each client that runs a model (the browser's SentenceEncoder) reports the
-- model-level latency it measured: one row per report, for one model,
-- target (`wasm` or `webgpu`), batch size and padded sequence length. The
-- device keys come from the session the report was sent with, never from
-- the report itself. Rows are never updated or deleted; the plan (which
-- target is faster for a device class) is derived from them on each lookup,
-- with the same device → arch → vendor fallback as kernel winners.
CREATE TABLE model_latency (
    id             TEXT PRIMARY KEY,
    model          TEXT NOT NULL,              -- the bundle's name in the model store
    weights_sha256 TEXT NOT NULL,              -- the bundle's weights when reported (for inspection)
    target         TEXT NOT NULL,              -- 'wasm' or 'webgpu'
    batch          BIGINT NOT NULL,
    seq_len        BIGINT NOT NULL,
    median_ms      DOUBLE PRECISION NOT NULL,  -- the client's median over `runs` timed calls
    runs           BIGINT NOT NULL,
    session_id     TEXT NOT NULL REFERENCES sessions (id),
    device_key     TEXT NOT NULL,
    arch_key       TEXT NOT NULL,
    vendor_key     TEXT NOT NULL,
    created_at     BIGINT NOT NULL
);
CREATE INDEX model_latency_by_device ON model_latency (model, batch, seq_len, device_key);
CREATE INDEX model_latency_by_arch ON model_latency (model, batch, seq_len, arch_key);
CREATE INDEX model_latency_by_vendor ON model_latency (model, batch, seq_len, vendor_key);
