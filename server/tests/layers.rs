//! The server crate's layers, read from its source: the HTTP edge
//! (`src/http/`) holds no SQL and no election or fallback rule (it reaches
//! the database only through the service), and no arrow points up into
//! the edge from the service, the bundles or `webtune db`.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The file's code: comment lines dropped (a comment may name what the
/// code must not do).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// `(file, pattern)` for every pattern some file's code holds.
fn found(paths: &[PathBuf], patterns: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for p in paths {
        let c = code(p);
        for pat in patterns {
            if c.contains(pat) {
                out.push(format!("{}: `{pat}`", p.strip_prefix(src()).unwrap_or(p).display()));
            }
        }
    }
    out
}

#[test]
fn the_http_edge_holds_no_sql_and_no_election_or_fallback_rule() {
    let http = files(&src().join("http"));
    assert!(http.len() >= 10, "the edge's files are read: {http:?}");
    // The database handle and kernel-db's queries, SQL itself, and the
    // rules: the fallback walk, the thread filter on winners, the model
    // plan's choice, the election.
    let forbidden = [
        ".db.",
        ".db()",
        "Db::",
        "webtune_kernel_db::Db",
        "sqlx",
        "SELECT ",
        "INSERT ",
        "winners_for(",
        "model_latencies(",
        "model_choice(",
        "record_model_latency(",
        "fallback::",
        "Level::STORED",
        "faster(",
        "summarise(",
        "meta_json",
        "max_threads(",
        "elect(",
        "elect_step(",
        "space_for(",
    ];
    let hits = found(&http, &forbidden);
    assert!(hits.is_empty(), "the HTTP edge must call the service, not the database or its rules:\n{}", hits.join("\n"));
}

#[test]
fn no_arrow_points_up_into_the_http_edge() {
    let mut below = files(&src().join("service"));
    assert!(below.len() >= 10, "the service's files are read: {below:?}");
    below.push(src().join("bundle.rs"));
    below.push(src().join("cli").join("db.rs"));
    let hits = found(&below, &["crate::http", "super::http", "webtune::http"]);
    assert!(hits.is_empty(), "these must not use the HTTP edge:\n{}", hits.join("\n"));
    // The service knows no HTTP at all.
    let service = files(&src().join("service"));
    let hits = found(&service, &["axum", "hyper", "StatusCode", "tower"]);
    assert!(hits.is_empty(), "the service must know no HTTP:\n{}", hits.join("\n"));
}
