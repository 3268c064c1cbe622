//! Static bundles (`webtune bundle export` / `import`) as an operator runs
//! them: winners voted on one server, exported to files, imported into a
//! fresh database, and served from there exactly as before; a second
//! import changes nothing, an import never puts an older winner over a
//! newer one, and a bundle that is cut short, altered or of an unknown
//! format is refused with one line before the database is touched.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;
use webtune_compiler::Op;

const OP: &str = "matmul";
const SHAPE: &str = "24,40,20";
const TARGET: &str = "wgsl";

fn webtune(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(webtune_bin()).args(args).output().expect("runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("webtune-bundle-{}-{name}", webtune_kernel_db::random_id().unwrap()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("kernels")).unwrap();
    for name in ["bundle.json", "SHA256SUMS"] {
        std::fs::copy(from.join(name), to.join(name)).unwrap();
    }
    for e in std::fs::read_dir(from.join("kernels")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join("kernels").join(e.file_name())).unwrap();
    }
}

/// `import DIR` into `db_url` must fail with one line containing `want`.
fn refused(dir: &Path, db_url: &str, want: &str) {
    let (ok, out, err) = webtune(&["bundle", "import", "--database-url", db_url, dir.to_str().unwrap()]);
    assert!(!ok, "a bad bundle was imported: {out}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(want), "expected `{want}` in: {err}");
}

async fn scenario(source_db: String, target_db: String) {
    let http = client();
    let op = Op::parse(OP, SHAPE).unwrap();
    let fp = gpu_fingerprint("NVIDIA", "hopper", "H100 80GB HBM3");
    // Quorum 1: one session's report elects at the device, arch and vendor keys.
    let a = Server::start(&source_db, &["--quorum", "1"]);
    let (sid, v) = open_session(&http, &a.url, &fp).await;
    let key = v["device_key"].as_str().unwrap().to_string();
    let q = queue(&http, &a.url, &sid, OP, SHAPE, TARGET).await;
    let (st, body) = report(&http, &a.url, &sid, &op, TARGET, vec![entry(&op, &q[1], 10.0), entry(&op, &q[2], 20.0)]).await;
    assert_eq!(st, 200, "{body}");
    let won = best(&http, &a.url, &key, OP, SHAPE, TARGET).await;
    assert_eq!(won["level"], "device", "{won}");
    assert_eq!(won["meta"]["sha256"], q[1]["sha256"]);
    // A device of the same architecture that the server has never seen.
    let sibling = "gpu-nvidia/hopper/nvidia-h200/-";
    let won_arch = best(&http, &a.url, sibling, OP, SHAPE, TARGET).await;
    assert_eq!(won_arch["level"], "arch", "{won_arch}");

    // Export: bundle.json, one file per kernel named by its hash, SHA256SUMS.
    let dir = temp_dir("out").join("bundle");
    let d = dir.to_str().unwrap();
    let (ok, out, err) =
        webtune(&["bundle", "export", "--database-url", &source_db, "--out", d, "--op", OP, "--shape", SHAPE, "--target", TARGET]);
    assert!(ok, "{err}");
    assert!(out.starts_with("exported 3 winners, 2 kernels "), "{out}");
    let manifest: Value = serde_json::from_slice(&std::fs::read(dir.join("bundle.json")).unwrap()).unwrap();
    assert_eq!(manifest["format"], 1);
    assert_eq!(manifest["covers"], serde_json::json!([{"op": OP, "shape": SHAPE, "target": TARGET}]));
    let winners = manifest["winners"].as_array().unwrap();
    let levels: Vec<&str> = winners.iter().map(|w| w["level"].as_str().unwrap()).collect();
    assert_eq!(levels, ["arch", "device", "vendor"]);
    for w in winners {
        assert_eq!(w["kernel_sha256"], q[1]["sha256"]);
        assert_eq!(w["meta"]["sha256"], q[1]["sha256"]);
        assert_eq!(w["space_checksum"], q[1]["space_checksum"]);
        assert!(w["votes"].as_i64().unwrap() > 0 && w["updated_at"].as_i64().unwrap() > 0);
    }
    let default_sha = manifest["defaults"][0]["kernel_sha256"].as_str().unwrap();
    let winner_sha = q[1]["sha256"].as_str().unwrap();
    for sha in [winner_sha, default_sha] {
        let bytes = std::fs::read(dir.join(format!("kernels/{sha}.wgsl"))).unwrap();
        assert_eq!(webtune_compiler::kernel::sha256_hex(&bytes), sha);
    }
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    assert_eq!(sums.lines().count(), 3, "{sums}");
    assert!(sums.contains(&format!("{winner_sha}  kernels/{winner_sha}.wgsl")), "{sums}");
    // Export by device key: the chain of another vendor has nothing.
    let (ok, out, err) = webtune(&[
        "bundle",
        "export",
        "--database-url",
        &source_db,
        "--out",
        temp_dir("amd").join("b").to_str().unwrap(),
        "--device-key",
        "gpu-amd/rdna3/rx-7900/-",
    ]);
    assert!(ok, "{err}");
    assert!(out.starts_with("exported 0 winners, 0 kernels"), "{out}");
    drop(a);

    // Import into a fresh database; its server answers as the first did.
    let (ok, out, err) = webtune(&["bundle", "import", "--database-url", &target_db, d]);
    assert!(ok, "{err}");
    assert!(out.starts_with("imported 3 winners (3 added, 0 replaced, 0 unchanged, 0 kept: newer here), 1 kernels"), "{out}");
    let (ok, out, err) = webtune(&["bundle", "import", "--database-url", &target_db, d]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with("imported 3 winners (0 added, 0 replaced, 3 unchanged, 0 kept: newer here)"),
        "a second import changes nothing: {out}"
    );
    let b = Server::start(&target_db, &["--quorum", "1"]);
    let again = best(&http, &b.url, &key, OP, SHAPE, TARGET).await;
    assert_eq!(again["level"], "device", "{again}");
    assert_eq!(again["meta"], won["meta"]);
    assert_eq!(again["votes"], won["votes"]);
    let again_arch = best(&http, &b.url, sibling, OP, SHAPE, TARGET).await;
    assert_eq!(again_arch["level"], "arch");
    assert_eq!(again_arch["meta"]["sha256"], won_arch["meta"]["sha256"]);
    let r = http.get(format!("{}{}", b.url, again["url"].as_str().unwrap())).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(webtune_compiler::kernel::sha256_hex(&r.bytes().await.unwrap()), winner_sha);

    // The second database's own crowd elects another kernel; importing the
    // older bundle again keeps the newer winner.
    let (sid2, _) = open_session(&http, &b.url, &fp).await;
    let q2 = queue(&http, &b.url, &sid2, OP, SHAPE, TARGET).await;
    let (st, body) = report(&http, &b.url, &sid2, &op, TARGET, vec![entry(&op, &q2[2], 5.0)]).await;
    assert_eq!(st, 200, "{body}");
    let newer = best(&http, &b.url, &key, OP, SHAPE, TARGET).await;
    assert_eq!(newer["meta"]["sha256"], q2[2]["sha256"], "{newer}");
    assert_ne!(newer["meta"]["sha256"], won["meta"]["sha256"]);
    let (ok, out, err) = webtune(&["bundle", "import", "--database-url", &target_db, d]);
    assert!(ok, "{err}");
    assert!(out.starts_with("imported 3 winners (0 added, 0 replaced, 0 unchanged, 3 kept: newer here)"), "{out}");
    let (ok, _, err) = webtune(&["bundle", "export", "--database-url", &target_db, "--out", d]);
    assert!(ok, "re-export over the earlier bundle: {err}");
    let re: Value = serde_json::from_slice(&std::fs::read(dir.join("bundle.json")).unwrap()).unwrap();
    assert!(re["winners"].as_array().unwrap().iter().all(|w| w["kernel_sha256"] == q2[2]["sha256"]), "{re}");
    assert!(!dir.join(format!("kernels/{winner_sha}.wgsl")).exists(), "a kernel the new bundle does not list is removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_carries_winners_to_a_fresh_database_sqlite() {
    scenario(sqlite_url(), sqlite_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL at WEBTUNE_TEST_PG_URL (scripts/test.sh starts one)"]
async fn a_bundle_carries_winners_to_a_fresh_database_postgres() {
    scenario(postgres_url().await, postgres_url().await).await;
}

/// A bundle of the default kernel only (an empty database), for the
/// refusals below.
fn small_bundle() -> PathBuf {
    let dir = temp_dir("small").join("bundle");
    let (ok, out, err) =
        webtune(&["bundle", "export", "--database-url", &sqlite_url(), "--out", dir.to_str().unwrap(), "--op", OP, "--shape", SHAPE]);
    assert!(ok, "{err}");
    assert!(out.starts_with("exported 0 winners, 2 kernels (2 op/shape/target"), "{out}");
    dir
}

#[test]
fn damaged_bundles_are_refused_before_the_database_is_touched() {
    let good = small_bundle();
    let work = temp_dir("bad");
    let db_path = work.join("never.sqlite");
    let db = format!("sqlite://{}", db_path.display());

    // A kernel file altered (one byte more).
    let altered = work.join("altered");
    copy_dir(&good, &altered);
    let kernel = std::fs::read_dir(altered.join("kernels")).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&kernel).unwrap();
    bytes.push(b'\n');
    std::fs::write(&kernel, bytes).unwrap();
    refused(&altered, &db, "truncated or altered");

    // bundle.json cut short.
    let truncated = work.join("truncated");
    copy_dir(&good, &truncated);
    let text = std::fs::read(truncated.join("bundle.json")).unwrap();
    std::fs::write(truncated.join("bundle.json"), &text[..text.len() / 2]).unwrap();
    refused(&truncated, &db, "bundle.json: SHA-256 is");

    // A format from the future, its checksum list made to match.
    let future = work.join("future");
    copy_dir(&good, &future);
    let text = std::fs::read_to_string(future.join("bundle.json")).unwrap().replacen("\"format\": 1", "\"format\": 2", 1);
    std::fs::write(future.join("bundle.json"), &text).unwrap();
    let sums = std::fs::read_to_string(future.join("SHA256SUMS")).unwrap();
    let first = sums.lines().next().unwrap();
    let sums = sums.replacen(first, &format!("{}  bundle.json", webtune_compiler::kernel::sha256_hex(text.as_bytes())), 1);
    std::fs::write(future.join("SHA256SUMS"), sums).unwrap();
    refused(&future, &db, "bundle format 2 is not one this webtune reads");

    // A kernel the list names but the copy lost; no list at all; no directory.
    let lost = work.join("lost");
    copy_dir(&good, &lost);
    std::fs::remove_file(std::fs::read_dir(lost.join("kernels")).unwrap().next().unwrap().unwrap().path()).unwrap();
    refused(&lost, &db, "missing, though SHA256SUMS lists it");
    let unlisted = work.join("unlisted");
    copy_dir(&good, &unlisted);
    std::fs::remove_file(unlisted.join("SHA256SUMS")).unwrap();
    refused(&unlisted, &db, "SHA256SUMS: missing");
    refused(&work.join("nowhere"), &db, "no bundle at");
    assert!(!db_path.exists(), "no refused import may create or touch the database");

    // The untouched bundle imports (nothing but defaults: no winners).
    let (ok, out, err) = webtune(&["bundle", "import", "--database-url", &db, good.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.starts_with("imported 0 winners"), "{out}");
}

/// Without --target, each op takes the targets it has kernels for: an f16
/// op WGSL only, matmul_i16 Wasm only, the rest both.
#[test]
fn export_without_a_target_takes_each_ops_own_targets() {
    let dir = temp_dir("own").join("bundle");
    let d = dir.to_str().unwrap();
    let db = sqlite_url();
    let (ok, out, err) = webtune(&[
        "bundle",
        "export",
        "--database-url",
        &db,
        "--out",
        d,
        "--op",
        "matmul+f16",
        "--shape",
        "8,16,8",
        "--op",
        "matmul_i16",
        "--shape",
        "8,16,8",
        "--op",
        OP,
        "--shape",
        SHAPE,
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("(4 op/shape/target"), "{out}");
    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("bundle.json")).unwrap()).unwrap();
    let mut covers: Vec<String> = manifest["covers"].as_array().unwrap().iter().map(|c| format!("{} {}", c["op"], c["target"])).collect();
    covers.sort();
    assert_eq!(
        covers,
        [r#""matmul" "wasm""#, r#""matmul" "wgsl""#, r#""matmul+f16" "wgsl""#, r#""matmul_i16" "wasm""#].map(String::from),
        "{OP}"
    );
}

#[test]
fn bad_export_arguments_are_one_line() {
    let out = temp_dir("args").join("b");
    let o = out.to_str().unwrap();
    let db = sqlite_url();
    for (args, want) in [
        (vec!["--op", OP], "give one --shape for each --op"),
        (vec!["--op", "conv", "--shape", "1,2"], "conv"),
        (vec!["--device-key", "nvidia"], "is not a device key"),
        (vec!["--op", OP, "--shape", SHAPE, "--target", "cuda"], "cuda"),
        (vec!["--op", "matmul+f16", "--shape", SHAPE, "--target", "wasm"], "matmul+f16 has no wasm kernels"),
    ] {
        let mut full = vec!["bundle", "export", "--database-url", &db, "--out", o];
        full.extend(args);
        let (ok, _, err) = webtune(&full);
        assert!(!ok, "{full:?} succeeded");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(want), "expected `{want}` in: {err}");
    }
    // A directory that holds something else is never written into.
    let other = temp_dir("other");
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    let (ok, _, err) = webtune(&["bundle", "export", "--database-url", &db, "--out", other.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("neither empty nor a bundle"), "{err}");
}
