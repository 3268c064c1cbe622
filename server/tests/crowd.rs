//! A crowd that cannot be fooled: 200 sessions on loopback, 30% of them
//! liars (fake fast times, wrong outputs, replayed tickets, floods), and the
//! winner is still the true best kernel.

mod common;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_percent_liars_do_not_change_the_winner() {
    let srv = Server::start(&sqlite_url(), &["--quorum", "3", "--rate-per-address", "1000000"]);
    let out = sim::run(&srv.url, 200, 0.30, 16, 2026).await;
    eprintln!("{out:?}");
    assert_eq!(out.liars, 60);
    assert!(out.winner_is_best, "the liars won: {out:?}");
    assert_eq!(out.winner_level, "device");
    // Every kind of lie was refused for what it is.
    assert!(out.refused.get(&422).copied().unwrap_or(0) >= 10, "wrong samples must be refused: {out:?}");
    assert!(
        out.refused.get(&403).copied().unwrap_or(0) + out.refused.get(&409).copied().unwrap_or(0) >= 1,
        "replays must be refused: {out:?}"
    );
    assert!(out.refused.get(&429).copied().unwrap_or(0) >= 1, "floods must be rate limited: {out:?}");
    assert!(out.accepted >= 140, "honest reports must be accepted: {out:?}");
}
