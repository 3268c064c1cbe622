//! Fingerprint → device keys, and (op, target, keys) → candidate space.
//!
//! This is the server's one seam to the tuner: everything else in the server
//! calls these functions only. The rules live in `webtune_tuner` (the
//! fingerprint format and key rule in `webtune_tuner::fingerprint`, the lite
//! space in `webtune_tuner::space`); this module converts between the
//! tuner's types and the kernel database's, and fixes the settings the
//! service builds spaces with (the tuner's built-in verdicts), so that a
//! space depends on the device's keys alone: a session's space can be
//! rebuilt from the keys stored with it.
//!
//! The checksum the service stores beside results and compares on lookups
//! is `webtune_tuner::rules_checksum`: the same for every device of an op and
//! target, and changed by any change of the tuner's rules or settings. A
//! device's own list differs from its neighbours' (that is the point of a
//! device-guided space), yet a winner voted by one architecture must still
//! answer another of the same vendor.

use webtune_compiler::{Op, Schedule, Target};
use webtune_kernel_db::DeviceKeys;
use webtune_tuner::{Device, Fingerprint, Settings};

pub use webtune_tuner::Space;

fn to_db(k: webtune_tuner::DeviceKeys) -> DeviceKeys {
    DeviceKeys { device_key: k.device_key, arch_key: k.arch_key, vendor_key: k.vendor_key, rho: k.rho }
}

fn from_db(k: &DeviceKeys) -> webtune_tuner::DeviceKeys {
    webtune_tuner::DeviceKeys {
        device_key: k.device_key.clone(),
        arch_key: k.arch_key.clone(),
        vendor_key: k.vendor_key.clone(),
        rho: k.rho.clone(),
    }
}

/// The device keys of a fingerprint, or what is wrong with it. Missing or
/// unknown fields are not wrong (they become `unknown` in the key); only a
/// non-object, a malformed `rho` or an unknown `target` is refused.
pub fn keys_for(fp: &serde_json::Value) -> Result<DeviceKeys, String> {
    let fp = Fingerprint::from_value(fp).map_err(|e| e.to_string())?;
    fp.keys().map(to_db).map_err(|e| e.to_string())
}

/// The target a session of these keys tunes: `gpu-` keys are WGSL devices,
/// `cpu-` keys Wasm ones (`webtune_tuner::fingerprint`'s key rule).
pub fn target_of(keys: &DeviceKeys) -> Option<Target> {
    if keys.device_key.starts_with("gpu-") {
        Some(Target::Wgsl)
    } else if keys.device_key.starts_with("cpu-") {
        Some(Target::Wasm)
    } else {
        None
    }
}

/// Longest string kept in a stored fingerprint, bytes.
pub const STORED_STR: usize = 128;
/// Most items kept of a stored fingerprint's list (`features`).
pub const STORED_ITEMS: usize = 64;

/// The fingerprint as the server stores and shows it: the fields the tuner
/// knows (`webtune_tuner::Fingerprint`, re-serialised), each string cut to
/// [`STORED_STR`] bytes and each list to [`STORED_ITEMS`] items. Unknown
/// fields are dropped, as docs/device-keys.md promises, so a client cannot park 64 KB of
/// its own text in the devices table or on the dashboard. Canonical text:
/// the same fingerprint always stores the same bytes.
pub fn stored_fingerprint(fp: &serde_json::Value) -> Result<String, String> {
    let fp = Fingerprint::from_value(fp).map_err(|e| e.to_string())?;
    let mut v = serde_json::to_value(&fp).map_err(|e| e.to_string())?;
    bound(&mut v);
    serde_json::to_string(&v).map_err(|e| e.to_string())
}

fn bound(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) if s.len() > STORED_STR => {
            let mut end = STORED_STR;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
        }
        serde_json::Value::Array(a) => {
            a.truncate(STORED_ITEMS);
            a.iter_mut().for_each(bound);
        }
        serde_json::Value::Object(m) => m.values_mut().for_each(bound),
        _ => {}
    }
}

/// The keys implied by a device key alone (for lookups from devices this
/// server has not seen): its `/`-separated prefixes, the fallback chain
/// device → arch → vendor → portable default.
pub fn keys_from_device_key(device_key: &str) -> Option<DeviceKeys> {
    webtune_tuner::DeviceKeys::from_device_key(device_key).map(to_db)
}

/// The lite space for `op` on `target` for a device with keys `keys`.
/// Its `checksum` is the rules checksum (see the module docs).
pub fn space_for(op: &Op, target: Target, keys: &DeviceKeys) -> Space {
    let device = Device::from_keys(&from_db(keys));
    let settings = Settings::builtin(target);
    let mut space = webtune_tuner::lite_space(op, target, &device, &settings);
    space.checksum = webtune_tuner::rules_checksum(op, target, &settings);
    space
}

/// The extended space: the crowd's winners for similar devices (most
/// similar first) in front of the lite space, capped at a tenth of it.
pub fn extended(exploit: &[Schedule], space: &Space) -> Vec<(&'static str, Schedule)> {
    webtune_tuner::extended_space(exploit, space).into_iter().map(|(src, s)| (src.name(), s)).collect()
}

/// The kernel a device class gets before anyone voted (issue 37): the
/// first schedule of its lite `space` (the tuner's best guess, in the
/// space's order) that every device with these keys can load. A key does
/// not say whether the browser grants the `subgroups` feature, so no
/// subgroup candidate (each has its workgroup-memory twin right after it
/// in the space); relaxed SIMD only where the key's SIMD class has it, and
/// no more threads than the key allows (the space already holds to both;
/// checked again here). The portable default where nothing qualifies.
pub fn predicted(op: &Op, target: Target, keys: &DeviceKeys, space: &Space) -> Schedule {
    let device = Device::from_keys(&from_db(keys));
    space
        .schedules
        .iter()
        .find(|s| {
            !s.subgroup_reduce
                && (!s.relaxed_simd || (target == Target::Wasm && device.simd.relaxed()))
                && s.threads.max(1) <= device.threads
                && s.check(op, target).is_ok()
        })
        .cloned()
        .unwrap_or_else(|| Schedule::default_for(op, target))
}

/// Threads a kernel for this device may use (1 unless the key says the
/// client runs Wasm threads): a winner voted by a threaded client of the
/// same architecture must not answer one that cannot run it.
pub fn max_threads(keys: &DeviceKeys) -> u32 {
    Device::from_keys(&from_db(keys)).threads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_chain() {
        let fp = serde_json::json!({"vendor": "NVIDIA", "architecture": "Ampere", "device": "RTX 3070", "rho": "101"});
        let k = keys_for(&fp).unwrap();
        assert_eq!(k.device_key, "gpu-nvidia/ampere/rtx-3070/101");
        assert_eq!(k.arch_key, "gpu-nvidia/ampere");
        assert_eq!(k.vendor_key, "gpu-nvidia");
        assert_eq!(keys_from_device_key(&k.device_key).unwrap(), k);
        // Browsers hide fields: a partial fingerprint still has keys.
        let partial = keys_for(&serde_json::json!({"vendor": "x"})).unwrap();
        assert_eq!(partial.device_key, "gpu-x/unknown/unknown/-");
        assert!(keys_for(&serde_json::json!({"vendor": "x", "architecture": "y", "device": "z", "rho": "12"})).is_err());
        assert!(keys_for(&serde_json::json!("nvidia")).is_err());
    }

    #[test]
    fn stored_fingerprints_keep_known_fields_only_and_bounded() {
        let fp = serde_json::json!({
            "target": "wgsl",
            "adapter": {"vendor": "nvidia", "architecture": "hopper", "description": "d".repeat(5000), "junk": "x".repeat(60_000)},
            "features": (0..1000).map(|i| format!("f{i}")).collect::<Vec<_>>(),
            "unknownField": "y".repeat(60_000),
            "rho": "101"
        });
        let text = stored_fingerprint(&fp).unwrap();
        assert!(text.len() < 2000, "{} bytes stored", text.len());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(v.get("unknownField").is_none() && v["adapter"].get("junk").is_none());
        assert_eq!(v["adapter"]["vendor"], "nvidia");
        assert_eq!(v["rho"], "101");
        assert_eq!(v["adapter"]["description"].as_str().unwrap().len(), STORED_STR);
        assert_eq!(v["features"].as_array().unwrap().len(), STORED_ITEMS);
        // The keys come from the same fingerprint, whatever was dropped.
        assert_eq!(keys_for(&fp).unwrap().device_key, "gpu-nvidia/hopper/".to_string() + &"d".repeat(48) + "/101");
        assert_eq!(target_of(&keys_for(&fp).unwrap()), Some(Target::Wgsl));
        assert_eq!(target_of(&keys_for(&serde_json::json!({"target": "wasm"})).unwrap()), Some(Target::Wasm));
    }

    #[test]
    fn space_is_valid_and_stable() {
        let op = Op::parse("matmul", "64,64,64").unwrap();
        let keys = keys_for(&serde_json::json!({"vendor": "a", "architecture": "b", "device": "c"})).unwrap();
        for t in [Target::Wasm, Target::Wgsl] {
            let a = space_for(&op, t, &keys);
            assert!(!a.schedules.is_empty() && a.schedules.len() <= webtune_tuner::LITE_BUDGET);
            assert!(a.schedules.iter().all(|s| s.check(&op, t).is_ok()));
            assert_eq!(a.checksum, space_for(&op, t, &keys).checksum);
        }
        // Different devices, different lists, one rules checksum: winners
        // are shared along the fallback chain.
        let gpu = keys_for(&serde_json::json!({"adapter": {"vendor": "nvidia", "architecture": "hopper"}})).unwrap();
        let (a, b) = (space_for(&op, Target::Wgsl, &gpu), space_for(&op, Target::Wgsl, &keys));
        assert_ne!(a.schedules, b.schedules);
        assert_eq!(a.checksum, b.checksum);
        let other = Op::parse("matmul", "64,64,65").unwrap();
        assert_ne!(space_for(&other, Target::Wgsl, &gpu).checksum, a.checksum);
    }

    #[test]
    fn extended_merges_winners_first() {
        let op = Op::parse("matmul", "64,64,64").unwrap();
        let keys = keys_for(&serde_json::json!({"target": "wasm"})).unwrap();
        let space = space_for(&op, Target::Wasm, &keys);
        let w = Schedule { x0: 1, y0: 4, x1: 1, y1: 4, r0: 1, r1: 1, ..Schedule::default_for(&op, Target::Wasm) };
        let list = extended(&[w.clone(), w.clone()], &space);
        assert_eq!(list[0], ("exploit", w));
        assert_eq!(list.iter().filter(|(s, _)| *s == "exploit").count(), 1);
        assert!(list[1..].iter().all(|(s, _)| *s == "explore"));
    }
}
