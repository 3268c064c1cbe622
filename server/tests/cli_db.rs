//! `webtune db compact` as an operator runs it: a dry run counts, a real
//! run folds old reports and says how many, and bad input is one line and
//! a non-zero status. (The sums themselves are checked in kernel-db's
//! `tests/retention.rs`.)

use std::process::Command;

fn webtune(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_webtune")).args(args).output().expect("runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn compact_counts_folds_and_refuses_a_zero_window() {
    let dir = std::env::temp_dir().join(format!("webtune-cli-db-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("c.sqlite").display());
    let (ok, out, err) = webtune(&["db", "compact", "--database-url", &url, "--dry-run"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "would fold 0 reports older than 90 days into per-day sums");
    let (ok, out, err) = webtune(&["db", "compact", "--database-url", &url, "--older-than-days", "1"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "folded 0 reports and 0 measurements of 0 days into report_days and measurement_days");
    let (ok, _, err) = webtune(&["db", "compact", "--database-url", &url, "--older-than-days", "0"]);
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("at least 1"), "{err}");
    let (ok, _, err) = webtune(&["db", "compact", "--database-url", "mysql://nope"]);
    assert!(!ok && err.lines().count() == 1, "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
