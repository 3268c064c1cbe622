//! `webtune serve`: the tuning service over the kernel database.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use clap::Args;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (printed on start).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// sqlite://PATH (created on first start), a bare path, or postgres://USER@HOST:PORT/DB.
    #[arg(long, default_value = "sqlite://webtune.sqlite")]
    pub database_url: String,
}

pub fn run(a: ServeArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    rt.block_on(crate::http::serve(a.addr, &a.database_url))
}
