//! The read-only pages: `/dashboard` (plain HTML), `/metrics` (Prometheus
//! text format) and `/v1/openapi.json` (hand-written OpenAPI 3.1, kept next
//! to the handlers it describes).

use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};

use super::error::{ApiError, ApiResult};
use super::{App, BODY_LIMIT};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

pub async fn dashboard(State(app): State<Arc<App>>) -> ApiResult<Html<String>> {
    let devices = app.db.devices(100).await?;
    let winners = app.db.winners(200).await?;
    let reports = app.db.recent_reports(50).await?;
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=utf-8><title>webtune</title>\
         <style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}\
         td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}code{font-size:12px}</style></head><body>\
         <h1>webtune kernel database</h1>",
    );
    let _ = write!(
        h,
        "<h2>Winners ({})</h2><table><tr><th>op</th><th>shape</th><th>target</th><th>level</th><th>key</th><th>kernel</th><th>votes</th><th>reports</th><th>best median µs</th><th>space</th></tr>",
        winners.len()
    );
    for w in &winners {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><a href=\"/v1/kernels/{}\"><code>{}</code></a></td><td>{}/{}</td><td>{}</td><td>{:.1}</td><td><code>{}</code></td></tr>",
            esc(&w.kind.op),
            esc(&w.kind.shape),
            esc(&w.kind.target),
            w.level,
            esc(&w.level_key),
            esc(&w.kernel_sha256),
            esc(short(&w.kernel_sha256)),
            w.votes,
            w.total_votes,
            w.reports,
            w.best_median_us,
            esc(&w.space_checksum)
        );
    }
    let _ = write!(
        h,
        "</table><h2>Devices ({})</h2><table><tr><th>device key</th><th>arch</th><th>vendor</th><th>ρ</th><th>fingerprint</th></tr>",
        devices.len()
    );
    for d in &devices {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            esc(&d.keys.device_key),
            esc(&d.keys.arch_key),
            esc(&d.keys.vendor_key),
            esc(&d.keys.rho),
            esc(&d.fingerprint)
        );
    }
    let _ = write!(
        h,
        "</table><h2>Recent reports ({})</h2><table><tr><th>report</th><th>device key</th><th>op</th><th>shape</th><th>target</th><th>entries</th><th>fastest</th><th>median µs</th></tr>",
        reports.len()
    );
    for r in &reports {
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{:.1}</td></tr>",
            esc(short(&r.id)),
            esc(&r.device_key),
            esc(&r.kind.op),
            esc(&r.kind.shape),
            esc(&r.kind.target),
            r.entries,
            esc(short(&r.best_kernel)),
            r.best_median_us
        );
    }
    h.push_str("</table><p><a href=\"/v1/openapi.json\">API</a> · <a href=\"/metrics\">metrics</a></p></body></html>");
    Ok(Html(h))
}

pub async fn metrics(State(app): State<Arc<App>>) -> ApiResult<Response> {
    let m = &app.metrics;
    let stats = app.db.stats().await?;
    let mut t = String::new();
    let mut counter = |name: &str, help: &str, v: u64| {
        let _ = writeln!(t, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
    };
    counter("webtune_sessions_created_total", "Sessions opened.", m.sessions.load(Ordering::Relaxed));
    counter(
        "webtune_best_cache_hits_total",
        "Best-kernel lookups answered from the in-memory cache.",
        m.best_cache_hits.load(Ordering::Relaxed),
    );
    counter("webtune_reports_accepted_total", "Reports stored.", m.reports_accepted.load(Ordering::Relaxed));
    counter("webtune_reports_rejected_total", "Reports refused with a 4xx or 5xx.", m.reports_rejected.load(Ordering::Relaxed));
    counter("webtune_measurements_accepted_total", "Raw measurements stored.", m.measurements_accepted.load(Ordering::Relaxed));
    counter("webtune_candidates_streamed_total", "Queue candidates sent.", m.candidates_streamed.load(Ordering::Relaxed));
    counter("webtune_kernels_compiled_total", "Kernels compiled by this process.", m.kernels_compiled.load(Ordering::Relaxed));
    counter("webtune_compile_microseconds_total", "Time spent compiling, microseconds.", m.compile_us_total.load(Ordering::Relaxed));
    counter("webtune_kernel_downloads_total", "Kernel byte downloads.", m.kernel_downloads.load(Ordering::Relaxed));
    counter("webtune_kernel_not_modified_total", "Kernel requests answered 304.", m.not_modified.load(Ordering::Relaxed));
    counter("webtune_rate_limited_total", "Requests answered 429 by a rate limit.", m.rate_limited.load(Ordering::Relaxed));
    counter("webtune_overloaded_total", "Requests answered 503 at a concurrency limit.", m.overloaded.load(Ordering::Relaxed));
    counter(
        "webtune_samples_rejected_total",
        "Report entries whose output samples the server found wrong.",
        m.samples_rejected.load(Ordering::Relaxed),
    );
    counter(
        "webtune_unreadable_winners_total",
        "Stored winners left out of a queue because their metadata did not parse (logged).",
        m.unreadable_winners.load(Ordering::Relaxed),
    );
    counter(
        "webtune_implausible_rejected_total",
        "Report entries with a time above the device class's ceiling.",
        m.implausible_rejected.load(Ordering::Relaxed),
    );
    counter(
        "webtune_connections_refused_total",
        "Connections closed on arrival at a per-address or total cap.",
        m.connections_refused.load(Ordering::Relaxed),
    );
    let _ = writeln!(
        t,
        "# HELP webtune_connections_open Connections open now.\n# TYPE webtune_connections_open gauge\nwebtune_connections_open {}",
        app.open.total.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        t,
        "# HELP webtune_queues_active Candidate queues streaming now.\n# TYPE webtune_queues_active gauge\nwebtune_queues_active {}",
        app.queues.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        t,
        "# HELP webtune_requests_in_flight Requests being handled now.\n# TYPE webtune_requests_in_flight gauge\nwebtune_requests_in_flight {}",
        app.in_flight.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        t,
        "# HELP webtune_best_lookups_total Best-kernel lookups computed, by the fallback level that answered.\n# TYPE webtune_best_lookups_total counter"
    );
    for (i, level) in ["device", "arch", "vendor", "default"].iter().enumerate() {
        let _ = writeln!(t, "webtune_best_lookups_total{{level=\"{level}\"}} {}", m.best[i].load(Ordering::Relaxed));
    }
    let _ = writeln!(t, "# HELP webtune_db_rows Rows in each table of the kernel database.\n# TYPE webtune_db_rows gauge");
    for (table, n) in [
        ("devices", stats.devices),
        ("sessions", stats.sessions),
        ("kernels", stats.kernels),
        ("reports", stats.reports),
        ("measurements", stats.measurements),
        ("winners", stats.winners),
    ] {
        let _ = writeln!(t, "webtune_db_rows{{table=\"{table}\"}} {n}");
    }
    let _ = writeln!(
        t,
        "# HELP webtune_uptime_seconds Seconds since start.\n# TYPE webtune_uptime_seconds gauge\nwebtune_uptime_seconds {}",
        app.started.elapsed().as_secs()
    );
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"))], t).into_response())
}

pub async fn openapi() -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(spec()))
}

/// The OpenAPI document. Schemas mirror `protocol.rs`.
pub fn spec() -> serde_json::Value {
    use serde_json::json;
    let err = json!({"description": "What was wrong and how to fix it", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let kind_params = json!([
        {"name": "op", "in": "query", "required": true, "schema": {"type": "string", "enum": ["matmul", "batch_matmul", "matmul_q4"]}},
        {"name": "shape", "in": "query", "required": true, "description": "M,K,N for matmul and matmul_q4, B,M,K,N for batch_matmul", "schema": {"type": "string", "pattern": "^[1-9][0-9]{0,9}(,[1-9][0-9]{0,9}){2,3}$"}, "example": "384,768,768"},
        {"name": "target", "in": "query", "required": true, "schema": {"type": "string", "enum": ["wasm", "wgsl"]}}
    ]);
    let mut best_params = kind_params.as_array().cloned().unwrap_or_default();
    best_params.push(json!({"name": "device_key", "in": "query", "required": false, "schema": {"type": "string", "maxLength": 512}}));
    let session_param = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}});
    let model_param = json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[a-z0-9]([a-z0-9.-]{0,62}[a-z0-9])?$"}});
    let mut queue_params = kind_params.as_array().cloned().unwrap_or_default();
    queue_params.insert(0, session_param.clone());
    json!({
        "openapi": "3.1.0",
        "info": {"title": "webtune", "version": env!("CARGO_PKG_VERSION"),
                 "description": format!("Just-in-time kernel tuning with a crowdsourced kernel database. Request bodies are limited to {BODY_LIMIT} bytes. \
                     A request must send its headers, and its body, within the server's timeouts (10 s each by default; 408 past the request timeout). \
                     Pages of other origins may call the API only where the server was started with --allow-origin.")},
        "paths": {
            "/v1/sessions": {"post": {
                "summary": "Open a tuning session for a device fingerprint",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SessionRequest"}}}},
                "responses": {"201": {"description": "Session opened", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SessionResponse"}}}},
                              "400": err, "413": err, "422": err, "429": err, "503": err}}},
            "/v1/kernels/best": {"get": {
                "summary": "The best known kernel for a device key, with the fallback level that answered",
                "parameters": best_params,
                "responses": {"200": {"description": "Winner or portable default", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/BestResponse"}}}},
                              "400": err}}},
            "/v1/kernels/{sha256}": {"get": {
                "summary": "Kernel bytes (Wasm binary or WGSL text), content-addressed and immutable",
                "parameters": [{"name": "sha256", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"}},
                               {"name": "If-None-Match", "in": "header", "required": false, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "The bytes; ETag is the quoted hash",
                                      "content": {"application/wasm": {"schema": {"type": "string", "format": "binary"}},
                                                  "text/wgsl": {"schema": {"type": "string"}}}},
                              "304": {"description": "Not modified"}, "400": err, "404": err}}},
            "/v1/models": {"get": {
                "summary": "The model bundles this server serves (README, Models)",
                "responses": {"200": {"description": "The store's models", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ModelList"}}}}}}},
            "/v1/models/{name}": {"get": {
                "summary": "A bundle's manifest (format 1): config, pooling, blobs and tensor layout; ETag is the quoted SHA-256 of these bytes, revalidate with If-None-Match",
                "parameters": [model_param.clone(), {"name": "If-None-Match", "in": "header", "required": false, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "The manifest", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ModelManifest"}}}},
                              "304": {"description": "Not modified"}, "404": err}}},
            "/v1/models/{name}/blobs/{sha256}": {"get": {
                "summary": "A blob the model's manifest lists (weights: little-endian f32; tokenizer: tokenizer.json), content-addressed and immutable, streamed",
                "parameters": [model_param, {"name": "sha256", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"}},
                               {"name": "If-None-Match", "in": "header", "required": false, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "The bytes; ETag is the quoted hash",
                                      "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                                                  "application/json": {"schema": {"type": "object"}}}},
                              "304": {"description": "Not modified"}, "400": err, "404": err}}},
            "/v1/models/{name}/latency": {"post": {
                "summary": "Report one model-level latency (one call of the model at a batch and padded length, on one target) measured in a session; the device keys come from the session",
                "parameters": [model_param.clone()],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/LatencyRequest"}}}},
                "responses": {"201": {"description": "Stored", "content": {"application/json": {"schema": {"type": "object", "required": ["id", "device_key"], "properties": {"id": {"type": "string"}, "device_key": {"type": "string"}}}}}},
                              "400": err, "404": err, "413": err, "422": err, "429": err, "503": err}}},
            "/v1/models/{name}/plan": {"get": {
                "summary": "Which target (wasm or webgpu) runs the model faster on this device class (median per target over sessions, device → arch → vendor key), and the matrix products of one layer with their best-kernel lookups",
                "parameters": [model_param.clone(),
                               {"name": "device_key", "in": "query", "required": true, "schema": {"type": "string", "maxLength": 512}},
                               {"name": "batch", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1, "maximum": 256, "default": 1}},
                               {"name": "seq_len", "in": "query", "required": false, "description": "padded tokens; default min(128, max_seq_length)", "schema": {"type": "integer", "minimum": 1}}],
                "responses": {"200": {"description": "The plan; target is null with a reason when the measurements do not decide", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlanResponse"}}}},
                              "400": err, "404": err, "422": err}}},
            "/v1/sessions/{id}/queue": {"get": {
                "summary": "Candidate queue as Server-Sent Events: `candidate` events (data: CandidateEvent JSON), then one `done` event (data: QueueDone JSON)",
                "parameters": queue_params,
                "responses": {"200": {"description": "Event stream", "content": {"text/event-stream": {"schema": {"$ref": "#/components/schemas/QueueEvent"}}}},
                              "400": err, "404": err, "422": err, "429": err, "503": err}}},
            "/v1/sessions/{id}/reports": {"post": {
                "summary": "Report the top N (1 to 5) kernels of one op, shape and target, fastest first",
                "parameters": [session_param],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReportRequest"}}}},
                "responses": {"200": {"description": "Stored; the winners after this report", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReportResponse"}}}},
                              "400": err, "403": err, "404": err, "409": err, "413": err, "422": err, "429": err, "503": err}}},
            "/v1/rho": {"get": {
                "summary": "The kernel pairs of the on-device microbenchmark ρ: time each pair, one bit per pair (1: variant / base < 1 − margin), and send the bits as fingerprint.rho",
                "parameters": [{"name": "target", "in": "query", "required": true, "schema": {"type": "string", "enum": ["wasm", "wgsl"]}}],
                "responses": {"200": {"description": "The pairs, in bit order (none for wgsl yet)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RhoResponse"}}}},
                              "400": err}}},
            "/v1/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3.1"}}}},
            "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "Text format 0.0.4", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
            "/healthz": {"get": {"summary": "Liveness and database reachability", "responses": {"200": {"description": "OK"}, "503": err}}},
            "/dashboard": {"get": {"summary": "Devices, winners and recent reports", "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}}}},
            "/": {"get": {"summary": "The dashboard, as /dashboard", "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}}}},
            "/demo": {"get": {"summary": "The demo app (cross-origin isolated page that tunes a small model's kernels)", "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}}}},
            "/web/{name}": {"get": {
                "summary": "The browser client runtime (webtune.js, demo.js) and its TypeScript declarations (*.d.ts)",
                "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}, "example": "webtune.js"}],
                "responses": {"200": {"description": "The file", "content": {"text/javascript": {"schema": {"type": "string"}}, "application/typescript": {"schema": {"type": "string"}}}},
                              "404": err}}}
        },
        "components": {"schemas": {
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
            "ModelList": {"type": "object", "required": ["models"], "properties": {"models": {"type": "array", "items": {
                "type": "object", "required": ["name", "architecture", "hidden_size", "layers", "max_seq_length", "manifest_sha256"], "properties": {
                    "name": {"type": "string"}, "architecture": {"type": "string"}, "hidden_size": {"type": "integer"},
                    "layers": {"type": "integer"}, "max_seq_length": {"type": "integer"}, "manifest_sha256": {"type": "string"}}}}}},
            "LatencyRequest": {"type": "object", "required": ["session_id", "target", "batch", "seq_len", "median_ms", "runs"], "additionalProperties": false, "properties": {
                "session_id": {"type": "string", "pattern": "^[0-9a-f]{32}$"}, "target": {"type": "string", "enum": ["wasm", "webgpu"]},
                "batch": {"type": "integer", "minimum": 1, "maximum": 256}, "seq_len": {"type": "integer", "minimum": 1, "description": "padded tokens, at most the model's max_seq_length"},
                "median_ms": {"type": "number", "exclusiveMinimum": 0, "maximum": 600000}, "runs": {"type": "integer", "minimum": 3, "maximum": 1000000}}},
            "PlanResponse": {"type": "object", "required": ["model", "device_key", "batch", "seq_len", "target", "reason", "targets", "layers", "kernels"], "properties": {
                "model": {"type": "string"}, "device_key": {"type": "string"}, "batch": {"type": "integer"}, "seq_len": {"type": "integer"},
                "target": {"type": ["string", "null"], "enum": ["wasm", "webgpu", null]}, "reason": {"type": "string"},
                "level": {"type": ["string", "null"], "enum": ["device", "arch", "vendor", null]}, "level_key": {"type": ["string", "null"]},
                "targets": {"type": "array", "items": {"type": "object", "properties": {"target": {"type": "string"}, "median_ms": {"type": "number"},
                    "sessions": {"type": "integer"}, "reports": {"type": "integer"}}}},
                "layers": {"type": "integer"},
                "kernels": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "enum": ["qkv", "scores", "context", "attn_out", "ffn_in", "ffn_out"]},
                    "op": {"type": "string"}, "shape": {"type": "array", "items": {"type": "integer"}},
                    "best": {"type": "object", "description": "GET /v1/kernels/best URL by target (wasm, webgpu)"}}}}}},
            "ModelBlob": {"type": "object", "required": ["sha256", "bytes", "url"], "properties": {
                "sha256": {"type": "string"}, "bytes": {"type": "integer"}, "url": {"type": "string"}}},
            "ModelManifest": {"type": "object", "required": ["format", "name", "architecture", "config", "max_seq_length", "pooling", "normalize", "tokenizer", "weights", "tensors"], "properties": {
                "format": {"type": "integer", "const": 1}, "name": {"type": "string"}, "architecture": {"type": "string", "enum": ["bert"]},
                "config": {"type": "object", "description": "vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, max_position_embeddings, type_vocab_size, layer_norm_eps, hidden_act"},
                "max_seq_length": {"type": "integer"}, "pooling": {"type": "string", "enum": ["mean", "cls"]}, "normalize": {"type": "boolean"},
                "tokenizer": {"$ref": "#/components/schemas/ModelBlob"}, "weights": {"$ref": "#/components/schemas/ModelBlob"},
                "tensors": {"type": "array", "items": {"type": "object", "required": ["name", "dtype", "shape", "offset"], "properties": {
                    "name": {"type": "string"}, "dtype": {"type": "string", "enum": ["f32"]}, "shape": {"type": "array", "items": {"type": "integer"}},
                    "offset": {"type": "integer", "description": "bytes into the weights blob, a multiple of 64"}}}}}},
            "SessionRequest": {"type": "object", "required": ["fingerprint"], "additionalProperties": false, "properties": {
                "fingerprint": {"$ref": "#/components/schemas/Fingerprint"}}},
            // README, Device fingerprint: what the browser exposes, under its
            // own names. Every field is optional (browsers hide what they
            // like); a field of another type reads as unknown, never as an
            // error; unknown fields are dropped, strings kept to 128 bytes.
            "Fingerprint": {"type": "object", "description": "Every field is optional; a value of the wrong type reads as unknown; unknown fields are ignored and not stored", "properties": {
                "target": {"type": "string", "enum": ["wasm", "wgsl"], "description": "which kernels this session tunes; a session serves one target"},
                "adapter": {"type": "object", "description": "GPUAdapterInfo", "properties": {
                    "vendor": {"type": "string"}, "architecture": {"type": "string"}, "device": {"type": "string"},
                    "description": {"type": "string"}, "subgroupMinSize": {"type": "integer"}, "subgroupMaxSize": {"type": "integer"}}},
                "limits": {"type": "object", "description": "GPUSupportedLimits (camelCase)", "properties": {
                    "maxComputeInvocationsPerWorkgroup": {"type": "integer"}, "maxComputeWorkgroupStorageSize": {"type": "integer"},
                    "maxComputeWorkgroupSizeX": {"type": "integer"}, "maxComputeWorkgroupsPerDimension": {"type": "integer"},
                    "maxStorageBuffersPerShaderStage": {"type": "integer"}, "maxStorageBufferBindingSize": {"type": "integer"}}},
                "features": {"type": "array", "items": {"type": "string"}, "description": "GPUAdapter.features"},
                "hardwareConcurrency": {"type": "integer"}, "simd": {"type": "boolean"}, "relaxedSimd": {"type": "boolean"}, "threads": {"type": "boolean"},
                "cpuArchitecture": {"type": "string", "description": "x86 or arm"},
                "cpu": {"type": "object", "properties": {"arch": {"type": "string"}}, "description": "native clients: {\"arch\": \"x86_64\"}"},
                "browser": {"type": "object", "properties": {"name": {"type": "string"}, "version": {"type": "string"}}},
                "os": {"type": "string"},
                "rho": {"type": "string", "pattern": "^[01]{0,64}$", "description": "the microbenchmark vector, one 0/1 per primitive"},
                "vendor": {"type": "string", "description": "first-release flat form of adapter.vendor"},
                "architecture": {"type": "string", "description": "first-release flat form of adapter.architecture"},
                "device": {"type": "string", "description": "first-release flat form of adapter.device"},
                "description": {"type": "string", "description": "first-release flat form of adapter.description"}}},
            "SessionResponse": {"type": "object", "required": ["session_id", "device_key", "arch_key", "vendor_key", "rho"], "properties": {
                "session_id": {"type": "string"}, "device_key": {"type": "string"}, "arch_key": {"type": "string"},
                "vendor_key": {"type": "string"}, "rho": {"type": "string"}}},
            "BestResponse": {"type": "object", "required": ["level", "meta", "url", "votes", "reports"], "properties": {
                "level": {"type": "string", "enum": ["device", "arch", "vendor", "default"]},
                "level_key": {"type": "string"},
                "meta": {"type": "object", "description": "kernel.json as written by `webtune compile` (README, Kernel ABI)"},
                "url": {"type": "string"}, "votes": {"type": "integer"}, "reports": {"type": "integer"},
                "space_checksum": {"type": "string"}}},
            "CandidateEvent": {"type": "object", "required": ["index", "total", "source", "sha256", "url", "meta", "ticket", "seed", "space_checksum"], "properties": {
                "index": {"type": "integer"}, "total": {"type": "integer"}, "source": {"type": "string", "enum": ["exploit", "explore"]},
                "sha256": {"type": "string"}, "url": {"type": "string"}, "meta": {"type": "object"}, "ticket": {"type": "string"},
                "seed": {"type": "integer", "description": "inputs are webtune_compiler::reference::inputs(op, seed) (README, Output checks)"},
                "check": {"type": "array", "items": {"type": "integer"}, "description": "flat output positions whose values the report returns as samples"},
                "space_checksum": {"type": "string"}}},
            "QueueEvent": {"type": "object", "description": "One Server-Sent Event: `candidate` (data: CandidateEvent JSON) or `done` (data: QueueDone JSON)",
                "required": ["data"], "properties": {"event": {"type": "string"}, "id": {"type": "string"}, "data": {"type": "string"}}},
            "QueueDone": {"type": "object", "required": ["total", "skipped"], "properties": {"total": {"type": "integer"}, "skipped": {"type": "integer"}}},
            "ReportRequest": {"type": "object", "required": ["op", "shape", "target", "entries"], "additionalProperties": false, "properties": {
                "op": {"type": "string", "enum": ["matmul", "batch_matmul", "matmul_q4"]},
                "shape": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 4294967295u64}, "minItems": 3, "maxItems": 4},
                "target": {"type": "string", "enum": ["wasm", "wgsl"]},
                "entries": {"type": "array", "minItems": 1, "maxItems": 5, "items": {"$ref": "#/components/schemas/ReportEntry"}}}},
            "ReportEntry": {"type": "object", "required": ["sha256", "ticket", "median_us", "runs", "output_ok"], "additionalProperties": false, "properties": {
                "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}, "ticket": {"type": "string", "maxLength": 512},
                "median_us": {"type": "number", "exclusiveMinimum": 0}, "runs": {"type": "integer", "minimum": 3, "maximum": 1000000000u64},
                "output_ok": {"type": "boolean"},
                "samples": {"type": "array", "items": {"type": "number"}, "description": "output values at the candidate's check positions; required when output_ok"}}},
            "RhoResponse": {"type": "object", "required": ["version", "margin", "pairs"], "properties": {
                "version": {"type": "string"}, "margin": {"type": "number"},
                "pairs": {"type": "array", "items": {"type": "object", "required": ["name", "meaning", "op", "shape", "base", "variant", "needs_relaxed_simd"], "properties": {
                    "name": {"type": "string"}, "meaning": {"type": "string"}, "op": {"type": "string"},
                    "shape": {"type": "array", "items": {"type": "integer"}},
                    "base": {"$ref": "#/components/schemas/RhoKernel"}, "variant": {"$ref": "#/components/schemas/RhoKernel"},
                    "needs_relaxed_simd": {"type": "boolean"}}}}}},
            "RhoKernel": {"type": "object", "required": ["url", "meta"], "properties": {"url": {"type": "string"}, "meta": {"type": "object"}}},
            "ReportResponse": {"type": "object", "required": ["report_id", "accepted", "winners"], "properties": {
                "report_id": {"type": "string"}, "accepted": {"type": "integer"},
                "winners": {"type": "array", "items": {"type": "object", "properties": {
                    "level": {"type": "string"}, "level_key": {"type": "string"}, "sha256": {"type": "string"},
                    "votes": {"type": "integer"}, "total_votes": {"type": "integer"}, "reports": {"type": "integer"},
                    "best_median_us": {"type": "number"}}}}}}
        }}
    })
}
