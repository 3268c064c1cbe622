//! `webtune db compact`: the retention policy (docs/service.md, "Retention"). Raw
//! reports and measurements older than `--older-than-days` are folded into
//! per-day sums and deleted, a day per transaction, with a line per day.

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use webtune_kernel_db::Db;

use crate::cli::out;

#[derive(Args, Debug)]
pub struct DbArgs {
    #[command(subcommand)]
    pub cmd: DbCmd,
}

#[derive(Subcommand, Debug)]
pub enum DbCmd {
    /// Fold raw reports and measurements older than N days into per-day sums (report_days, measurement_days) and delete them.
    Compact(CompactArgs),
}

#[derive(Args, Debug)]
pub struct CompactArgs {
    /// sqlite://PATH, a bare path, or postgres://USER@HOST:PORT/DB.
    #[arg(long, default_value = "sqlite://webtune.sqlite")]
    pub database_url: String,
    /// Keep this many whole days of raw history (at least 1: a ticket lives 6 hours, and its measurement is what makes it single-use).
    #[arg(long, default_value_t = 90)]
    pub older_than_days: u32,
    /// Only say how many reports would be folded.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(a: DbArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")?;
    match a.cmd {
        DbCmd::Compact(a) => rt.block_on(compact(a)),
    }
}

async fn compact(a: CompactArgs) -> Result<()> {
    if a.older_than_days < 1 {
        anyhow::bail!(
            "--older-than-days must be at least 1: a ticket is valid for 6 hours and its measurement is what makes it single-use"
        );
    }
    let db = Db::connect(&a.database_url).await.with_context(|| format!("opening {}", a.database_url))?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    let before = now - i64::from(a.older_than_days) * 86_400_000;
    let n = db.reports_before(before).await?;
    if a.dry_run {
        out(format!("would fold {n} reports older than {} days into per-day sums", a.older_than_days))?;
        return Ok(());
    }
    let done = db
        .compact(before, |day, reports| {
            eprintln!("webtune db compact: {} folded ({reports} reports)", day_name(day));
        })
        .await?;
    out(format!(
        "folded {} reports and {} measurements of {} days into report_days and measurement_days",
        done.reports, done.measurements, done.days
    ))?;
    Ok(())
}

/// `YYYY-MM-DD` of a day number (days since 1970-01-01, UTC).
fn day_name(day: i64) -> String {
    let (y, m, d, _) = crate::service::time::utc(day * 24);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn day_names() {
        assert_eq!(super::day_name(0), "1970-01-01");
        assert_eq!(super::day_name(20_517), "2026-03-05");
        assert_eq!(super::day_name(11_016), "2000-02-29");
    }
}
