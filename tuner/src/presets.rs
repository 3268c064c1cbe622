//! Named example fingerprints, for the command line and tests. Each is what
//! the browser client sends from such a device (values as the browsers
//! report them; hidden fields left out).

use crate::fingerprint::Fingerprint;

/// `(name, fingerprint JSON)`.
pub const ALL: &[(&str, &str)] = &[
    ("h100", include_str!("../presets/h100.json")),
    ("swiftshader", include_str!("../presets/swiftshader.json")),
    ("xeon-2core", include_str!("../presets/xeon-2core.json")),
    // The same machine as the native client (wasmtime) describes it.
    ("xeon-2core-native", include_str!("../presets/xeon-2core-native.json")),
    ("apple-m2", include_str!("../presets/apple-m2.json")),
    ("pixel-8", include_str!("../presets/pixel-8.json")),
];

/// The preset called `name`.
pub fn get(name: &str) -> Option<Fingerprint> {
    ALL.iter().find(|(n, _)| *n == name).map(|(_, text)| Fingerprint::from_json(text).expect("presets parse"))
}

/// The preset names, for error messages.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|(n, _)| *n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_and_have_distinct_keys() {
        let mut keys = Vec::new();
        for (name, _) in ALL {
            let fp = get(name).unwrap();
            let k = fp.keys().unwrap();
            assert!(!keys.contains(&k.device_key), "{name}");
            keys.push(k.device_key);
        }
        assert_eq!(get("h100").unwrap().keys().unwrap().arch_key, "gpu-nvidia/hopper");
        // Chromium on a cross-origin isolated page: Wasm threads on 2 cores.
        assert_eq!(get("xeon-2core").unwrap().keys().unwrap().device_key, "cpu-x86/relaxed-simd/linux-2t.mt-v8/-");
        assert_eq!(get("xeon-2core-native").unwrap().keys().unwrap().device_key, "cpu-x86/relaxed-simd/linux-2t-webtune-native/-");
        assert!(get("nope").is_none());
    }
}
