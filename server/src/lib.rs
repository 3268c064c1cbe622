//! # webtune (the service and command-line tool, as a library)
//!
//! The `webtune` binary is a thin `main` over this crate: [`cli`] holds one
//! module per subcommand, [`http`] is the tuning service (axum) over the
//! kernel database, [`bundle`] the static bundles of its winners (written
//! and read by `webtune bundle`). It is a library so that the fuzz targets and the
//! integration tests can drive the real request decoders and handlers in
//! process, without a socket.
//!
//! What it must never do: hold SQL (that is `webtune-kernel-db`), generate
//! code (that is `webtune-compiler`), or believe a client (see [`http`]'s
//! invariants).
// The hand-written OpenAPI document is one `json!` literal deeper than
// serde_json's default macro recursion allows.
#![recursion_limit = "256"]

pub mod bundle;
pub mod cli;
pub mod http;
