//! Static bundles (docs/static-bundles.md): the winners of a kernel
//! database and their kernels as plain files that any static host can
//! serve, read by the browser runtime (`bundle` option of `Webtune.open`)
//! and by `webtune bundle import`.
//!
//! A bundle is a directory:
//!
//! - `bundle.json`: [`Manifest`], format [`FORMAT`];
//! - `kernels/{sha256}.wasm` or `.wgsl`: each kernel's bytes, named by
//!   their SHA-256;
//! - `SHA256SUMS`: one `{sha256}  {path}` line (the `sha256sum` format) for
//!   `bundle.json` and every kernel file, written last, so that a bundle
//!   cut short by a failed copy has none, or one that does not match.
//!
//! Reading checks every line of `SHA256SUMS`, then that every kernel the
//! manifest names is there under its own hash; any difference refuses the
//! whole bundle with one line ([`BundleError`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use webtune_compiler::{KernelMeta, Op, Schedule, Target, compile};
use webtune_kernel_db::{Db, DeviceKeys, Imported, KernelKind, Level, NewKernel, Winner, sha256_hex};
use webtune_tuner::Settings;

/// The bundle format this code writes and reads.
pub const FORMAT: u32 = 1;
/// The manifest's file name.
pub const MANIFEST: &str = "bundle.json";
/// The checksum list's file name.
pub const SUMS: &str = "SHA256SUMS";
/// Largest manifest or checksum list read, bytes.
pub const MAX_MANIFEST: u64 = 64 << 20;
/// Largest kernel file read, bytes.
pub const MAX_KERNEL: u64 = 16 << 20;

/// Why a bundle could not be written or read: one line, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{0}")]
    Io(String),
    #[error("{path}: {why}")]
    Bad { path: String, why: String },
    #[error("{0}")]
    Db(#[from] webtune_kernel_db::DbError),
    #[error("{0}")]
    Input(String),
}

fn io(path: &Path, what: &str, e: &std::io::Error) -> BundleError {
    BundleError::Io(format!("{what} {}: {e}", path.display()))
}

fn bad(path: &Path, why: impl Into<String>) -> BundleError {
    BundleError::Bad { path: path.display().to_string(), why: why.into() }
}

/// `bundle.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// When the bundle was written, Unix milliseconds.
    pub created_at: i64,
    /// The device key the export was limited to (its device, arch and
    /// vendor winners only), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_key: Option<String>,
    /// Every (op, shape, target) the bundle answers for.
    pub covers: Vec<Covered>,
    /// The winners, by op, shape, target, level and key.
    pub winners: Vec<BundleWinner>,
    /// The portable default kernel of every covered (op, shape, target):
    /// what the server answers where no winner applies.
    pub defaults: Vec<BundleDefault>,
}

/// One (op, shape, target) a bundle covers.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Covered {
    pub op: String,
    /// Comma-separated dimensions, as in `GET /v1/kernels/best`.
    pub shape: String,
    pub target: String,
}

/// One winner: the database's `winners` row and its kernel's `kernel.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BundleWinner {
    pub op: String,
    pub shape: String,
    pub target: String,
    /// `device`, `arch` or `vendor`.
    pub level: Level,
    pub level_key: String,
    pub space_checksum: String,
    pub kernel_sha256: String,
    pub votes: i64,
    pub total_votes: i64,
    pub reports: i64,
    pub best_median_us: f64,
    /// When the database last elected it, Unix milliseconds.
    pub updated_at: i64,
    /// The kernel's metadata (`kernel.json`).
    pub meta: Value,
}

/// The portable default kernel of one covered (op, shape, target).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BundleDefault {
    pub op: String,
    pub shape: String,
    pub target: String,
    pub kernel_sha256: String,
    pub meta: Value,
}

/// A kernel file's path inside a bundle.
pub fn kernel_path(sha256: &str, target: &str) -> String {
    format!("kernels/{sha256}.{target}")
}

/// What to export.
#[derive(Clone, Debug, Default)]
pub struct ExportSpec {
    /// The kinds to export; empty: every kind with a winner.
    pub kinds: Vec<KernelKind>,
    /// Only this device key's chain (device, arch and vendor winners).
    pub device_key: Option<String>,
}

/// What an export wrote.
#[derive(Clone, Debug, Default)]
pub struct Exported {
    pub winners: usize,
    pub kernels: usize,
    pub covers: usize,
    /// Winners left out because this server's rules moved on (another space
    /// checksum: the server would not serve them either).
    pub stale: usize,
}

/// The kind of `op` on `target`, as the database and the wire name it.
pub fn kind_of(op: &Op, target: Target) -> KernelKind {
    crate::service::kind_of(op, target)
}

fn rules_checksum(kind: &KernelKind) -> Result<String, BundleError> {
    let (op, target) = parse_kind(kind)?;
    Ok(webtune_tuner::rules_checksum(&op, target, &Settings::builtin(target)))
}

fn parse_kind(kind: &KernelKind) -> Result<(Op, Target), BundleError> {
    let op = Op::parse(&kind.op, &kind.shape).map_err(|e| BundleError::Input(format!("{kind}: {e}")))?;
    let target: Target = kind.target.parse().map_err(|e: String| BundleError::Input(format!("{kind}: {e}")))?;
    Ok((op, target))
}

/// Writes the bundle `spec` asks for from `db` into `dir`, which must be
/// absent, empty, or an earlier bundle (replaced: files it no longer
/// lists are removed).
pub async fn export(db: &Db, spec: &ExportSpec, dir: &Path, now_ms: i64) -> Result<Exported, BundleError> {
    let keys = match &spec.device_key {
        Some(k) => Some(crate::service::device::keys_from_device_key(k).ok_or_else(|| {
            BundleError::Input(format!("`{k}` is not a device key: give one of four `/`-separated parts, e.g. gpu-nvidia/hopper/h100/-"))
        })?),
        None => None,
    };
    let on_chain = |w: &Winner, keys: &DeviceKeys| keys.key(w.level) == Some(w.level_key.as_str());
    let mut found = Vec::new();
    if spec.kinds.is_empty() {
        found = db.winners_with_meta(None).await?;
    } else {
        for k in &spec.kinds {
            found.extend(db.winners_with_meta(Some(k)).await?);
        }
    }
    let mut checksums: BTreeMap<(String, String, String), String> = BTreeMap::new();
    let mut out = Exported::default();
    let mut winners = Vec::new();
    let mut covers: BTreeSet<Covered> =
        spec.kinds.iter().map(|k| Covered { op: k.op.clone(), shape: k.shape.clone(), target: k.target.clone() }).collect();
    for b in found {
        let w = b.winner;
        if keys.as_ref().is_some_and(|keys| !on_chain(&w, keys)) {
            continue;
        }
        let id = (w.kind.op.clone(), w.kind.shape.clone(), w.kind.target.clone());
        let current = match checksums.get(&id) {
            Some(c) => c.clone(),
            None => {
                let c = rules_checksum(&w.kind)?;
                checksums.insert(id, c.clone());
                c
            }
        };
        if w.space_checksum != current {
            out.stale += 1;
            continue;
        }
        let meta: Value = serde_json::from_str(&b.meta_json)
            .map_err(|e| BundleError::Input(format!("kernel {} has unreadable metadata in the database: {e}", w.kernel_sha256)))?;
        covers.insert(Covered { op: w.kind.op.clone(), shape: w.kind.shape.clone(), target: w.kind.target.clone() });
        winners.push(BundleWinner {
            op: w.kind.op,
            shape: w.kind.shape,
            target: w.kind.target,
            level: w.level,
            level_key: w.level_key,
            space_checksum: w.space_checksum,
            kernel_sha256: w.kernel_sha256,
            votes: w.votes,
            total_votes: w.total_votes,
            reports: w.reports,
            best_median_us: w.best_median_us,
            updated_at: w.updated_at,
            meta,
        });
    }
    // Kernel files: every winner's, from the database, and every covered
    // kind's portable default, compiled here as the server would.
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for w in &winners {
        let path = kernel_path(&w.kernel_sha256, &w.target);
        if files.contains_key(&path) {
            continue;
        }
        let Some((bytes, _)) = db.kernel_bytes(&w.kernel_sha256).await? else {
            return Err(BundleError::Input(format!("kernel {} of a winner is missing from the database", w.kernel_sha256)));
        };
        if sha256_hex(&bytes) != w.kernel_sha256 {
            return Err(BundleError::Input(format!("kernel {} in the database does not hash to its name", w.kernel_sha256)));
        }
        files.insert(path, bytes);
    }
    let mut defaults = Vec::new();
    for c in &covers {
        let kind = KernelKind { op: c.op.clone(), shape: c.shape.clone(), target: c.target.clone() };
        let (op, target) = parse_kind(&kind)?;
        let k = compile(&op, target, &Schedule::default_for(&op, target))
            .map_err(|e| BundleError::Input(format!("compiling the default kernel of {kind}: {e}")))?;
        let meta = serde_json::to_value(&k.meta).map_err(|e| BundleError::Input(e.to_string()))?;
        files.entry(kernel_path(&k.meta.sha256, &c.target)).or_insert(k.bytes);
        defaults.push(BundleDefault {
            op: c.op.clone(),
            shape: c.shape.clone(),
            target: c.target.clone(),
            kernel_sha256: k.meta.sha256,
            meta,
        });
    }
    let manifest = Manifest {
        format: FORMAT,
        created_at: now_ms,
        device_key: spec.device_key.clone(),
        covers: covers.into_iter().collect(),
        winners,
        defaults,
    };
    let mut text = serde_json::to_vec_pretty(&manifest).map_err(|e| BundleError::Input(e.to_string()))?;
    text.push(b'\n');
    write_dir(dir, &text, &files)?;
    out.winners = manifest.winners.len();
    out.kernels = files.len();
    out.covers = manifest.covers.len();
    Ok(out)
}

/// Writes `bundle.json`, the kernel files and, last, `SHA256SUMS` into
/// `dir`; each file through a temporary name and a rename.
fn write_dir(dir: &Path, manifest: &[u8], files: &BTreeMap<String, Vec<u8>>) -> Result<(), BundleError> {
    if dir.exists() {
        if !dir.is_dir() {
            return Err(BundleError::Input(format!("{} is not a directory: give a new or empty directory to --out", dir.display())));
        }
        let empty = std::fs::read_dir(dir).map_err(|e| io(dir, "reading", &e))?.next().is_none();
        if !empty && !dir.join(MANIFEST).is_file() {
            return Err(BundleError::Input(format!(
                "{} is neither empty nor a bundle (no {MANIFEST}): give a new or empty directory to --out",
                dir.display()
            )));
        }
    }
    let kernels = dir.join("kernels");
    std::fs::create_dir_all(&kernels).map_err(|e| io(&kernels, "creating", &e))?;
    // An earlier bundle here stops being one until the new list is written.
    let sums_path = dir.join(SUMS);
    if sums_path.exists() {
        std::fs::remove_file(&sums_path).map_err(|e| io(&sums_path, "removing", &e))?;
    }
    let mut sums = format!("{}  {MANIFEST}\n", sha256_hex(manifest));
    for (path, bytes) in files {
        write_file(&dir.join(path), bytes)?;
        sums.push_str(&format!("{}  {path}\n", sha256_hex(bytes)));
    }
    // Kernel files of an earlier bundle that this one does not list.
    for e in std::fs::read_dir(&kernels).map_err(|e| io(&kernels, "reading", &e))? {
        let e = e.map_err(|e| io(&kernels, "reading", &e))?;
        let name = format!("kernels/{}", e.file_name().to_string_lossy());
        if !files.contains_key(&name) {
            std::fs::remove_file(e.path()).map_err(|err| io(&e.path(), "removing", &err))?;
        }
    }
    write_file(&dir.join(MANIFEST), manifest)?;
    write_file(&sums_path, sums.as_bytes())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), BundleError> {
    let tmp = path.with_extension("tmp-webtune");
    std::fs::write(&tmp, bytes).map_err(|e| io(&tmp, "writing", &e))?;
    std::fs::rename(&tmp, path).map_err(|e| io(path, "writing", &e))
}

fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, BundleError> {
    let f = std::fs::File::open(path).map_err(|e| io(path, "reading", &e))?;
    let mut bytes = Vec::new();
    f.take(cap + 1).read_to_end(&mut bytes).map_err(|e| io(path, "reading", &e))?;
    if bytes.len() as u64 > cap {
        return Err(bad(path, format!("larger than {} MiB", cap >> 20)));
    }
    Ok(bytes)
}

/// A bundle read and checked: its manifest and its kernel files' bytes by
/// SHA-256.
#[derive(Debug)]
pub struct Checked {
    pub manifest: Manifest,
    pub kernels: BTreeMap<String, Vec<u8>>,
}

/// Reads the bundle in `dir` and checks it whole: `SHA256SUMS` against
/// every file it lists, the format, and every kernel the manifest names
/// (present, under its own hash, with metadata of the same op, shape,
/// target and hash).
pub fn read(dir: &Path) -> Result<Checked, BundleError> {
    if !dir.is_dir() {
        return Err(BundleError::Input(format!(
            "no bundle at {}: not a directory (give the directory `webtune bundle export` wrote)",
            dir.display()
        )));
    }
    let sums_path = dir.join(SUMS);
    if !sums_path.is_file() {
        return Err(bad(&sums_path, "missing: not a webtune bundle, or one whose export or copy did not finish"));
    }
    let sums = String::from_utf8(read_capped(&sums_path, MAX_MANIFEST)?).map_err(|_| bad(&sums_path, "not UTF-8 text"))?;
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    for (n, line) in sums.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let Some((hash, name)) = line.split_once("  ") else {
            return Err(bad(&sums_path, format!("line {} is not `SHA256  PATH`", n + 1)));
        };
        let safe = name == MANIFEST
            || name.strip_prefix("kernels/").is_some_and(|f| !f.is_empty() && !f.contains('/') && !f.contains('\\') && !f.starts_with('.'));
        if !is_hex64(hash) || !safe {
            return Err(bad(&sums_path, format!("line {} is not `SHA256  PATH` with a path inside the bundle", n + 1)));
        }
        listed.insert(name.to_string(), hash.to_string());
    }
    let Some(manifest_sum) = listed.get(MANIFEST) else {
        return Err(bad(&sums_path, format!("does not list {MANIFEST}")));
    };
    let manifest_path = dir.join(MANIFEST);
    if !manifest_path.is_file() {
        return Err(bad(&manifest_path, "missing"));
    }
    let text = read_capped(&manifest_path, MAX_MANIFEST)?;
    let got = sha256_hex(&text);
    if &got != manifest_sum {
        return Err(bad(&manifest_path, format!("SHA-256 is {got}, {SUMS} says {manifest_sum}: the file is truncated or altered")));
    }
    let raw: Value = serde_json::from_slice(&text).map_err(|e| bad(&manifest_path, format!("not JSON: {e}")))?;
    match raw.get("format").and_then(Value::as_u64) {
        Some(f) if f == u64::from(FORMAT) => {}
        Some(f) => return Err(bad(&manifest_path, format!("bundle format {f} is not one this webtune reads (format {FORMAT})"))),
        None => return Err(bad(&manifest_path, "no `format`: not a webtune bundle manifest")),
    }
    let manifest: Manifest = serde_json::from_value(raw).map_err(|e| bad(&manifest_path, format!("format {FORMAT}: {e}")))?;
    let mut kernels = BTreeMap::new();
    for (name, want) in &listed {
        if name == MANIFEST {
            continue;
        }
        let path = dir.join(name);
        if !path.is_file() {
            return Err(bad(&path, format!("missing, though {SUMS} lists it")));
        }
        let bytes = read_capped(&path, MAX_KERNEL)?;
        let got = sha256_hex(&bytes);
        if &got != want {
            return Err(bad(&path, format!("SHA-256 is {got}, {SUMS} says {want}: the file is truncated or altered")));
        }
        kernels.insert(got, bytes);
    }
    let entries = manifest
        .winners
        .iter()
        .map(|w| (&w.op, &w.shape, &w.target, &w.kernel_sha256, &w.meta))
        .chain(manifest.defaults.iter().map(|d| (&d.op, &d.shape, &d.target, &d.kernel_sha256, &d.meta)));
    for (op, shape, target, sha, meta) in entries {
        let file = kernel_path(sha, target);
        let path = dir.join(&file);
        if listed.get(&file) != Some(sha) {
            return Err(bad(&path, format!("the kernel of {op} {shape} {target} is not in {SUMS} under its own hash")));
        }
        let meta: KernelMeta = serde_json::from_value(meta.clone())
            .map_err(|e| bad(&manifest_path, format!("kernel {sha}: metadata is not a kernel.json: {e}")))?;
        let shape_of_meta = meta.shape.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        if meta.sha256 != *sha || meta.op != *op || shape_of_meta != *shape || meta.target.name() != target {
            return Err(bad(
                &manifest_path,
                format!("kernel {sha}: its metadata describes another kernel than {op} {shape} {target} {sha}"),
            ));
        }
    }
    for w in &manifest.winners {
        if w.level == Level::Default {
            return Err(bad(
                &manifest_path,
                format!("a winner of {} {} {} at level default (never a stored winner)", w.op, w.shape, w.target),
            ));
        }
    }
    Ok(Checked { manifest, kernels })
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// What an import did.
#[derive(Clone, Debug, Default)]
pub struct ImportSummary {
    pub added: usize,
    pub replaced: usize,
    pub unchanged: usize,
    pub kept: usize,
    pub kernels: usize,
}

impl ImportSummary {
    pub fn winners(&self) -> usize {
        self.added + self.replaced + self.unchanged + self.kept
    }
}

/// Stores a checked bundle's winners and their kernels in `db`, all in one
/// transaction: a key with no winner gets the bundle's, a key whose winner
/// is older (`updated_at`) than the bundle's gets it replaced, and a key
/// whose winner is as new or newer keeps it (see [`Db::import_winners`]).
/// The portable defaults are not stored: a server compiles its own.
pub async fn import(db: &Db, b: &Checked) -> Result<ImportSummary, BundleError> {
    let mut kernels: BTreeMap<&str, NewKernel> = BTreeMap::new();
    let mut winners = Vec::with_capacity(b.manifest.winners.len());
    for w in &b.manifest.winners {
        let kind = KernelKind { op: w.op.clone(), shape: w.shape.clone(), target: w.target.clone() };
        if !kernels.contains_key(w.kernel_sha256.as_str()) {
            let meta: KernelMeta = serde_json::from_value(w.meta.clone()).map_err(|e| BundleError::Input(e.to_string()))?;
            let bytes = b.kernels.get(&w.kernel_sha256).cloned().unwrap_or_default();
            kernels.insert(
                &w.kernel_sha256,
                NewKernel {
                    sha256: w.kernel_sha256.clone(),
                    kind: kind.clone(),
                    schedule_json: serde_json::to_string(&meta.config).map_err(|e| BundleError::Input(e.to_string()))?,
                    meta_json: serde_json::to_string(&w.meta).map_err(|e| BundleError::Input(e.to_string()))?,
                    bytes,
                },
            );
        }
        winners.push(Winner {
            kind,
            level: w.level,
            level_key: w.level_key.clone(),
            space_checksum: w.space_checksum.clone(),
            kernel_sha256: w.kernel_sha256.clone(),
            votes: w.votes,
            total_votes: w.total_votes,
            reports: w.reports,
            best_median_us: w.best_median_us,
            updated_at: w.updated_at,
        });
    }
    let kernels: Vec<NewKernel> = kernels.into_values().collect();
    let outcomes = db.import_winners(&kernels, &winners).await?;
    let mut s = ImportSummary { kernels: kernels.len(), ..ImportSummary::default() };
    for o in outcomes {
        match o {
            Imported::Added => s.added += 1,
            Imported::Replaced => s.replaced += 1,
            Imported::Unchanged => s.unchanged += 1,
            Imported::KeptNewer => s.kept += 1,
        }
    }
    Ok(s)
}
