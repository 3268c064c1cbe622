//! Device fingerprints as browsers send them, and the device keys derived
//! from them.
//!
//! Long on purpose: the fields, their lenient readers and the key derivation are one contract with the browser.
//!
//! A fingerprint is whatever the browser exposes, under the browser's own
//! field names. Every field is optional: browsers hide details (Chrome leaves
//! `adapter.device` empty unless a flag is set, Safari reports no
//! architecture), so a missing, empty or mistyped field is read as unknown,
//! never as an error. Unknown extra fields are ignored.
//!
//! ```json
//! {
//!   "target": "wgsl",
//!   "adapter": {"vendor": "nvidia", "architecture": "hopper", "device": "",
//!               "description": "NVIDIA H100 80GB HBM3",
//!               "subgroupMinSize": 32, "subgroupMaxSize": 32},
//!   "limits": {"maxComputeInvocationsPerWorkgroup": 1024,
//!              "maxComputeWorkgroupStorageSize": 49152,
//!              "maxComputeWorkgroupSizeX": 1024,
//!              "maxStorageBuffersPerShaderStage": 8},
//!   "features": ["timestamp-query", "subgroups"],
//!   "hardwareConcurrency": 16, "simd": true, "relaxedSimd": true, "threads": true,
//!   "cpuArchitecture": "x86",
//!   "browser": {"name": "Chrome", "version": "131.0"}, "os": "Linux",
//!   "rho": "1011"
//! }
//! ```
//!
//! The flat shape of the first service release, `{"vendor", "architecture",
//! "device", "description", "rho"}`, is read as a WebGPU adapter.
//!
//! # The device key rule
//!
//! Every part is a *slug*: trimmed, lower-cased, each run of characters
//! outside `[a-z0-9.]` turned into one `-`, no leading or trailing `-`, at
//! most [`MAX_PART`] bytes; an empty slug is `unknown`. A key has four
//! `/`-separated parts, `vendor/arch/device/rho`, and the arch and vendor keys
//! are its prefixes, so the database falls back device → arch → vendor →
//! portable default. `rho` is the primitive vector as a string of `0`/`1`, or
//! `-` when the client sent none.
//!
//! - **WebGPU clients** (`target` is `wgsl`, or no target and any adapter
//!   information): `gpu-{vendor}/{architecture}/{device}/{rho}`. The vendor
//!   is normalised (`NVIDIA Corporation`, `0x10de` → `nvidia`; `ati` → `amd`)
//!   and, when the browser hides it, read from the description (`Mali-G78` →
//!   `arm`). The device is `adapter.device`, else the description. When the
//!   adapter grants less than WebGPU's default compute limits (256
//!   invocations, 16 KiB of workgroup memory), the architecture part gets the
//!   suffix `.lim{invocations}x{bytes}`, so that the key alone determines the
//!   candidate space.
//! - **Wasm clients** (`target` is `wasm`, or nothing about an adapter):
//!   `cpu-{isa}/{simd}/{os}-{threads}t-{engine}/{rho}`. `isa` is `x86`, `arm`
//!   or `unknown` (from `cpuArchitecture`, else `arm` for Android and iOS);
//!   `simd` is `relaxed-simd`, `simd128`, `scalar` or `unknown`; the engine is
//!   the browser's Wasm engine (`v8`, `spidermonkey`, `jsc`), since it decides
//!   the machine code; `threads` is `hardwareConcurrency` (`unknown` if absent).
//!   A client that can run threaded kernels (`threads: true`: cross-origin
//!   isolated, `SharedArrayBuffer`, a threads module validates) on more than
//!   one core gets `{threads}t.mt` instead, e.g. `linux-8t.mt-v8`: its
//!   candidate space has threaded kernels, which a client without threads
//!   cannot run, so the two never share a device key. Every other client's
//!   key is what it was before threads existed. [`Device::from_keys`] reads
//!   the threads part back as the first `-`-separated segment of the form
//!   `{n}t`, `{n}t.mt` or `unknownt` (the engine after it may hold `-`; the
//!   OS slugs the rule normalises hold none), and lets a kernel use
//!   `min(n, MAX_THREADS)` threads where it ends in `.mt`, one otherwise.
//!
//! The same browser tuning both targets opens one session per target, each
//! with its `target`, so that Wasm winners are shared between CPUs and WGSL
//! winners between GPUs.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use webtune_compiler::Target;
use webtune_compiler::schedule::MAX_THREADS;

use crate::hardware::{CpuModel, GpuModel};

/// Longest slug part of a key, in bytes.
pub const MAX_PART: usize = 48;
/// Longest accepted ρ.
pub const MAX_RHO: usize = 64;
/// WebGPU's default `maxComputeInvocationsPerWorkgroup`.
pub const DEFAULT_INVOCATIONS: u32 = webtune_compiler::schedule::MAX_WORKGROUP_THREADS;
/// WebGPU's default `maxComputeWorkgroupStorageSize`.
pub const DEFAULT_WORKGROUP_BYTES: u32 = webtune_compiler::schedule::MAX_WORKGROUP_BYTES;

/// `GPUAdapterInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AdapterInfo {
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64", skip_serializing_if = "Option::is_none")]
    pub subgroup_min_size: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64", skip_serializing_if = "Option::is_none")]
    pub subgroup_max_size: Option<u64>,
}

/// The `GPUSupportedLimits` the tuner reads (others are accepted and ignored).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Limits {
    #[serde(default, deserialize_with = "lenient_u64", skip_serializing_if = "Option::is_none")]
    pub max_compute_invocations_per_workgroup: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64", skip_serializing_if = "Option::is_none")]
    pub max_compute_workgroup_storage_size: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64", skip_serializing_if = "Option::is_none")]
    pub max_compute_workgroup_size_x: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64", skip_serializing_if = "Option::is_none")]
    pub max_compute_workgroups_per_dimension: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64", skip_serializing_if = "Option::is_none")]
    pub max_storage_buffers_per_shader_stage: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64", skip_serializing_if = "Option::is_none")]
    pub max_storage_buffer_binding_size: Option<u64>,
}

/// The browser's name and version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Browser {
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// A native client's CPU description.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CpuInfo {
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
}

fn is_default<T: Default + PartialEq>(t: &T) -> bool {
    *t == T::default()
}

/// What a client tells the service about itself. See the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Fingerprint {
    /// `wasm` or `wgsl`: which kind of kernels this session tunes.
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, deserialize_with = "lenient_or_default")]
    pub adapter: AdapterInfo,
    #[serde(default, deserialize_with = "lenient_or_default")]
    pub limits: Limits,
    #[serde(default, deserialize_with = "lenient_strings", skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// `navigator.hardwareConcurrency`.
    #[serde(default, deserialize_with = "lenient_u64", skip_serializing_if = "Option::is_none")]
    pub hardware_concurrency: Option<u64>,
    /// Whether a module with SIMD128 validates.
    #[serde(default, deserialize_with = "lenient_bool", skip_serializing_if = "Option::is_none")]
    pub simd: Option<bool>,
    /// Whether a module with relaxed SIMD validates.
    #[serde(default, deserialize_with = "lenient_bool", skip_serializing_if = "Option::is_none")]
    pub relaxed_simd: Option<bool>,
    /// Whether Wasm threads (shared memory) are available.
    #[serde(default, deserialize_with = "lenient_bool", skip_serializing_if = "Option::is_none")]
    pub threads: Option<bool>,
    /// `navigator.userAgentData` high-entropy `architecture` (`x86`, `arm`).
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub cpu_architecture: Option<String>,
    /// Native clients (`webtune tune`) describe the CPU as `{"arch": "x86_64"}`;
    /// read where `cpuArchitecture` is absent.
    #[serde(default, deserialize_with = "lenient_or_default", skip_serializing_if = "is_default")]
    pub cpu: CpuInfo,
    #[serde(default, deserialize_with = "lenient_or_default")]
    pub browser: Browser,
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// NNJIT's primitive vector ρ, one `0`/`1` per microbenchmark primitive.
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub rho: Option<String>,
    /// Flat shape of the first release: the adapter's fields at the top level.
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, deserialize_with = "lenient_str", skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Why a fingerprint was refused. Only structure is refused: missing or
/// unknown values never are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FingerprintError {
    /// The fingerprint is not a JSON object.
    NotAnObject,
    /// `rho` is not a string of `0` and `1` of at most [`MAX_RHO`] digits.
    BadRho(String),
    /// `target` is neither `wasm` nor `wgsl`.
    BadTarget(String),
}

impl fmt::Display for FingerprintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FingerprintError::NotAnObject => {
                f.write_str("fingerprint must be a JSON object, e.g. {\"target\": \"wgsl\", \"adapter\": {\"vendor\": \"nvidia\"}}")
            }
            FingerprintError::BadRho(r) => {
                write!(f, "fingerprint.rho `{r}` must be a string of 0 and 1 (one bit per primitive, at most {MAX_RHO})")
            }
            FingerprintError::BadTarget(t) => write!(f, "fingerprint.target `{t}` must be wasm or wgsl"),
        }
    }
}

impl std::error::Error for FingerprintError {}

/// The keys a device's results are stored and looked up under, most specific
/// first (the same four strings as the kernel database's `DeviceKeys`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DeviceKeys {
    pub device_key: String,
    pub arch_key: String,
    pub vendor_key: String,
    /// ρ as sent (empty when none).
    pub rho: String,
}

impl fmt::Display for DeviceKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.device_key)
    }
}

impl DeviceKeys {
    /// The keys implied by a device key alone: its prefixes. `None` unless
    /// the key has the four parts `vendor/arch/device/rho`.
    pub fn from_device_key(device_key: &str) -> Option<DeviceKeys> {
        let parts: Vec<&str> = device_key.split('/').collect();
        let [vendor, arch, device, rho] = parts.as_slice() else { return None };
        if [vendor, arch, device, rho].iter().any(|p| p.is_empty()) {
            return None;
        }
        let rho = if *rho == "-" { String::new() } else { rho.to_string() };
        if !rho.bytes().all(|b| b == b'0' || b == b'1') {
            return None;
        }
        Some(DeviceKeys { device_key: device_key.to_string(), arch_key: format!("{vendor}/{arch}"), vendor_key: vendor.to_string(), rho })
    }
}

/// Which kind of processor a key describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceClass {
    Gpu,
    Cpu,
}

/// Support for Wasm SIMD, as the CPU key records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimdClass {
    RelaxedSimd,
    Simd128,
    Scalar,
    Unknown,
}

impl SimdClass {
    pub fn name(self) -> &'static str {
        match self {
            SimdClass::RelaxedSimd => "relaxed-simd",
            SimdClass::Simd128 => "simd128",
            SimdClass::Scalar => "scalar",
            SimdClass::Unknown => "unknown",
        }
    }
    fn parse(s: &str) -> SimdClass {
        match s {
            "relaxed-simd" => SimdClass::RelaxedSimd,
            "simd128" => SimdClass::Simd128,
            "scalar" => SimdClass::Scalar,
            _ => SimdClass::Unknown,
        }
    }
    /// Whether SIMD128 may be assumed. Unknown counts as yes: every browser
    /// released since 2021 validates SIMD128, and a client without it fails
    /// at validation rather than running slowly.
    pub fn simd(self) -> bool {
        self != SimdClass::Scalar
    }
    /// Whether relaxed SIMD may be used: only when the client said so.
    pub fn relaxed(self) -> bool {
        self == SimdClass::RelaxedSimd
    }
}

/// Compute limits the space builder respects, already capped at WebGPU's
/// defaults (the most a page gets without asking; `Schedule::check` assumes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GpuLimits {
    pub invocations: u32,
    pub workgroup_bytes: u32,
}

impl Default for GpuLimits {
    fn default() -> Self {
        GpuLimits { invocations: DEFAULT_INVOCATIONS, workgroup_bytes: DEFAULT_WORKGROUP_BYTES }
    }
}

/// Everything the space builder knows about a device: derived from its keys
/// alone, so that the server, which keeps only the keys of a session,
/// rebuilds exactly the space the client was given.
#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    pub keys: DeviceKeys,
    pub class: DeviceClass,
    /// Normalised GPU vendor (`nvidia`, ...) or CPU ISA (`x86`, `arm`).
    pub vendor: String,
    /// GPU architecture slug, or the CPU's SIMD class name.
    pub arch: String,
    pub limits: GpuLimits,
    pub simd: SimdClass,
    /// The CPU's operating system slug (`macos`, ...), `unknown` for GPUs.
    pub os: String,
    /// Most threads (parts) one Wasm kernel may use on this device:
    /// `min(hardwareConcurrency, MAX_THREADS)` when the key says the client
    /// runs threaded kernels (`{n}t.mt`), else 1 (and 1 for GPUs).
    pub threads: u32,
    pub gpu: GpuModel,
    pub cpu: CpuModel,
}

impl Device {
    /// The device a set of keys describes. Keys of the first release
    /// (`nvidia/ampere/...`, no `gpu-` prefix) are read as GPU keys; keys that
    /// say nothing usable give the conservative default models.
    pub fn from_keys(keys: &DeviceKeys) -> Device {
        let parts: Vec<&str> = keys.device_key.split('/').collect();
        let vendor_part = parts.first().copied().unwrap_or("unknown");
        let arch_part = parts.get(1).copied().unwrap_or("unknown");
        let device_part = parts.get(2).copied().unwrap_or("unknown");
        if let Some(isa) = vendor_part.strip_prefix("cpu-") {
            let simd = SimdClass::parse(arch_part);
            let os = device_part.split('-').next().unwrap_or("unknown").to_string();
            // `{os}-{threads}t-{engine}`; the engine's own name may hold '-'.
            let engine = device_part.splitn(3, '-').nth(2).unwrap_or("unknown");
            let threads = device_part.split('-').find_map(threads_segment).unwrap_or(1);
            return Device {
                keys: keys.clone(),
                class: DeviceClass::Cpu,
                vendor: isa.to_string(),
                arch: simd.name().to_string(),
                limits: GpuLimits::default(),
                simd,
                os: os.clone(),
                threads,
                gpu: GpuModel::for_gpu("unknown", "unknown"),
                cpu: CpuModel::for_cpu(isa, &os, engine),
            };
        }
        let vendor = vendor_part.strip_prefix("gpu-").unwrap_or(vendor_part).to_string();
        let (arch, limits) = split_limits(arch_part);
        Device {
            keys: keys.clone(),
            class: DeviceClass::Gpu,
            gpu: GpuModel::for_gpu(&vendor, &arch),
            cpu: CpuModel::for_cpu("unknown", "unknown", "unknown"),
            vendor,
            arch,
            limits,
            simd: SimdClass::Unknown,
            os: "unknown".to_string(),
            threads: 1,
        }
    }

    /// The device of a fingerprint: `Device::from_keys(&fp.keys()?)`.
    pub fn from_fingerprint(fp: &Fingerprint) -> Result<Device, FingerprintError> {
        Ok(Device::from_keys(&fp.keys()?))
    }

    /// The model's name for the target's processor, for `--stats`.
    pub fn model_name(&self, target: Target) -> &'static str {
        match target {
            Target::Wgsl => self.gpu.name,
            Target::Wasm => self.cpu.name,
        }
    }
}

/// The threads part of a CPU device key (`8t`, `8t.mt`, `unknownt`): `None`
/// if `seg` is not one, else the threads a kernel may use there (see the
/// module docs).
fn threads_segment(seg: &str) -> Option<u32> {
    let (count, mt) = match seg.strip_suffix("t.mt") {
        Some(c) => (c, true),
        None => (seg.strip_suffix('t')?, false),
    };
    if count == "unknown" {
        return Some(1);
    }
    let n: u64 = count.parse().ok().filter(|_| count.bytes().all(|b| b.is_ascii_digit()))?;
    Some(if mt && n > 1 { n.min(MAX_THREADS as u64) as u32 } else { 1 })
}

/// Splits `hopper.lim128x16384` into the architecture and its limits.
fn split_limits(arch: &str) -> (String, GpuLimits) {
    if let Some((name, lim)) = arch.rsplit_once(".lim")
        && let Some((t, b)) = lim.split_once('x')
        && let (Ok(t), Ok(b)) = (t.parse::<u32>(), b.parse::<u32>())
        && t >= 1
        && b >= 1
    {
        let limits = GpuLimits { invocations: t.min(DEFAULT_INVOCATIONS), workgroup_bytes: b.min(DEFAULT_WORKGROUP_BYTES) };
        return (if name.is_empty() { "unknown".into() } else { name.to_string() }, limits);
    }
    (arch.to_string(), GpuLimits::default())
}

impl Fingerprint {
    /// Parses a fingerprint from a JSON value (the body field of
    /// `POST /v1/sessions`). Only a non-object is refused here.
    pub fn from_value(v: &serde_json::Value) -> Result<Fingerprint, FingerprintError> {
        if !v.is_object() {
            return Err(FingerprintError::NotAnObject);
        }
        serde_json::from_value(v.clone()).map_err(|_| FingerprintError::NotAnObject)
    }

    /// Parses a fingerprint from JSON text.
    pub fn from_json(text: &str) -> Result<Fingerprint, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("fingerprint JSON: {e}"))?;
        Fingerprint::from_value(&v).map_err(|e| e.to_string())
    }

    /// The adapter info, with the flat first-release fields filling gaps.
    fn adapter_field(&self, nested: &Option<String>, flat: &Option<String>) -> String {
        let pick = |o: &Option<String>| o.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
        pick(nested).or_else(|| pick(flat)).unwrap_or_default()
    }

    fn has_adapter(&self) -> bool {
        let a = &self.adapter;
        [&a.vendor, &a.architecture, &a.device, &a.description, &self.vendor, &self.architecture, &self.device, &self.description]
            .iter()
            .any(|f| f.as_deref().is_some_and(|s| !s.trim().is_empty()))
            || self.limits != Limits::default()
    }

    /// Which processor this session tunes for.
    pub fn class(&self) -> Result<DeviceClass, FingerprintError> {
        match self.target.as_deref().map(str::trim) {
            Some("wgsl") => Ok(DeviceClass::Gpu),
            Some("wasm") => Ok(DeviceClass::Cpu),
            None | Some("") => Ok(if self.has_adapter() { DeviceClass::Gpu } else { DeviceClass::Cpu }),
            Some(t) => Err(FingerprintError::BadTarget(t.to_string())),
        }
    }

    /// ρ, checked.
    pub fn rho(&self) -> Result<String, FingerprintError> {
        let rho = self.rho.as_deref().unwrap_or("").trim();
        if rho.len() > MAX_RHO || !rho.bytes().all(|b| b == b'0' || b == b'1') {
            return Err(FingerprintError::BadRho(rho.chars().take(MAX_RHO).collect()));
        }
        Ok(rho.to_string())
    }

    /// The adapter's compute limits, capped at WebGPU's defaults.
    pub fn gpu_limits(&self) -> GpuLimits {
        let cap = |v: Option<u64>, default: u32| v.filter(|&v| v > 0).map_or(default, |v| v.min(default as u64) as u32);
        let l = &self.limits;
        let invocations =
            cap(l.max_compute_invocations_per_workgroup, DEFAULT_INVOCATIONS).min(cap(l.max_compute_workgroup_size_x, DEFAULT_INVOCATIONS));
        GpuLimits { invocations, workgroup_bytes: cap(l.max_compute_workgroup_storage_size, DEFAULT_WORKGROUP_BYTES) }
    }

    /// The device keys (see the module docs for the rule).
    pub fn keys(&self) -> Result<DeviceKeys, FingerprintError> {
        let rho = self.rho()?;
        let (vendor, arch, device) = match self.class()? {
            DeviceClass::Gpu => {
                let description = self.adapter_field(&self.adapter.description, &self.description);
                let mut vendor = gpu_vendor(&self.adapter_field(&self.adapter.vendor, &self.vendor));
                if vendor == "unknown" {
                    vendor = vendor_from_text(&description).unwrap_or("unknown").to_string();
                }
                let mut arch = slug(&self.adapter_field(&self.adapter.architecture, &self.architecture));
                if arch == "unknown" {
                    arch = arch_from_text(&description).unwrap_or("unknown").to_string();
                }
                let lim = self.gpu_limits();
                if lim != GpuLimits::default() {
                    arch = format!("{arch}.lim{}x{}", lim.invocations, lim.workgroup_bytes);
                }
                let mut device = slug(&self.adapter_field(&self.adapter.device, &self.device));
                if device == "unknown" {
                    device = slug(&description);
                }
                (format!("gpu-{vendor}"), arch, device)
            }
            DeviceClass::Cpu => {
                let os = os_slug(self.os.as_deref().unwrap_or(""));
                let arch = self.cpu_architecture.as_deref().or(self.cpu.arch.as_deref()).unwrap_or("");
                let isa = cpu_isa(arch, &os);
                let simd = match (self.simd, self.relaxed_simd) {
                    (_, Some(true)) => SimdClass::RelaxedSimd,
                    (Some(true), _) => SimdClass::Simd128,
                    (Some(false), _) => SimdClass::Scalar,
                    (None, _) => SimdClass::Unknown,
                };
                let cores = self.hardware_concurrency.filter(|&n| n > 0).map(|n| n.min(4096));
                let threads = match cores {
                    // Threaded kernels need both the page's support and a second core.
                    Some(n) if n > 1 && self.threads == Some(true) => format!("{n}t.mt"),
                    Some(n) => format!("{n}t"),
                    None => "unknownt".to_string(),
                };
                let engine = wasm_engine(self.browser.name.as_deref().unwrap_or(""));
                (format!("cpu-{isa}"), simd.name().to_string(), format!("{os}-{threads}-{engine}"))
            }
        };
        Ok(DeviceKeys {
            device_key: format!("{vendor}/{arch}/{device}/{}", if rho.is_empty() { "-" } else { &rho }),
            arch_key: format!("{vendor}/{arch}"),
            vendor_key: vendor,
            rho,
        })
    }
}

/// The slug of a free-form string: see the module docs.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    let mut dash = false;
    for c in s.trim().chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() || c == '.' {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c);
        } else {
            dash = true;
        }
        if out.len() >= MAX_PART {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() { "unknown".to_string() } else { out }
}

/// Normalises a GPU vendor string or PCI vendor id.
fn gpu_vendor(raw: &str) -> String {
    let s = slug(raw);
    let id = s.strip_prefix("0x").unwrap_or(&s);
    // PCI-SIG vendor ids, as native APIs (and wgpu) report them.
    let by_id = match u32::from_str_radix(id, 16).ok().filter(|_| id.len() == 4) {
        Some(0x10de) => Some("nvidia"),
        Some(0x1002) | Some(0x1022) => Some("amd"),
        Some(0x8086) => Some("intel"),
        Some(0x106b) => Some("apple"),
        Some(0x13b5) => Some("arm"),
        Some(0x5143) => Some("qualcomm"),
        Some(0x1ae0) => Some("google"),
        Some(0x1010) => Some("img-tec"),
        Some(0x14e4) => Some("broadcom"),
        Some(0x144d) => Some("samsung"),
        Some(0x1414) => Some("microsoft"),
        _ => None,
    };
    if let Some(v) = by_id {
        return v.to_string();
    }
    if s == "ati" || s.starts_with("advanced-micro-devices") {
        return "amd".to_string();
    }
    vendor_from_text(&s).map_or(s, str::to_string)
}

/// A vendor named inside a description or vendor string.
fn vendor_from_text(s: &str) -> Option<&'static str> {
    let s = s.to_lowercase();
    let has = |w: &str| s.contains(w);
    Some(if has("nvidia") || has("geforce") || has("quadro") || has("tesla") {
        "nvidia"
    } else if has("amd") || has("radeon") {
        "amd"
    } else if has("intel") {
        "intel"
    } else if has("apple") {
        "apple"
    } else if has("mali") || has("immortalis") || s == "arm" || s.starts_with("arm-") || s.starts_with("arm ") {
        "arm"
    } else if has("adreno") || has("qualcomm") {
        "qualcomm"
    } else if has("swiftshader") || s == "google" {
        "google"
    } else if has("llvmpipe") || has("lavapipe") || s == "mesa" {
        "mesa"
    } else {
        return None;
    })
}

/// Software renderers name themselves in the description; hardware
/// architectures are never guessed from product names.
fn arch_from_text(s: &str) -> Option<&'static str> {
    let s = s.to_lowercase();
    if s.contains("swiftshader") {
        Some("swiftshader")
    } else if s.contains("llvmpipe") || s.contains("lavapipe") {
        Some("llvmpipe")
    } else {
        None
    }
}

fn os_slug(raw: &str) -> String {
    let s = slug(raw);
    let norm = match s.as_str() {
        x if x.starts_with("windows") || x == "win32" || x == "win64" => "windows",
        x if x.starts_with("mac") || x == "darwin" || x.starts_with("os-x") => "macos",
        x if x.starts_with("ios") || x.starts_with("ipados") || x == "iphone" || x == "ipad" => "ios",
        x if x.starts_with("android") => "android",
        x if x.starts_with("chrome-os") || x.starts_with("chromeos") || x == "cros" => "chromeos",
        x if x.starts_with("linux") || x == "ubuntu" || x == "debian" || x == "fedora" => "linux",
        _ => return s,
    };
    norm.to_string()
}

fn cpu_isa(raw: &str, os: &str) -> &'static str {
    match slug(raw).as_str() {
        "x86" | "x86-64" | "x86.64" | "x64" | "amd64" | "i686" | "i386" | "x8664" => "x86",
        "arm" | "arm64" | "aarch64" | "armv7" | "armv8" => "arm",
        _ if os == "android" || os == "ios" => "arm",
        _ => "unknown",
    }
}

/// The Wasm engine of a browser: what compiles the kernel to machine code.
fn wasm_engine(raw: &str) -> String {
    let s = slug(raw);
    let has = |w: &str| s.contains(w);
    if has("firefox") || has("gecko") || has("spidermonkey") {
        "spidermonkey".to_string()
    } else if has("safari") || has("webkit") || has("jsc") || has("javascriptcore") {
        "jsc".to_string()
    } else if has("chrom") || has("edge") || has("opera") || has("brave") || has("samsung") || has("node") || has("v8") || has("vivaldi") {
        "v8".to_string()
    } else {
        s
    }
}

// ------------------------------------------------------- lenient fields
//
// Browsers and hand-written files disagree about types (a number sent as a
// string, `null` for a hidden field); a value of the wrong type reads as
// unknown rather than refusing the whole fingerprint.

fn lenient_str<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => Some(s),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    })
}

fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    })
}

fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Bool(b) => Some(b),
        serde_json::Value::String(s) if s == "true" => Some(true),
        serde_json::Value::String(s) if s == "false" => Some(false),
        _ => None,
    })
}

fn lenient_strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Array(a) => a.into_iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    })
}

fn lenient_or_default<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(v: serde_json::Value) -> DeviceKeys {
        Fingerprint::from_value(&v).unwrap().keys().unwrap()
    }

    #[test]
    fn webgpu_fingerprint_key() {
        let k = keys(json!({
            "adapter": {"vendor": "nvidia", "architecture": "hopper", "device": "", "description": "NVIDIA H100 80GB HBM3"},
            "limits": {"maxComputeInvocationsPerWorkgroup": 1024, "maxComputeWorkgroupStorageSize": 49152},
            "features": ["timestamp-query"], "browser": {"name": "Chrome", "version": "131"}, "rho": "101"
        }));
        assert_eq!(k.device_key, "gpu-nvidia/hopper/nvidia-h100-80gb-hbm3/101");
        assert_eq!(k.arch_key, "gpu-nvidia/hopper");
        assert_eq!(k.vendor_key, "gpu-nvidia");
        assert_eq!(k.rho, "101");
        assert_eq!(DeviceKeys::from_device_key(&k.device_key).unwrap(), k);
    }

    #[test]
    fn flat_first_release_shape_is_an_adapter() {
        let k = keys(json!({"vendor": "NVIDIA", "architecture": "Ampere", "device": "RTX 3070", "rho": "101"}));
        assert_eq!(k.device_key, "gpu-nvidia/ampere/rtx-3070/101");
        let d = Device::from_keys(&k);
        assert_eq!((d.class, d.vendor.as_str(), d.arch.as_str()), (DeviceClass::Gpu, "nvidia", "ampere"));
    }

    #[test]
    fn unknowns_are_never_errors() {
        for v in [json!({}), json!({"adapter": {}}), json!({"adapter": null, "limits": 7, "os": 3, "features": "x"})] {
            let k = keys(v.clone());
            assert!(!k.device_key.contains("//"), "{v}: {k:?}");
            assert_eq!(k.device_key.split('/').count(), 4);
        }
        assert_eq!(keys(json!({})).device_key, "cpu-unknown/unknown/unknown-unknownt-unknown/-");
        assert_eq!(keys(json!({"target": "wgsl"})).device_key, "gpu-unknown/unknown/unknown/-");
        // Hidden vendor: read from the description.
        assert_eq!(keys(json!({"adapter": {"description": "Mali-G78 MC24"}})).vendor_key, "gpu-arm");
        assert_eq!(keys(json!({"adapter": {"vendor": "0x10DE"}})).vendor_key, "gpu-nvidia");
        assert_eq!(keys(json!({"adapter": {"vendor": "google", "architecture": "swiftshader"}})).arch_key, "gpu-google/swiftshader");
    }

    #[test]
    fn structural_errors_only() {
        assert_eq!(Fingerprint::from_value(&json!([1, 2])).unwrap_err(), FingerprintError::NotAnObject);
        let bad = Fingerprint::from_value(&json!({"rho": "12"})).unwrap();
        assert!(matches!(bad.keys(), Err(FingerprintError::BadRho(_))));
        let bad = Fingerprint::from_value(&json!({"target": "cuda"})).unwrap();
        assert!(matches!(bad.keys(), Err(FingerprintError::BadTarget(_))));
    }

    #[test]
    fn wasm_fingerprint_key() {
        let k = keys(json!({
            "target": "wasm", "hardwareConcurrency": 8, "simd": true, "relaxedSimd": true, "threads": true,
            "cpuArchitecture": "x86", "browser": {"name": "Chromium", "version": "156"}, "os": "Linux"
        }));
        assert_eq!(k.device_key, "cpu-x86/relaxed-simd/linux-8t.mt-v8/-");
        assert_eq!(k.arch_key, "cpu-x86/relaxed-simd");
        let d = Device::from_keys(&k);
        assert_eq!(d.class, DeviceClass::Cpu);
        assert_eq!(d.threads, 8);
        assert!(d.simd.relaxed());
        assert_eq!(d.cpu.vector_registers, 16);
        // An Android phone is ARM even without userAgentData.
        let k = keys(json!({"simd": true, "os": "Android 14", "browser": {"name": "Firefox"}, "hardwareConcurrency": "8"}));
        assert_eq!(k.device_key, "cpu-arm/simd128/android-8t-spidermonkey/-");
        assert_eq!(Device::from_keys(&k).cpu.vector_registers, 32);
        assert_eq!(Device::from_keys(&k).threads, 1);
        // The native runner's shape.
        let k = keys(json!({"target": "wasm", "cpu": {"arch": "x86_64"}, "os": "linux", "simd": true}));
        assert_eq!(k.vendor_key, "cpu-x86");
        let k = keys(json!({"target": "wasm", "cpu": {"arch": "aarch64"}}));
        assert_eq!(k.vendor_key, "cpu-arm");
    }

    #[test]
    fn threads_are_in_the_key_only_where_a_kernel_can_use_them() {
        let fp = |threads: serde_json::Value, cores: serde_json::Value| {
            keys(json!({"target": "wasm", "hardwareConcurrency": cores, "simd": true, "relaxedSimd": true, "threads": threads,
                        "cpuArchitecture": "x86", "browser": {"name": "Chrome"}, "os": "Windows"}))
        };
        let on = fp(json!(true), json!(8));
        assert_eq!(on.device_key, "cpu-x86/relaxed-simd/windows-8t.mt-v8/-");
        // Without threads, one core, or an unknown core count: the key of
        // before threads existed.
        assert_eq!(fp(json!(false), json!(8)).device_key, "cpu-x86/relaxed-simd/windows-8t-v8/-");
        assert_eq!(fp(serde_json::Value::Null, json!(8)).device_key, "cpu-x86/relaxed-simd/windows-8t-v8/-");
        assert_eq!(fp(json!(true), json!(1)).device_key, "cpu-x86/relaxed-simd/windows-1t-v8/-");
        assert_eq!(fp(json!(true), serde_json::Value::Null).device_key, "cpu-x86/relaxed-simd/windows-unknownt-v8/-");
        // The arch and vendor keys are shared with the client without threads.
        assert_eq!(on.arch_key, fp(json!(false), json!(8)).arch_key);
        // Read back: the thread count, capped at the compiler's limit; the
        // engine (whose name may hold '-') and the OS as before.
        let dev = |k: &str| Device::from_keys(&DeviceKeys::from_device_key(k).unwrap());
        for (key, threads, os, spill) in [
            ("cpu-x86/relaxed-simd/linux-8t.mt-v8/-", 8, "linux", false),
            ("cpu-x86/relaxed-simd/linux-8t-v8/-", 1, "linux", false),
            ("cpu-x86/relaxed-simd/linux-2t.mt-webtune-native/-", 2, "linux", true),
            ("cpu-arm/relaxed-simd/macos-64t.mt-jsc/-", MAX_THREADS, "macos", false),
            ("cpu-x86/simd128/windows-unknownt-v8/-", 1, "windows", false),
            ("cpu-x86/simd128/windows-1t.mt-v8/-", 1, "windows", false),
            ("cpu-x86/simd128/windows-x.mt-v8/-", 1, "windows", false),
        ] {
            let d = dev(key);
            assert_eq!((d.threads, d.os.as_str()), (threads, os), "{key}");
            assert_eq!(d.cpu.tiles == crate::hardware::RegisterTiles::MaySpill, spill, "{key}");
            let twin = dev(&key.replace("t.mt-", "t-"));
            assert_eq!((twin.threads, &twin.cpu, &twin.os), (1, &d.cpu, &d.os), "{key}");
        }
        assert_eq!(Device::from_keys(&on).threads, 8);
        assert_eq!(dev("gpu-nvidia/hopper/h100/-").threads, 1);
    }

    #[test]
    fn low_limits_are_in_the_key() {
        let k = keys(json!({"adapter": {"vendor": "arm", "architecture": "valhall"},
                            "limits": {"maxComputeInvocationsPerWorkgroup": 128, "maxComputeWorkgroupStorageSize": 16384}}));
        assert_eq!(k.arch_key, "gpu-arm/valhall.lim128x16384");
        let d = Device::from_keys(&k);
        assert_eq!(d.arch, "valhall");
        assert_eq!(d.limits, GpuLimits { invocations: 128, workgroup_bytes: 16384 });
        // Larger limits than the defaults change nothing: pages get the defaults.
        let k = keys(json!({"adapter": {"vendor": "arm", "architecture": "valhall"},
                            "limits": {"maxComputeInvocationsPerWorkgroup": 1024}}));
        assert_eq!(k.arch_key, "gpu-arm/valhall");
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("  NVIDIA GeForce RTX 3070 (Laptop)  "), "nvidia-geforce-rtx-3070-laptop");
        assert_eq!(slug("gen-12.5"), "gen-12.5");
        assert_eq!(slug("///"), "unknown");
        assert_eq!(slug(&"x".repeat(500)).len(), MAX_PART);
        assert!(DeviceKeys::from_device_key("a/b/c").is_none());
        assert!(DeviceKeys::from_device_key("a/b/c/12").is_none());
    }
}
