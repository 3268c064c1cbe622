//! The lite space over random shapes and devices: every candidate passes
//! `Schedule::check` and compiles, the space is never empty, its order and
//! checksum are deterministic, and device keys do not depend on field order.

use proptest::prelude::*;
use webtune_compiler::{Op, Schedule, Target, compile};
use webtune_tuner::{Device, Fingerprint, Settings, Space, extended_space, lite_space, presets};

fn devices() -> Vec<Device> {
    let mut out: Vec<Device> = presets::names().into_iter().map(|n| Device::from_fingerprint(&presets::get(n).unwrap()).unwrap()).collect();
    for text in [
        "{}",
        r#"{"target": "wgsl"}"#,
        r#"{"adapter": {"vendor": "amd", "architecture": "rdna-3"}}"#,
        r#"{"adapter": {"vendor": "intel", "architecture": "gen-12lp"}}"#,
        r#"{"adapter": {"vendor": "qualcomm", "architecture": "adreno-7xx"}, "limits": {"maxComputeInvocationsPerWorkgroup": 128}}"#,
        r#"{"target": "wasm", "simd": false}"#,
        // Wasm threads on 8 cores: threaded candidates (tests/threads.rs).
        r#"{"target": "wasm", "simd": true, "threads": true, "hardwareConcurrency": 8, "os": "Android", "browser": {"name": "Firefox"}}"#,
    ] {
        out.push(Device::from_fingerprint(&Fingerprint::from_json(text).unwrap()).unwrap());
    }
    out
}

fn space(op: &Op, target: Target, d: &Device) -> Space {
    lite_space(op, target, d, &Settings::builtin(target))
}

/// K0 and K2 of NNJIT Table 3 and a q4 decode shape: at most 32 candidates on
/// every device, each one valid.
#[test]
fn table6_shapes_fit_the_budget() {
    let ops = [
        Op::parse("matmul", "384,768,768").unwrap(),
        Op::parse("batch_matmul", "12,384,384,64").unwrap(),
        Op::parse("matmul_q4", "1,4096,4096").unwrap(),
        Op::parse("matmul_q4", "384,768,768").unwrap(),
    ];
    for d in devices() {
        for op in &ops {
            for t in [Target::Wasm, Target::Wgsl] {
                let s = space(op, t, &d);
                assert!(!s.schedules.is_empty() && s.schedules.len() <= 32, "{op} {t} {}: {}", d.keys, s.schedules.len());
                // matmul_q4 has fewer knobs (a decode shape's naive space is thousands, not millions).
                let factor = if op.kind() == webtune_compiler::op::OpKind::MatmulQ4 { 10 } else { 10_000 };
                assert!(s.naive_size > factor * s.schedules.len() as u64, "{op} {t}: naive {}", s.naive_size);
                for c in &s.schedules {
                    c.check(op, t).unwrap_or_else(|e| panic!("{op} {t} {}: {e}", d.keys));
                }
            }
        }
    }
}

#[test]
fn limits_and_settings_are_respected() {
    let op = Op::parse("matmul", "384,768,768").unwrap();
    let low = Device::from_fingerprint(
        &Fingerprint::from_json(r#"{"adapter": {"vendor": "nvidia", "architecture": "hopper"}, "limits": {"maxComputeInvocationsPerWorkgroup": 64, "maxComputeWorkgroupStorageSize": 4096}}"#)
            .unwrap(),
    )
    .unwrap();
    let s = space(&op, Target::Wgsl, &low);
    assert!(!s.schedules.is_empty());
    for c in &s.schedules {
        assert!((c.x1 / c.x0) * (c.y1 / c.y0) <= 64, "{c:?}");
        if c.cache_read {
            let stages = if c.double_buffer { 2 } else { 1 };
            assert!((c.x1 + c.y1) * c.r1 * 4 * stages <= 4096, "{c:?}");
        }
    }
    let h100 = Device::from_fingerprint(&presets::get("h100").unwrap()).unwrap();
    let full = space(&op, Target::Wgsl, &h100);
    assert_ne!(full.checksum, s.checksum);
    // Built-in WGSL settings keep cache_read and double_buffer
    // device-dependent: both settings of each appear, double buffering only
    // on staged tiles, and each staged tile one register step per stage.
    assert!(full.schedules.iter().any(|c| c.cache_read) && full.schedules.iter().any(|c| !c.cache_read));
    assert!(full.schedules.iter().any(|c| c.double_buffer) && full.schedules.iter().any(|c| c.cache_read && !c.double_buffer));
    assert!(full.schedules.iter().all(|c| c.tile_in_registers() && (c.cache_read || !c.double_buffer) && c.r1 == c.r0));
    // A settings file that fixes cache_read off removes the staged candidates.
    let mut fixed = Settings::builtin(Target::Wgsl);
    fixed.dependent.clear();
    fixed.fixed.insert("cache_read".into(), "off".into());
    let off = lite_space(&op, Target::Wgsl, &h100, &fixed);
    assert!(off.schedules.iter().all(|c| !c.cache_read));
    assert_ne!(off.checksum, full.checksum);
    // The rules checksum is one per op, target and settings, whatever the device.
    use webtune_tuner::rules_checksum;
    assert_eq!(
        rules_checksum(&op, Target::Wgsl, &Settings::builtin(Target::Wgsl)),
        rules_checksum(&op, Target::Wgsl, &Settings::builtin(Target::Wgsl))
    );
    assert_ne!(rules_checksum(&op, Target::Wgsl, &fixed), rules_checksum(&op, Target::Wgsl, &Settings::builtin(Target::Wgsl)));
    assert_ne!(
        rules_checksum(&op, Target::Wasm, &Settings::builtin(Target::Wasm)),
        rules_checksum(&op, Target::Wgsl, &Settings::builtin(Target::Wgsl))
    );
    // Relaxed SIMD only where the client has it.
    // B is packed for a browser's engine (V8), not for the native client's.
    let cpu = Device::from_fingerprint(&presets::get("xeon-2core").unwrap()).unwrap();
    assert!(space(&op, Target::Wasm, &cpu).schedules.iter().all(|c| c.relaxed_simd && c.vectorize == 4 && c.cache_read));
    let native = Device::from_fingerprint(&presets::get("xeon-2core-native").unwrap()).unwrap();
    assert!(space(&op, Target::Wasm, &native).schedules.iter().all(|c| c.relaxed_simd && c.vectorize == 4 && !c.cache_read));
    let plain = Device::from_fingerprint(&Fingerprint::from_json(r#"{"target": "wasm", "simd": true}"#).unwrap()).unwrap();
    assert!(space(&op, Target::Wasm, &plain).schedules.iter().all(|c| !c.relaxed_simd));
}

#[test]
fn register_file_size_changes_the_cpu_space() {
    let op = Op::parse("matmul", "384,768,768").unwrap();
    let x86 = Device::from_fingerprint(&presets::get("xeon-2core").unwrap()).unwrap();
    let arm =
        Device::from_fingerprint(&Fingerprint::from_json(r#"{"target": "wasm", "os": "Android", "relaxedSimd": true}"#).unwrap()).unwrap();
    let (a, b) = (space(&op, Target::Wasm, &x86), space(&op, Target::Wasm, &arm));
    let biggest = |s: &Space| s.schedules.iter().map(|c| c.x0 * c.y0).max().unwrap();
    // 32 vector registers hold larger register tiles than 16.
    assert!(biggest(&b) > biggest(&a), "{} vs {}", biggest(&b), biggest(&a));
}

#[test]
fn each_cpu_register_tile_gets_l1_blocks_and_one_deep_k_block() {
    use webtune_compiler::schedule::LoopOrder;
    // The rule for an engine that spills cheaply (the native client's wasmtime).
    let x86 = Device::from_fingerprint(&presets::get("xeon-2core-native").unwrap()).unwrap();
    for (kind, shape) in [("matmul", "384,768,768"), ("matmul", "640,768,3072"), ("batch_matmul", "12,384,384,64")] {
        let op = Op::parse(kind, shape).unwrap();
        let sp = space(&op, Target::Wasm, &x86);
        let mut tiles: Vec<(u32, u32)> = sp.schedules.iter().map(|c| (c.x0, c.y0)).collect();
        tiles.dedup();
        for (x0, y0) in tiles {
            let of: Vec<&Schedule> = sp.schedules.iter().filter(|c| (c.x0, c.y0) == (x0, y0)).collect();
            let deep: Vec<&&Schedule> = of.iter().filter(|c| c.order == LoopOrder::KMN).collect();
            assert_eq!(deep.len(), 1, "{kind} {shape} {x0}x{y0}: one deep K block");
            assert_eq!((deep[0].x1, deep[0].y1, deep[0].r1), (32.max(x0), 32.max(y0), 256));
            // It comes after the tile's L1 blocks, which keep the settings' order.
            assert_eq!(of.last().unwrap().order, LoopOrder::KMN);
            assert!(of.iter().filter(|c| c.order != LoopOrder::KMN).all(|c| c.order == LoopOrder::MNK && c.r1 <= 128));
            // Two K steps per loop iteration at most (the wide searches' winners).
            assert!(of.iter().all(|c| c.r0 <= 2));
        }
    }
}

#[test]
fn a_browser_engine_gets_register_tiles_that_never_spill_and_packed_blocks() {
    use webtune_compiler::schedule::LoopOrder;
    let x86 = Device::from_fingerprint(&presets::get("xeon-2core").unwrap()).unwrap();
    let arm = Device::from_fingerprint(
        &Fingerprint::from_json(r#"{"target": "wasm", "os": "Android", "relaxedSimd": true, "browser": {"name": "Chrome"}}"#).unwrap(),
    )
    .unwrap();
    for (kind, shape) in
        [("matmul", "384,768,768"), ("matmul", "640,768,3072"), ("batch_matmul", "12,384,384,64"), ("batch_matmul", "120,64,64,64")]
    {
        let op = Op::parse(kind, shape).unwrap();
        let (_, m, k, n) = op.bmkn();
        for (dev, regs) in [(&x86, 15), (&arm, 28)] {
            let sp = space(&op, Target::Wasm, dev);
            // The single-threaded candidates (the x86 preset also has
            // threaded variants of them: tests/threads.rs).
            let singles: Vec<Schedule> = sp.schedules.iter().filter(|c| c.threads == 1).cloned().collect();
            // Wide N: each tile has a block of all of M first (four blocks, not three).
            let wide = n >= 2048 && m <= 1024;
            assert!(singles.len() >= 8 && singles.len() <= if wide { 16 } else { 12 }, "{kind} {shape}: {}", singles.len());
            if wide {
                for (i, c) in singles.iter().enumerate() {
                    let first_of_tile = i == 0 || (singles[i - 1].x0, singles[i - 1].y0) != (c.x0, c.y0);
                    assert_eq!(first_of_tile, c.x1 == m / c.x0 * c.x0, "{kind} {shape} candidate {i}: {c:?}");
                }
            }
            let live = |c: &Schedule| c.x0 * (c.y0 / 4) + c.y0 / 4 + 1;
            // The tile, a row of B and a splat of A fit the registers V8 allocates.
            assert!(sp.schedules.iter().all(|c| live(c) <= regs && c.cache_read && c.vectorize == 4), "{kind} {shape}");
            // Loads per multiply-add never get worse down the list.
            let loads = |c: &Schedule| (c.x0 + c.y0 / 4) as f64 / (c.x0 * c.y0 / 4) as f64;
            assert!(singles.windows(2).all(|w| loads(&w[0]) <= loads(&w[1]) + 1e-9));
            // Blocks hold whole register tiles and stay within the op.
            for c in &sp.schedules {
                assert!(c.x1 % c.x0 == 0 && c.y1 % c.y0 == 0 && c.r1 % c.r0 == 0, "{c:?}");
                assert!(c.x1 <= m.max(c.x0) && c.y1 <= n.next_power_of_two() && c.r1 <= k.next_power_of_two(), "{c:?}");
                assert!([LoopOrder::NKM, LoopOrder::KMN].contains(&c.order));
            }
        }
        // On x86 the first tile is 6×8: 12 accumulators, 2 of B, 1 of A
        // (threaded or not: these shapes give two parts plenty of work).
        let first = &space(&op, Target::Wasm, &x86).schedules[0];
        assert_eq!((first.x0, first.y0), (6, 8), "{kind} {shape}");
    }
}

#[test]
fn q4_decode_on_a_known_subgroup_width_gets_butterflies_with_their_fallbacks() {
    let op = Op::parse("matmul_q4", "1,4096,4096").unwrap();
    let h100 = Device::from_fingerprint(&presets::get("h100").unwrap()).unwrap();
    let s = space(&op, Target::Wgsl, &h100).schedules;
    // First: two outputs per thread, a warp per output (K split 32 ways),
    // two warps per workgroup (one-warp workgroups fill half a core's warps
    // before its workgroup cap), r0 = 128 (K in one step), the subgroup
    // butterfly, then the same schedule reducing in workgroup memory. (On
    // the H200 both decode shapes' bests split K 32 ways: BENCHMARKS.md.)
    assert_eq!(
        (s[0].y0, s[0].y1, s[0].split_k, s[0].r0, s[0].double_buffer, s[0].subgroup_reduce),
        (2, 4, 32, 128, false, true),
        "{:?}",
        s[0]
    );
    // Every candidate before the first other split splits K 32 ways.
    let first_other = s.iter().position(|c| c.split_k != 32).unwrap();
    assert!(first_other >= 8, "{first_other}");
    assert_eq!(Schedule { subgroup_reduce: false, ..s[0].clone() }, s[1]);
    // Its double-buffered twin (r0 = 32, four steps) follows, since 128
    // divides K's steps evenly.
    assert_eq!((s[2].r0, s[2].double_buffer, s[2].subgroup_reduce), (32, true, true), "{:?}", s[2]);
    for (i, c) in s.iter().enumerate() {
        if c.subgroup_reduce {
            assert!(c.split_k <= 32 && c.split_k.is_power_of_two(), "{c:?}");
            assert_eq!(s.get(i + 1), Some(&Schedule { subgroup_reduce: false, ..c.clone() }), "candidate {i} has no fallback");
            let k = compile(&op, Target::Wgsl, c).unwrap();
            assert_eq!(k.meta.min_subgroup_size, Some(c.split_k));
        }
    }
    // Where the subgroup width is unknown, none.
    for d in devices().into_iter().filter(|d| !["nvidia", "apple"].contains(&d.vendor.as_str())) {
        assert!(space(&op, Target::Wgsl, &d).schedules.iter().all(|c| !c.subgroup_reduce), "{}", d.keys.device_key);
    }
}

#[test]
fn q4_double_buffering_first_and_only_where_k_makes_three_steps() {
    let h100 = Device::from_fingerprint(&presets::get("h100").unwrap()).unwrap();
    for shape in ["1,4096,4096", "1,3072,9216", "1,8192,3072", "1,128,64", "2,64,40"] {
        let op = Op::parse("matmul_q4", shape).unwrap();
        let (_, _, k, _) = op.bmkn();
        let s = space(&op, Target::Wgsl, &h100).schedules;
        // The matrix-vector family's register double buffering (the tiled
        // family's double-buffers workgroup memory).
        for c in s.iter().filter(|c| !c.cache_read) {
            if c.double_buffer {
                assert!(c.q4_gpu_steps(k).0 >= 3, "{shape}: {c:?}");
            }
        }
        let with = s.iter().filter(|c| c.double_buffer && !c.cache_read).count();
        if k >= 3 * 32 * 8 {
            assert!(with > 0, "{shape}: no double-buffered candidate");
        }
        // First exactly where the single-buffered first's steps leave a remainder of K.
        let single = s.iter().find(|c| !c.double_buffer).unwrap();
        let ragged = single.q4_gpu_steps(k).1 != 0;
        if with > 0 && shape.starts_with("1,") && k >= 3072 {
            assert_eq!(s[0].double_buffer, ragged, "{shape}: {:?}", s[0]);
        }
    }
}

/// matmul_q4 on WGSL by M: decode only the matrix-vector family; up to 16
/// rows it leads; beyond, the tiled family (B dequantised into workgroup
/// memory) leads, and where its grid is small its first candidates split K.
#[test]
fn q4_families_by_rows_and_split_k_where_the_grid_is_small() {
    let h100 = Device::from_fingerprint(&presets::get("h100").unwrap()).unwrap();
    let tiled = |shape: &str| -> Vec<bool> {
        let op = Op::parse("matmul_q4", shape).unwrap();
        space(&op, Target::Wgsl, &h100).schedules.iter().map(|c| c.cache_read).collect()
    };
    assert!(tiled("1,4096,4096").iter().all(|t| !t), "decode has no tiled candidate");
    let m16 = tiled("16,4096,4096");
    assert!(!m16[0] && m16.iter().any(|t| *t), "{m16:?}");
    // Near the crossover three to one, far beyond it seven to one; the
    // matrix-vector family always keeps a share.
    for (shape, run) in [("32,4096,4096", 3), ("64,4096,4096", 7), ("512,4096,4096", 7)] {
        let t = tiled(shape);
        let mut want = vec![true; run];
        want.push(false);
        assert_eq!(&t[..=run], &want[..], "{shape}: {t:?}");
        assert!(t.len() <= 32 && t.iter().filter(|x| !**x).count() >= 32 / (run + 1), "{shape}: {t:?}");
    }
    // Splitting K where the unsplit grid is small (64 rows): first across
    // workgroups (k_slices), then within them (split_k) on the same tile;
    // not where the grid fills the GPU (512 rows, and f32 4096³).
    let lite = |kind: &str, shape: &str| space(&Op::parse(kind, shape).unwrap(), Target::Wgsl, &h100).schedules;
    for (kind, shape, split) in [
        ("matmul_q4", "64,4096,4096", true),
        ("matmul", "64,4096,4096", true),
        ("matmul", "4096,4096,4096", false),
        ("matmul_q4", "512,4096,4096", false),
    ] {
        let l = lite(kind, shape);
        let (s, t) = (&l[0], &l[1]);
        assert_eq!((s.k_slices > 1, s.split_k), (split, 1), "{kind} {shape}: {s:?}");
        if split {
            assert_eq!((t.k_slices, t.split_k > 1, (t.x1, t.y1)), (1, true, (s.x1, s.y1)), "{kind} {shape}: {t:?}");
        }
        assert!(l.iter().all(|s| s.check(&Op::parse(kind, shape).unwrap(), Target::Wgsl).is_ok()));
    }
}

/// The tiled matmul_q4 family in two passes (`dequant_pass`: the weights
/// unpacked once into scratch, then the plain matmul tile): from
/// `GPU_Q4_DEQUANT_ROWS` rows every two-pass tile comes before every
/// one-pass tile, and both are there; below, there are none; and no
/// two-pass tile is offered where the unpacked weights would pass WebGPU's
/// default storage binding limit (K·N·4 bytes over 128 MiB).
#[test]
fn q4_two_pass_tiles_lead_from_the_crossover() {
    let h100 = Device::from_fingerprint(&presets::get("h100").unwrap()).unwrap();
    let rows = webtune_tuner::space::GPU_Q4_DEQUANT_ROWS;
    for m in [rows / 2, rows - 1, rows, 2 * rows] {
        let op = Op::parse("matmul_q4", &format!("{m},4096,4096")).unwrap();
        let dq: Vec<bool> = space(&op, Target::Wgsl, &h100).schedules.iter().filter(|s| s.cache_read).map(|s| s.dequant_pass).collect();
        if m < rows {
            assert!(!dq.is_empty() && dq.iter().all(|d| !d), "{m} rows: {dq:?}");
            continue;
        }
        let switch = dq.iter().position(|&d| !d).unwrap_or_else(|| panic!("{m} rows: no one-pass tile: {dq:?}"));
        assert!(switch > 0 && dq[switch..].iter().all(|&d| !d), "{m} rows: {dq:?}");
    }
    let big = Op::parse("matmul_q4", "512,8192,8192").unwrap();
    let l = space(&big, Target::Wgsl, &h100).schedules;
    assert!(l.iter().any(|s| s.cache_read) && l.iter().all(|s| !s.dequant_pass), "{l:?}");
}

/// Slice twins fill the GPU with workgroups as well as threads: at 128 rows
/// the 8×8 / 64×128 tile (128 threads, 64 workgroups) reaches 32 K threads
/// and 256 workgroups with 4 slices, the 8×8 / 128×128 tile (256 threads,
/// 32 workgroups) needs 8 for the workgroups.
#[test]
fn slice_twins_reach_enough_workgroups_too() {
    let h100 = Device::from_fingerprint(&presets::get("h100").unwrap()).unwrap();
    let op = Op::parse("matmul", "128,4096,4096").unwrap();
    let l = space(&op, Target::Wgsl, &h100).schedules;
    let slices = |x1: u32, y1: u32| {
        l.iter()
            .filter(|s| (s.x0, s.y0, s.x1, s.y1, s.split_k, s.double_buffer) == (8, 8, x1, y1, 1, true) && s.k_slices > 1)
            .map(|s| s.k_slices)
            .collect::<Vec<_>>()
    };
    assert_eq!(slices(64, 128), vec![4], "{l:?}");
    assert_eq!(slices(128, 128), vec![8], "{l:?}");
    for s in &l {
        if s.k_slices > 1 {
            let groups = 128u32.div_ceil(s.x1) * 4096u32.div_ceil(s.y1) * s.k_slices;
            let threads = groups * (s.x1 / s.x0) * (s.y1 / s.y0) * s.split_k;
            assert!(groups >= 256 && threads >= 32 * 1024, "{s:?}");
        }
    }
}

#[test]
fn server_rebuilds_the_space_from_keys() {
    let op = Op::parse("batch_matmul", "12,384,384,64").unwrap();
    for d in devices() {
        let again = Device::from_keys(&webtune_tuner::DeviceKeys::from_device_key(&d.keys.device_key).unwrap());
        for t in [Target::Wasm, Target::Wgsl] {
            assert_eq!(space(&op, t, &d), space(&op, t, &again), "{}", d.keys);
        }
    }
}

#[test]
fn extended_space_puts_winners_first() {
    let op = Op::parse("matmul", "384,768,768").unwrap();
    let d = Device::from_fingerprint(&presets::get("h100").unwrap()).unwrap();
    let lite = space(&op, Target::Wgsl, &d);
    let winner = Schedule::default_for(&op, Target::Wgsl);
    let ext = extended_space(std::slice::from_ref(&winner), &lite);
    assert_eq!(ext[0].1, winner);
    assert_eq!(ext.len(), lite.schedules.len() + usize::from(!lite.schedules.contains(&winner)));
}

/// A JSON object with its keys in reverse order, recursively.
fn reversed(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(m) => {
            let parts: Vec<String> =
                m.iter().rev().map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), reversed(v))).collect();
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_shapes_give_valid_compilable_spaces(
        kind in 0usize..3,
        dims in proptest::collection::vec(prop_oneof![1u32..300, Just(1u32), Just(2), Just(3), Just(97), Just(211), Just(293)], 4),
        dev in 0usize..13,
        wgsl in any::<bool>(),
    ) {
        let target = if wgsl { Target::Wgsl } else { Target::Wasm };
        let op = match kind {
            0 => Op::new(webtune_compiler::op::OpKind::Matmul, &dims[..3]),
            1 => Op::new(webtune_compiler::op::OpKind::BatchMatmul, &[dims[0].min(4), dims[1], dims[2], dims[3]]),
            _ => Op::new(webtune_compiler::op::OpKind::MatmulQ4, &[dims[0], 32 * dims[1].div_ceil(8), dims[2]]),
        }.unwrap();
        let devs = devices();
        let d = &devs[dev % devs.len()];
        let s = space(&op, target, d);
        prop_assert!(!s.schedules.is_empty());
        prop_assert!(s.schedules.len() <= 32);
        prop_assert!(s.naive_size >= s.schedules.len() as u64);
        // Deterministic: the same inputs, the same list and checksum.
        let again = space(&op, target, d);
        prop_assert_eq!(&again.schedules, &s.schedules);
        prop_assert_eq!(&again.checksum, &s.checksum);
        prop_assert_eq!(s.checksum.len(), 16);
        // No duplicates.
        for (i, a) in s.schedules.iter().enumerate() {
            prop_assert!(!s.schedules[..i].contains(a));
        }
        // Every candidate passes the check; the first few compile (the
        // compiler's own property tests cover compilation broadly).
        for c in &s.schedules {
            prop_assert!(c.check(&op, target).is_ok(), "{:?}: {:?}", c, c.check(&op, target));
        }
        for c in s.schedules.iter().take(3) {
            prop_assert!(compile(&op, target, c).is_ok(), "{:?}", c);
        }
        // The checksum changes when the list does.
        if s.schedules.len() > 1 {
            let mut swapped = s.schedules.clone();
            swapped.swap(0, 1);
            prop_assert_ne!(webtune_tuner::space::checksum(&swapped), s.checksum.clone());
            prop_assert_ne!(webtune_tuner::space::checksum(&s.schedules[1..]), s.checksum.clone());
        }
    }

    #[test]
    fn keys_ignore_field_order_and_missing_fields(
        vendor in "[A-Za-z0-9 ]{0,12}", arch in "[a-z0-9-]{0,8}", cores in proptest::option::of(1u64..128),
        drop in proptest::collection::vec(any::<bool>(), 6),
    ) {
        let mut v = serde_json::json!({
            "adapter": {"vendor": vendor, "architecture": arch, "description": "x"},
            "limits": {"maxComputeInvocationsPerWorkgroup": 256},
            "hardwareConcurrency": cores, "os": "Linux", "browser": {"name": "Firefox"}, "rho": "0110",
        });
        let names = ["adapter", "limits", "hardwareConcurrency", "os", "browser", "rho"];
        for (name, d) in names.iter().zip(&drop) {
            if *d {
                v.as_object_mut().unwrap().remove(*name);
            }
        }
        let a = Fingerprint::from_json(&v.to_string()).unwrap().keys().unwrap();
        let b = Fingerprint::from_json(&reversed(&v)).unwrap().keys().unwrap();
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(a.device_key.split('/').count(), 4);
        prop_assert!(a.device_key.starts_with(&a.arch_key) && a.arch_key.starts_with(&a.vendor_key));
        prop_assert!(a.device_key.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"-./".contains(&c)));
    }
}

/// The lite space treats a fused epilogue as fixed: every epilogue of an op
/// gets the plain op's candidates, in the same order, and each compiles.
#[test]
fn epilogues_change_no_tile_choice() {
    use webtune_compiler::op::Epilogue;
    for (kind, shape) in [("matmul", "128,384,1536"), ("matmul", "128,1536,384"), ("batch_matmul", "12,128,64,128")] {
        let plain = Op::parse(kind, shape).unwrap();
        for d in devices() {
            for t in [Target::Wasm, Target::Wgsl] {
                let want = space(&plain, t, &d);
                for e in Epilogue::all() {
                    let op = Op::with_epilogue(plain.kind(), e, plain.shape()).unwrap();
                    let got = space(&op, t, &d);
                    assert_eq!(got.schedules, want.schedules, "{op} {t} {}", d.keys);
                    assert_eq!(got.checksum, want.checksum);
                }
                // Each candidate compiles with the fullest epilogue.
                let full = Op::parse(&format!("{kind}+bias+gelu+residual"), shape).unwrap();
                for s in want.schedules.iter().take(3) {
                    compile(&full, t, s).unwrap_or_else(|e| panic!("{full} {t}: {e}"));
                }
            }
        }
    }
}

/// On V8 (tiles in registers), a short M, one sequence of a model, gets a
/// block of all of M and all of K for each register tile, and the first
/// candidate is such a block with a tile that divides M; a tall M does not.
#[test]
fn short_m_gets_a_whole_m_whole_k_block_on_v8() {
    let xeon = Device::from_fingerprint(&presets::get("xeon-2core").unwrap()).unwrap();
    for (shape, want) in [("128,384,1536", true), ("128,1536,384", true), ("1024,384,1536", false)] {
        let op = Op::parse("matmul", shape).unwrap();
        let (m, k) = (op.bmkn().1, op.bmkn().2);
        let lite = space(&op, Target::Wasm, &xeon);
        let whole: Vec<&Schedule> = lite.schedules.iter().filter(|s| s.r1 == k && s.x1 + s.x0 > m).collect();
        assert_eq!(!whole.is_empty(), want, "{shape}: {} whole-M whole-K blocks", whole.len());
        if want {
            let first = &lite.schedules[0];
            assert!(m % first.x0 == 0 && first.x1 == m && first.r1 == k, "{shape}: first candidate {first:?}");
        }
    }
}

/// An f16 op's space on WebGPU holds its f32 twin's tiles, every one valid
/// for the f16 op. On a GPU with fast f16 arithmetic, matmul and
/// batch_matmul (not with GELU) take their first 16 tiles in f16 arithmetic,
/// then the same in f32 arithmetic, and matmul_q4's tiled family likewise
/// (its matrix-vector family stays f32); elsewhere (GELU, a CPU rasteriser)
/// the list is the f32 op's. On Wasm it has none.
#[test]
fn f16_ops_take_the_f32_tiles_on_webgpu_and_none_on_wasm() {
    let h100 = Device::from_fingerprint(&presets::get("h100").unwrap()).unwrap();
    let swiftshader = Device::from_fingerprint(&presets::get("swiftshader").unwrap()).unwrap();
    for (kind, shape, twins) in [
        ("matmul", "384,768,768", true),
        ("batch_matmul+bias+residual", "12,384,384,64", true),
        ("matmul+bias+gelu", "128,4096,4096", false),
        ("matmul_q4", "64,4096,4096", false),
    ] {
        let f32op = Op::parse(kind, shape).unwrap();
        let f16op = f32op.clone().with_dtype(webtune_compiler::op::Dtype::F16).unwrap();
        for (dev, fast) in [(&h100, true), (&swiftshader, false)] {
            let (a, b) = (space(&f32op, Target::Wgsl, dev).schedules, space(&f16op, Target::Wgsl, dev).schedules);
            assert!(!b.is_empty());
            if twins && fast {
                let n = a.len().min(16);
                assert_eq!(b.len(), 2 * n, "{kind} {shape}");
                for i in 0..n {
                    assert!(b[i].f16_acc && !b[n + i].f16_acc, "{kind} {shape} {i}");
                    assert_eq!((&Schedule { f16_acc: false, ..b[i].clone() }, &b[n + i]), (&a[i], &a[i]));
                }
            } else if kind == "matmul_q4" && fast {
                assert!(b.iter().any(|s| s.f16_acc) && b.iter().all(|s| !s.f16_acc || s.cache_read), "{kind} {shape}");
                let first_f32_tiled = b.iter().position(|s| s.cache_read && !s.f16_acc).unwrap();
                assert!(b[..first_f32_tiled].iter().filter(|s| s.cache_read).count() >= 8, "{kind} {shape}");
            } else {
                assert!(a == b, "{kind} {shape} on {}", dev.keys.device_key);
            }
            for s in &b {
                s.check(&f16op, Target::Wgsl).unwrap_or_else(|e| panic!("{} {s:?}: {e}", f16op.name()));
            }
        }
    }
    let cpu = Device::from_fingerprint(&presets::get("xeon-2core").unwrap()).unwrap();
    let op = Op::parse("matmul+f16", "64,64,64").unwrap();
    assert!(space(&op, Target::Wasm, &cpu).schedules.is_empty());
}

/// The GGUF ops of SmolLM2 (decode, M = 1, and a 128-token prefill) on Wasm
/// and WGSL: at most 32 candidates on every device, each valid and
/// compiling, the best first by matmul_q4's rules (on WGSL the
/// matrix-vector family first at M = 1, the tiled one at 128 rows).
#[test]
fn gguf_ops_get_spaces_on_both_targets() {
    let shapes = [
        ("matmul_q4_1", "1,576,960"),
        ("matmul_q4_1", "1,576,3072"),
        ("matmul_q4_1", "1,1536,576"),
        ("matmul_q4_1", "128,576,1536"),
        ("matmul_q8_0", "1,576,49152"),
        ("matmul_q8_0", "128,576,960"),
    ];
    for d in devices() {
        for (kind, shape) in shapes {
            let op = Op::parse(kind, shape).unwrap();
            let s = space(&op, Target::Wasm, &d);
            assert!(!s.schedules.is_empty() && s.schedules.len() <= 32, "{op} {}: {}", d.keys, s.schedules.len());
            assert!(s.naive_size > 10 * s.schedules.len() as u64, "{op}: naive {}", s.naive_size);
            for c in s.schedules.iter().take(3) {
                compile(&op, Target::Wasm, c).unwrap_or_else(|e| panic!("{op} {}: {e}", d.keys));
            }
            for c in &s.schedules {
                c.check(&op, Target::Wasm).unwrap_or_else(|e| panic!("{op} {}: {e}", d.keys));
                // The panel family (cache_read) is for prompts; decode unpacks in registers.
                assert!((!c.cache_read || op.bmkn().1 >= 8) && c.r0 % 32 == 0, "{op}: {c:?}");
            }
            assert_eq!(s.schedules[0].cache_read, op.bmkn().1 >= 8, "{op} {}: the panel family first for a prompt", d.keys);
            let g = space(&op, Target::Wgsl, &d);
            assert!(!g.schedules.is_empty() && g.schedules.len() <= 32, "{op} {} on WGSL: {}", d.keys, g.schedules.len());
            assert!(g.naive_size > 10 * g.schedules.len() as u64, "{op}: naive {}", g.naive_size);
            for c in &g.schedules {
                c.check(&op, Target::Wgsl).unwrap_or_else(|e| panic!("{op} {} on WGSL: {e}", d.keys));
            }
            for c in g.schedules.iter().take(3) {
                compile(&op, Target::Wgsl, c).unwrap_or_else(|e| panic!("{op} {} on WGSL: {e}", d.keys));
            }
            assert_eq!(g.schedules[0].cache_read, op.bmkn().1 > 16, "{op} {}: {:?}", d.keys, g.schedules[0]);
        }
    }
    // The same tiles as matmul_q4 where the registers allow: Q8_0's first
    // f32 candidate is Q4's first on a decode shape.
    let d = &devices()[0];
    let q4 = space(&Op::parse("matmul_q4", "1,576,960").unwrap(), Target::Wasm, d);
    let q8 = space(&Op::parse("matmul_q8_0", "1,576,960").unwrap(), Target::Wasm, d);
    let f32_first = q8.schedules.iter().find(|s| !s.quantize_a).unwrap();
    assert_eq!((f32_first.x0, f32_first.y0), (q4.schedules[0].x0, q4.schedules[0].y0));
}

/// The GGUF kernels with 16-bit activations (`quantize_a`) on Wasm: for
/// decode (M = 1) on every device with SIMD they come first, the smallest
/// register tile first (one column: its weights one sequential stream),
/// and every one's accumulators and the kernel's other
/// registers fit what the engine allocates; f32 candidates follow in their
/// own order. For a prompt the panel family stays first; without SIMD
/// there are none; matmul_q4 has none.
#[test]
fn gguf_int_candidates_lead_decode_where_simd_is() {
    for d in devices() {
        for (kind, shape) in [("matmul_q4_1", "1,576,3072"), ("matmul_q4_1", "1,1536,576"), ("matmul_q8_0", "1,576,49152")] {
            let op = Op::parse(kind, shape).unwrap();
            let s = space(&op, Target::Wasm, &d).schedules;
            let singles: Vec<_> = s.iter().filter(|c| c.threads == 1).collect();
            if !d.simd.simd() {
                assert!(s.iter().all(|c| !c.quantize_a), "{op} {}: no SIMD, no integer dot products", d.keys);
                continue;
            }
            assert!(singles[0].quantize_a && singles[0].x0 * singles[0].y0 == 1, "{op} {}: {:?}", d.keys, singles[0]);
            let ints = singles.iter().take_while(|c| c.quantize_a).count();
            assert!(ints < singles.len() && singles[ints..].iter().all(|c| !c.quantize_a), "{op} {}: the f32 candidates follow", d.keys);
            for c in singles.iter().filter(|c| c.quantize_a) {
                assert!(c.vectorize == 4 && !c.cache_read && c.x0 * c.y0 + c.x0 + 8 <= d.cpu.allocatable, "{op} {}: {c:?}", d.keys);
            }
            assert!(singles.windows(2).take(ints - 1).all(|w| w[0].x0 * w[0].y0 <= w[1].x0 * w[1].y0), "{op} {}", d.keys);
        }
        let prompt = Op::parse("matmul_q4_1", "128,576,1536").unwrap();
        assert!(space(&prompt, Target::Wasm, &d).schedules[0].cache_read, "{}", d.keys);
        let q4 = Op::parse("matmul_q4", "1,576,960").unwrap();
        assert!(space(&q4, Target::Wasm, &d).schedules.iter().all(|c| !c.quantize_a));
    }
}
