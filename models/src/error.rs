//! The one error type of import and the store. Every message is one line
//! that names the file, tensor or field at fault and, where there is one,
//! what to do about it.

/// Why an import or a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The path is not a model: not a directory or a zip, no model inside,
    /// a file missing, more than one model inside.
    #[error("{0}")]
    Source(String),
    /// A JSON file that does not parse or lacks a field.
    #[error("{file}: {why}")]
    Json { file: String, why: String },
    /// `config.json` names an architecture that is not a BERT encoder.
    #[error(
        "config.json: architecture `{0}` is not supported; webtune imports BERT-family encoders (architectures [\"BertModel\"] or model_type \"bert\")"
    )]
    NotBert(String),
    /// A config value webtune cannot run or that contradicts another.
    #[error("{0}")]
    Invalid(String),
    /// The safetensors file does not parse (truncated, corrupt).
    #[error("model.safetensors is corrupt or truncated: {0}")]
    Safetensors(String),
    /// A tensor the config implies is absent.
    #[error("model.safetensors has no tensor `{name}` (config.json implies it)")]
    MissingTensor { name: String },
    /// A tensor has another shape than the config implies.
    #[error("tensor `{name}` has shape {got:?}, expected {expected:?} ({why})")]
    Shape { name: String, expected: Vec<usize>, got: Vec<usize>, why: String },
    /// A tensor of a dtype webtune does not import.
    #[error("tensor `{name}` has dtype {dtype}; webtune imports F32 weights (F16 and BF16 are widened to F32)")]
    Dtype { name: String, dtype: String },
    /// A GGUF file that does not read, or holds a model webtune does not
    /// import (another architecture, a tensor type, shape or name it does
    /// not run, a tokenizer it cannot build).
    #[error("{file}: {why}")]
    Gguf { file: String, why: String },
    /// A model name that is not a valid store name.
    #[error("model name `{0}` is not valid: use 1 to 64 of a-z, 0-9, `.` and `-`, starting and ending with a letter or digit")]
    Name(String),
}

impl ModelError {
    pub(crate) fn io(path: impl std::fmt::Display, source: std::io::Error) -> ModelError {
        ModelError::Io { path: path.to_string(), source }
    }
}
