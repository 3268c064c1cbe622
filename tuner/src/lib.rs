//! # webtune-tuner
//!
//! From a device's fingerprint to the candidates it should try, in order:
//!
//! 1. [`Fingerprint`]: what a browser exposes (WebGPU adapter info, limits
//!    and features; Wasm SIMD and threads support and core count; browser, OS and the
//!    microbenchmark vector ρ), every field optional;
//! 2. [`DeviceKeys`]: the normalised device, architecture and vendor keys
//!    that results are stored and looked up under (the rule is in
//!    [`fingerprint`]'s docs), and the [`Device`] they describe;
//! 3. [`hardware`]: the resource model of the device's cores by vendor and
//!    architecture (registers, warps, workgroup memory; CPU registers and L1);
//! 4. [`lite_space`]: NNJIT's Table 1 formulas and heuristics 1–7 with a
//!    relaxation ratio, the microbenchmark's fixed settings
//!    ([`Settings`]), the adapter's limits and `Schedule::check`, giving at
//!    most [`LITE_BUDGET`] candidates best first, the size of the naive space
//!    they were pruned from, and a checksum of the list;
//! 5. [`extended_space`]: winners of similar devices merged in front.
//!
//! ```
//! use webtune_compiler::{Op, Target};
//! use webtune_tuner::{Device, Fingerprint, Settings, lite_space};
//!
//! let fp = Fingerprint::from_json(r#"{"adapter": {"vendor": "nvidia", "architecture": "hopper"}}"#).unwrap();
//! let device = Device::from_keys(&fp.keys().unwrap());
//! assert_eq!(device.keys.device_key, "gpu-nvidia/hopper/unknown/-");
//! let op = Op::parse("matmul", "384,768,768").unwrap();
//! let space = lite_space(&op, Target::Wgsl, &device, &Settings::builtin(Target::Wgsl));
//! assert!(!space.schedules.is_empty() && space.schedules.len() <= 32);
//! assert!(space.naive_size > 1_000_000);
//! ```
//!
//! ## Invariants
//!
//! - Pure: no clock, no randomness, no I/O, no HTTP or SQL. The same
//!   fingerprint, op, target and settings give the same space and checksum on
//!   every machine and every run; the server relies on it to rebuild a
//!   session's space from its keys alone ([`Device::from_keys`]).
//! - A fingerprint is never refused for missing or unknown values, only for
//!   structure (not an object, a malformed ρ or target).
//! - Every schedule in a space passes `Schedule::check` for its op and target,
//!   and a space is never empty.

pub mod extended;
pub mod fingerprint;
pub mod hardware;
pub mod presets;
pub mod rho;
pub mod settings;
pub mod space;

pub use extended::{Source, extended_space};
pub use fingerprint::{Device, DeviceClass, DeviceKeys, Fingerprint, FingerprintError};
pub use hardware::{CpuModel, GpuModel};
pub use rho::{RHO_MARGIN, RhoPrimitive, rho_bit, rho_primitives, rho_version};
pub use settings::Settings;
pub use space::{LITE_BUDGET, Space, lite_space, naive_size, rules_checksum};
