//! # webtune (the service and command-line tool, as a library)
//!
//! The `webtune` binary is a thin `main` over this crate: [`cli`] holds one
//! module per subcommand, [`service`] the tuning service's rules over the
//! kernel database (sessions, queues, reports, lookups, model plans; no
//! HTTP), [`http`] its edge (axum: decode, validate, call the service, map
//! errors), [`bundle`] the static bundles of its winners (written and read
//! by `webtune bundle`). Arrows point down: `http` → `service` →
//! kernel-db; `bundle` and `cli` (but `serve`, which starts the edge, and
//! `tune`, a client of it) use the service or kernel-db, never `http`
//! (`tests/layers.rs` checks). It is a library so that the fuzz targets
//! and the integration tests can drive the real request decoders and
//! handlers in process, without a socket.
//!
//! What it must never do: hold SQL (that is `webtune-kernel-db`), generate
//! code (that is `webtune-compiler`), or believe a client (see
//! [`service`]'s invariants).

pub mod bundle;
pub mod cli;
pub mod http;
pub mod service;
