//! Fingerprint → device keys, and (op, target, fingerprint) → candidate space.
//!
//! This is the server's one seam to the tuner: everything else in `http`
//! calls [`keys_for`] and [`space_for`] only. Until the `tuner` crate
//! publishes its `Fingerprint`, device key chain and `lite_space`, these
//! functions implement the same contract in the smallest honest way:
//!
//! - a fingerprint is a JSON object with `vendor`, `architecture` and
//!   `device` strings (e.g. a WebGPU adapter's info or a CPU's model name)
//!   and an optional `rho`, NNJIT's primitive vector as a string of 0/1;
//! - the keys are `vendor`, `vendor/architecture` and
//!   `vendor/architecture/device/rho`, lower-cased, with every character
//!   outside `[a-z0-9._-]` replaced by `-`;
//! - the space is a fixed grid of register and cache tiles around the
//!   portable default, filtered by `Schedule::check`, in a fixed order, and
//!   its checksum is the SHA-256 of the schedules' JSON in that order.

use webtune_compiler::{Op, Schedule, Target};
use webtune_kernel_db::{DeviceKeys, sha256_hex};

/// Longest accepted fingerprint field.
const MAX_FIELD: usize = 128;

fn field<'a>(fp: &'a serde_json::Value, name: &str, required: bool) -> Result<Option<&'a str>, String> {
    match fp.get(name) {
        None | Some(serde_json::Value::Null) if !required => Ok(None),
        None | Some(serde_json::Value::Null) => Err(format!("fingerprint.{name} is missing: give a string such as \"nvidia\"")),
        Some(serde_json::Value::String(s)) if s.trim().is_empty() && required => {
            Err(format!("fingerprint.{name} is empty"))
        }
        Some(serde_json::Value::String(s)) if s.len() > MAX_FIELD => {
            Err(format!("fingerprint.{name} is {} bytes long; the limit is {MAX_FIELD}", s.len()))
        }
        Some(serde_json::Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("fingerprint.{name} must be a string")),
    }
}

fn slug(s: &str) -> String {
    s.trim()
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' { c } else { '-' })
        .collect()
}

/// The device keys of a fingerprint, or what is wrong with it.
pub fn keys_for(fp: &serde_json::Value) -> Result<DeviceKeys, String> {
    if !fp.is_object() {
        return Err("fingerprint must be a JSON object with vendor, architecture and device".into());
    }
    let vendor = slug(field(fp, "vendor", true)?.unwrap_or_default());
    let arch = slug(field(fp, "architecture", true)?.unwrap_or_default());
    let device = slug(field(fp, "device", true)?.unwrap_or_default());
    let rho = field(fp, "rho", false)?.unwrap_or("").to_string();
    if !rho.bytes().all(|b| b == b'0' || b == b'1') {
        return Err(format!("fingerprint.rho `{rho}` must be a string of 0 and 1 (one bit per primitive)"));
    }
    Ok(DeviceKeys {
        device_key: format!("{vendor}/{arch}/{device}/{}", if rho.is_empty() { "-" } else { &rho }),
        arch_key: format!("{vendor}/{arch}"),
        vendor_key: vendor,
        rho,
    })
}

/// The keys implied by a device key alone (for lookups from devices this
/// server has not seen): its `/`-separated prefixes.
pub fn keys_from_device_key(device_key: &str) -> Option<DeviceKeys> {
    let parts: Vec<&str> = device_key.split('/').collect();
    let [vendor, arch, _device, rho] = parts.as_slice() else { return None };
    Some(DeviceKeys {
        device_key: device_key.to_string(),
        arch_key: format!("{vendor}/{arch}"),
        vendor_key: vendor.to_string(),
        rho: if *rho == "-" { String::new() } else { rho.to_string() },
    })
}

/// An ordered candidate space and its checksum.
#[derive(Clone, Debug)]
pub struct Space {
    pub schedules: Vec<Schedule>,
    pub checksum: String,
}

/// The candidate space for `op` on `target` for a device with keys `keys`.
pub fn space_for(op: &Op, target: Target, _keys: &DeviceKeys) -> Space {
    let base = Schedule::default_for(op, target);
    let mut schedules = vec![base.clone()];
    let (reg, cache): (&[(u32, u32)], &[(u32, u32)]) = match target {
        Target::Wasm => (&[(4, 8), (2, 8), (4, 4), (8, 8), (2, 16), (1, 4)], &[(64, 256), (32, 128), (128, 512), (16, 64)]),
        Target::Wgsl => (&[(4, 4), (2, 4), (4, 8), (8, 4), (1, 4)], &[(64, 64), (32, 64), (64, 32), (32, 32), (16, 64)]),
    };
    for &(x0, y0) in reg {
        for &(x1, y1) in cache {
            let s = Schedule { x0, y0, x1, y1, ..base.clone() };
            if !schedules.contains(&s) && s.check(op, target).is_ok() {
                schedules.push(s);
            }
        }
    }
    let text = serde_json::to_string(&schedules).unwrap_or_default();
    Space { checksum: sha256_hex(text.as_bytes())[..16].to_string(), schedules }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_chain() {
        let fp = serde_json::json!({"vendor": "NVIDIA", "architecture": "Ampere", "device": "RTX 3070", "rho": "101"});
        let k = keys_for(&fp).unwrap();
        assert_eq!(k.device_key, "nvidia/ampere/rtx-3070/101");
        assert_eq!(k.arch_key, "nvidia/ampere");
        assert_eq!(k.vendor_key, "nvidia");
        assert_eq!(keys_from_device_key(&k.device_key).unwrap(), k);
        assert!(keys_for(&serde_json::json!({"vendor": "x"})).unwrap_err().contains("architecture"));
        assert!(keys_for(&serde_json::json!({"vendor": "x", "architecture": "y", "device": "z", "rho": "12"})).is_err());
    }

    #[test]
    fn space_is_valid_and_stable() {
        let op = Op::parse("matmul", "64,64,64").unwrap();
        let keys = keys_for(&serde_json::json!({"vendor": "a", "architecture": "b", "device": "c"})).unwrap();
        let a = space_for(&op, Target::Wasm, &keys);
        assert!(a.schedules.len() > 5);
        assert!(a.schedules.iter().all(|s| s.check(&op, Target::Wasm).is_ok()));
        assert_eq!(a.checksum, space_for(&op, Target::Wasm, &keys).checksum);
    }
}
