//! The liar sweep: the same crowd as the server's `tests/crowd.rs` at growing shares of
//! liars, each against a fresh server, printing whether the true best kernel
//! still wins. Recorded in BENCHMARKS.md.
//!
//! ```text
//! cargo build --release -p webtune && cargo run --release -p webtune-research --bin crowd_sim -- 200
//! ```

use webtune_research::clients::*;

fn main() {
    let sessions: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        for share in [0.0, 0.1, 0.2, 0.3, 0.4, 0.45, 0.5, 0.6] {
            let srv = Server::start(&sqlite_url(), &["--quorum", "3", "--rate-per-address", "1000000"]);
            let out = sim::run(&srv.url, sessions, share, 16, 2026).await;
            println!(
                "{}",
                serde_json::json!({"liar_share": share, "sessions": out.sessions, "liars": out.liars, "winner_is_best": out.winner_is_best,
                                   "level": out.winner_level, "accepted": out.accepted, "refused": format!("{:?}", out.refused), "seconds": out.seconds})
            );
        }
    });
}
