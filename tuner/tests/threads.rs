//! Threaded Wasm candidates (issue 19 item 4): which keys say a client runs
//! threads, what its lite space then holds and in which order, and that
//! every other client's space is what it was before threads existed.

use webtune_compiler::schedule::MAX_THREADS;
use webtune_compiler::{Op, Schedule, Target, compile};
use webtune_tuner::space::threads::{PART_FLOPS, PART_WEIGHT_BYTES, thread_counts};
use webtune_tuner::{Device, DeviceKeys, Fingerprint, LITE_BUDGET, Settings, Space, lite_space, presets};

/// K0, K1, K2 (NNJIT Table 3) and the sentence encoder's small shapes.
const SHAPES: [(&str, &str); 6] = [
    ("matmul", "384,768,768"),
    ("matmul", "640,768,3072"),
    ("batch_matmul", "12,384,384,64"),
    ("matmul", "16,384,1152"),
    ("matmul", "128,384,1536"),
    ("batch_matmul", "12,16,16,64"),
];

fn ops() -> Vec<Op> {
    SHAPES.iter().map(|(k, s)| Op::parse(k, s).unwrap()).collect()
}

fn device(key: &str) -> Device {
    Device::from_keys(&DeviceKeys::from_device_key(key).unwrap())
}

fn wasm(op: &Op, d: &Device) -> Space {
    lite_space(op, Target::Wasm, d, &Settings::builtin(Target::Wasm))
}

/// The products of one SmolLM2-135M decode step (per layer, then the head).
const SMOLLM2_DECODE: [(&str, &str); 5] = [
    ("matmul_q4_1", "1,576,960"),
    ("matmul_q4_1", "1,576,576"),
    ("matmul_q4_1", "1,576,3072"),
    ("matmul_q4_1", "1,1536,576"),
    ("matmul_q8_0", "1,576,49152"),
];

/// Bytes of a GGUF product's weights: Q4_1 reads 16 bytes of nibbles and
/// two f32 (scale, minimum) a block of 32, Q8_0 32 bytes and one f32.
fn gguf_weight_bytes(op: &Op) -> u64 {
    let (_, _, k, n) = op.bmkn();
    let blocks = (k / 32) as u64 * n as u64;
    blocks * if op.kind() == webtune_compiler::op::OpKind::MatmulQ8_0 { 36 } else { 24 }
}

fn flops(op: &Op) -> u64 {
    let (b, m, k, n) = op.bmkn();
    2 * b as u64 * m as u64 * k as u64 * n as u64
}

/// Threaded keys: browsers' engines on both ISAs, 2 to 64 cores (the
/// kernel's threads capped at `MAX_THREADS`), and the native client's engine.
const THREADED: [&str; 6] = [
    "cpu-x86/relaxed-simd/linux-2t.mt-v8/-",
    "cpu-x86/relaxed-simd/linux-8t.mt-v8/-",
    "cpu-arm/relaxed-simd/macos-8t.mt-v8/-",
    "cpu-arm/simd128/android-6t.mt-spidermonkey/-",
    "cpu-x86/relaxed-simd/windows-64t.mt-jsc/0101",
    "cpu-x86/relaxed-simd/linux-8t.mt-webtune-native/-",
];

fn twin(key: &str) -> String {
    key.replacen("t.mt-", "t-", 1)
}

#[test]
fn a_threaded_fingerprint_gets_a_key_of_its_own_and_the_key_gives_the_threads_back() {
    let fp = |threads: &str, cores: u32| {
        Fingerprint::from_json(&format!(
            r#"{{"target": "wasm", "hardwareConcurrency": {cores}, "simd": true, "relaxedSimd": true, "threads": {threads},
                "cpuArchitecture": "x86", "browser": {{"name": "Chrome", "version": "131"}}, "os": "Linux"}}"#
        ))
        .unwrap()
    };
    let on = fp("true", 8).keys().unwrap();
    let off = fp("false", 8).keys().unwrap();
    assert_eq!(on.device_key, "cpu-x86/relaxed-simd/linux-8t.mt-v8/-");
    assert_eq!(off.device_key, "cpu-x86/relaxed-simd/linux-8t-v8/-");
    assert_eq!((on.arch_key.as_str(), on.vendor_key.as_str()), (off.arch_key.as_str(), off.vendor_key.as_str()));
    // One core: nothing to split over, the key of before.
    assert_eq!(fp("true", 1).keys().unwrap().device_key, "cpu-x86/relaxed-simd/linux-1t-v8/-");
    for (cores, threads) in [(2, 2), (8, 8), (12, 12), (16, 16), (64, MAX_THREADS)] {
        let keys = fp("true", cores).keys().unwrap();
        let from_fp = Device::from_fingerprint(&fp("true", cores)).unwrap();
        // The server has only the device key: it rebuilds the same device and space.
        let again = Device::from_keys(&DeviceKeys::from_device_key(&keys.device_key).unwrap());
        assert_eq!(again, from_fp, "{}", keys.device_key);
        assert_eq!(again.threads, threads, "{}", keys.device_key);
        assert_eq!(Device::from_fingerprint(&fp("false", cores)).unwrap().threads, 1);
        let op = Op::parse("matmul", "384,768,768").unwrap();
        assert_eq!(wasm(&op, &again), wasm(&op, &from_fp));
    }
    for key in THREADED {
        let d = device(key);
        let t = device(&twin(key));
        assert!(d.threads > 1 && d.threads <= MAX_THREADS, "{key}");
        assert_eq!((t.threads, &t.cpu, &t.simd, &t.os, &t.vendor), (1, &d.cpu, &d.simd, &d.os, &d.vendor), "{key}");
    }
    // The browser preset on a cross-origin isolated page is threaded.
    assert_eq!(Device::from_fingerprint(&presets::get("xeon-2core").unwrap()).unwrap().threads, 2);
    assert_eq!(Device::from_fingerprint(&presets::get("xeon-2core-native").unwrap()).unwrap().threads, 1);
}

#[test]
fn a_threaded_device_gets_valid_threaded_candidates_within_the_budget() {
    for key in THREADED {
        let d = device(key);
        for op in ops() {
            let sp = wasm(&op, &d);
            assert!(sp.schedules.len() <= LITE_BUDGET, "{key} {op}: {}", sp.schedules.len());
            let threaded: Vec<&Schedule> = sp.schedules.iter().filter(|s| s.threads > 1).collect();
            assert!(!threaded.is_empty(), "{key} {op}: no threaded candidate");
            for s in &sp.schedules {
                s.check(&op, Target::Wasm).unwrap_or_else(|e| panic!("{key} {op}: {e}: {s:?}"));
                assert!(s.threads <= d.threads, "{key} {op}: {s:?}");
                assert_eq!(s.split.is_some(), s.threads > 1, "{key} {op}: {s:?}");
            }
            // Thread counts: the device's own and powers of two below it.
            let counts = thread_counts(d.threads);
            assert!(threaded.iter().all(|s| counts.contains(&s.threads)), "{key} {op}");
            // Each threaded candidate is a ranked single-threaded one split,
            // its register tile, K block and loop order unchanged.
            for s in &threaded {
                assert!(
                    sp.schedules.iter().any(|o| o.threads == 1 && (o.x0, o.y0, o.r0, o.r1, o.order) == (s.x0, s.y0, s.r0, s.r1, s.order)),
                    "{key} {op}: {s:?}"
                );
            }
        }
    }
}

#[test]
fn threaded_candidates_compile() {
    let d = device("cpu-x86/relaxed-simd/linux-8t.mt-v8/-");
    for op in ops() {
        for s in wasm(&op, &d).schedules.iter().filter(|s| s.threads > 1).take(3) {
            let k = compile(&op, Target::Wasm, s).unwrap_or_else(|e| panic!("{op}: {e}: {s:?}"));
            assert!(!k.bytes.is_empty());
        }
    }
}

/// The single-threaded part of a threaded device's space is its twin's
/// space, in the same order; the twin (and any device without threads) has
/// no threaded candidate; q4 and WGSL never have one.
#[test]
fn devices_without_threads_get_the_space_of_before() {
    for key in THREADED {
        let d = device(key);
        let t = device(&twin(key));
        for op in ops() {
            let threaded = wasm(&op, &d);
            let plain = wasm(&op, &t);
            assert!(plain.schedules.iter().all(|s| s.threads == 1 && s.split.is_none()), "{} {op}", t.keys);
            let singles: Vec<Schedule> = threaded.schedules.iter().filter(|s| s.threads == 1).cloned().collect();
            assert_eq!(singles, plain.schedules, "{key} {op}");
            assert_eq!(threaded.relaxation, plain.relaxation);
        }
        for (kind, shape) in [("matmul_q4", "1,4096,4096"), ("matmul_q4", "384,768,768")] {
            let op = Op::parse(kind, shape).unwrap();
            assert_eq!(wasm(&op, &d), wasm(&op, &t), "{key} {op}");
        }
    }
    // The GGUF ops are threaded: decode (M = 1) splits N. Their parts are
    // judged by the weights they stream, not by flops: a thread count comes
    // first where each part reads PART_WEIGHT_BYTES, after the
    // single-threaded candidates where none does.
    for key in THREADED {
        let d = device(key);
        for (kind, shape) in SMOLLM2_DECODE {
            let op = Op::parse(kind, shape).unwrap();
            let s = wasm(&op, &d);
            let threaded: Vec<&Schedule> = s.schedules.iter().filter(|c| c.threads > 1).collect();
            assert!(!threaded.is_empty() && threaded.iter().all(|c| c.split == Some(webtune_compiler::Split::N)), "{key} {op}");
            let worth = |t: u32| flops(&op) / t as u64 >= PART_FLOPS || gguf_weight_bytes(&op) / t as u64 >= PART_WEIGHT_BYTES;
            match thread_counts(d.threads).into_iter().find(|&t| worth(t)) {
                Some(t) => assert_eq!(s.schedules[0].threads, t, "{key} {op}"),
                None => assert_eq!(s.schedules[0].threads, 1, "{key} {op}"),
            }
        }
    }
    // On two threads every product of SmolLM2's decode step comes split
    // first (the smallest, 576×576, reads 243 KiB), while an f32 product of
    // the same flops as the largest layer's stays on one thread first.
    let two = device("cpu-x86/relaxed-simd/linux-2t.mt-v8/-");
    for (kind, shape) in SMOLLM2_DECODE {
        assert_eq!(wasm(&Op::parse(kind, shape).unwrap(), &two).schedules[0].threads, 2, "{kind} {shape}");
    }
    assert_eq!(wasm(&Op::parse("matmul", "1,576,3072").unwrap(), &two).schedules[0].threads, 1);
    // One core, or a key of before threads: nothing threaded.
    for key in
        ["cpu-x86/relaxed-simd/linux-1t-v8/-", "cpu-x86/relaxed-simd/linux-1t.mt-v8/-", "cpu-unknown/unknown/unknown-unknownt-unknown/-"]
    {
        let d = device(key);
        assert_eq!(d.threads, 1, "{key}");
        for op in ops() {
            assert!(wasm(&op, &d).schedules.iter().all(|s| s.threads == 1), "{key} {op}");
        }
    }
    let gpu = Device::from_fingerprint(&presets::get("h100").unwrap()).unwrap();
    for op in ops() {
        assert!(lite_space(&op, Target::Wgsl, &gpu, &Settings::builtin(Target::Wgsl)).schedules.iter().all(|s| s.threads == 1));
    }
}

/// Checksums of spaces of keys without threads, taken at f3ae381 (before
/// the tuner knew threads): threads changed none of them. If the
/// single-threaded rules change on purpose, take them again (K1 on V8's
/// keys, 640,768,3072, retaken when wide-N shapes got a whole-M block).
#[test]
fn checksums_of_keys_without_threads_are_those_of_before() {
    let pinned: [(&str, [&str; 6]); 3] = [
        (
            "cpu-x86/relaxed-simd/linux-2t-v8/-",
            ["d167578793b74739", "e8bcdd50d4ca8b9f", "07d77a2b53b2be93", "b32a3c5f3876dda0", "402a0615f82e1702", "0ee25c5780976216"],
        ),
        (
            "cpu-arm/relaxed-simd/macos-8t-v8/-",
            ["179837036d78ddda", "3cd9abca57a189b7", "c1f5d6bff62e2c14", "d7da75485ee507fb", "952f66f6b7541ae6", "cc4065c71b3148dd"],
        ),
        (
            "cpu-x86/relaxed-simd/linux-2t-webtune-native/-",
            ["41e1f67e59e5c987", "41e1f67e59e5c987", "41e1f67e59e5c987", "e6203240a91455ea", "41e1f67e59e5c987", "3184c9d1144bed0a"],
        ),
    ];
    for (key, sums) in pinned {
        for (op, sum) in ops().iter().zip(sums) {
            assert_eq!(wasm(op, &device(key)).checksum, sum, "{key} {op}");
        }
    }
}

/// Where each part gets `PART_FLOPS` of work, threaded candidates come
/// first, the device's full thread count first; elsewhere they come after
/// every single-threaded one, the smallest count first.
#[test]
fn threaded_candidates_first_only_where_parts_have_plenty_of_work() {
    for key in THREADED {
        let d = device(key);
        for op in ops() {
            let sp = wasm(&op, &d).schedules;
            let first_single = sp.iter().position(|s| s.threads == 1).unwrap();
            let last_single = sp.iter().rposition(|s| s.threads == 1).unwrap();
            let (mut before, mut after) = (Vec::new(), Vec::new());
            for (i, s) in sp.iter().enumerate().filter(|(_, s)| s.threads > 1) {
                if flops(&op) / s.threads as u64 >= PART_FLOPS {
                    assert!(i < first_single, "{key} {op}: {i} {s:?}");
                    before.push(s.threads);
                } else {
                    assert!(i > last_single, "{key} {op}: {i} {s:?}");
                    after.push(s.threads);
                }
            }
            assert!(before.windows(2).all(|w| w[0] >= w[1]), "{key} {op}: {before:?}");
            assert!(after.windows(2).all(|w| w[0] <= w[1]), "{key} {op}: {after:?}");
            if let Some(&t) = before.first() {
                assert_eq!(t, thread_counts(d.threads).into_iter().find(|&t| flops(&op) / t as u64 >= PART_FLOPS).unwrap());
            }
        }
    }
    let eight = device("cpu-x86/relaxed-simd/linux-8t.mt-v8/-");
    let ops = ops();
    // K0, K1, K2 and the encoder's 128-token projection: 8 threads first.
    for op in &ops[..3].iter().chain(&ops[4..5]).collect::<Vec<_>>() {
        assert_eq!(wasm(op, &eight).schedules[0].threads, 8, "{op}");
    }
    // 16 tokens: 14 MFLOP, enough for 2 parts, not 4 or 8.
    let sp = wasm(&ops[3], &eight).schedules;
    assert_eq!(sp[0].threads, 2);
    assert!(sp.iter().any(|s| s.threads == 8));
    // The attention of 16 tokens (0.4 MFLOP): one thread first.
    let sp = wasm(&ops[5], &eight).schedules;
    assert_eq!(sp[0].threads, 1);
    assert!(sp.iter().any(|s| s.threads > 1));
    // No thread count that no split can feed: a 4×4 output has at most 4
    // rows or columns to give 16 threads.
    let tiny = Op::parse("matmul", "4,64,4").unwrap();
    assert!(wasm(&tiny, &device("cpu-x86/relaxed-simd/linux-16t.mt-v8/-")).schedules.iter().all(|s| s.threads <= 4));
    let one = Op::parse("matmul", "1,64,1").unwrap();
    assert!(wasm(&one, &device("cpu-x86/relaxed-simd/linux-16t.mt-v8/-")).schedules.iter().all(|s| s.threads == 1));
}
