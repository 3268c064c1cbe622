//! The same kernels run in Node's V8 and in wasmtime, and both agree with the
//! f64 reference. Node is a required tool for the test suite
//! (`scripts/test.sh` installs it); without it this test fails.

mod common;

use std::path::Path;
use std::process::Command;

use webtune_compiler::reference::{self, Rng};
use webtune_compiler::schedule::{LoopOrder, UnrollLoop};
use webtune_compiler::{Op, Schedule, Target, WasmPasses, compile};

fn cases() -> Vec<(Op, Schedule)> {
    let mut out = Vec::new();
    for (op, shape) in [
        ("matmul", "33,47,29"),
        ("matmul", "1,1,1"),
        ("matmul", "64,96,80"),
        ("batch_matmul", "3,13,17,11"),
        ("matmul_q4", "1,128,37"),
        ("matmul_q4", "3,64,9"),
        ("matmul+bias+gelu", "33,47,29"),
        ("matmul+bias+gelu+residual", "1,7,3"),
        ("batch_matmul+relu+residual", "3,13,17,11"),
        ("matmul+bias+residual", "64,96,80"),
    ] {
        let op = Op::parse(op, shape).unwrap();
        out.push((op.clone(), Schedule::default_for(&op, Target::Wasm)));
    }
    // Random schedules covering relaxed SIMD, cache_read (scratch), rolled tiles and pass subsets.
    let mut rng = Rng::new(99);
    let op = Op::parse("matmul", "37,53,43").unwrap();
    while out.len() < 28 {
        let bit = |rng: &mut Rng| rng.next_u64().is_multiple_of(2);
        let x0 = 1 + (rng.next_u64() % 5) as u32;
        let y0 = 4 * (1 + (rng.next_u64() % 3) as u32);
        let r0 = 1 + (rng.next_u64() % 4) as u32;
        let s = Schedule {
            x0,
            y0,
            r0,
            x1: x0 * 4,
            y1: y0 * 2,
            r1: r0 * 8,
            order: LoopOrder::ALL[(rng.next_u64() % 6) as usize],
            inner_n_first: bit(&mut rng),
            unroll: if bit(&mut rng) { vec![UnrollLoop::X0, UnrollLoop::Y0, UnrollLoop::R0] } else { vec![UnrollLoop::R0] },
            vectorize: 4,
            cache_read: bit(&mut rng),
            relaxed_simd: bit(&mut rng),
            passes: WasmPasses { offset: bit(&mut rng), load_splat: bit(&mut rng), tee: bit(&mut rng) },
            ..Schedule::default_for(&op, Target::Wasm)
        };
        out.push((op.clone(), s));
    }
    // The GGUF kernels with 16-bit activations (`quantize_a`): V8's
    // f32x4.abs/max, f32.nearest, i32.trunc_sat_f32_s and i32x4.dot_i16x8_s.
    for (name, shape, x0, y0) in [
        ("matmul_q8_0", "1,576,67", 1, 4),
        ("matmul_q4_1", "1,576,67", 1, 8),
        ("matmul_q4_1", "3,160,21", 3, 4),
        ("matmul_q8_0", "2,64,13", 2, 4),
    ] {
        let op = Op::parse(name, shape).unwrap();
        let s = Schedule { x0, x1: x0, y0, y1: 4 * y0, quantize_a: true, ..Schedule::default_for(&op, Target::Wasm) };
        out.push((op, s));
    }
    out
}

#[test]
fn v8_and_wasmtime_agree_with_the_reference() {
    let dir = std::env::temp_dir().join(format!("webtune-v8-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cases = cases();
    let mut refs = Vec::new();
    for (i, (op, s)) in cases.iter().enumerate() {
        let k = compile(op, Target::Wasm, s).unwrap();
        let d = dir.join(format!("case{i:03}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("kernel.wasm"), &k.bytes).unwrap();
        std::fs::write(d.join("kernel.json"), serde_json::to_vec(&k.meta).unwrap()).unwrap();
        let inputs = reference::inputs(op, 1000 + i as u64);
        let mut bytes = Vec::new();
        for a in &inputs.args {
            for w in a {
                bytes.extend_from_slice(&w.to_le_bytes());
            }
            bytes.resize(bytes.len().next_multiple_of(16), 0);
        }
        std::fs::write(d.join("inputs.bin"), bytes).unwrap();
        // wasmtime on the same seed.
        let c = common::run_and_check(op, &k, 1000 + i as u64);
        assert!(c.ok(), "wasmtime case {i} {op}: {}", c.max_rel_err);
        refs.push(reference::reference(op, &inputs));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/v8/run_kernels.mjs");
    let out = Command::new("node")
        .arg("--experimental-wasm-relaxed-simd")
        .arg(&script)
        .arg(&dir)
        .output()
        .expect("`node` must be installed for the V8 tests (scripts/test.sh installs it)");
    assert!(out.status.success(), "node failed: {}", String::from_utf8_lossy(&out.stderr));
    for (i, ((op, s), r)) in cases.iter().zip(&refs).enumerate() {
        let bytes = std::fs::read(dir.join(format!("case{i:03}/output.bin"))).unwrap();
        let words: Vec<u32> = bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let c = reference::check_kernel(op, s, r, &words);
        assert!(c.ok(), "V8 case {i} {op} {}: max_rel_err {} at {}", serde_json::to_string(s).unwrap(), c.max_rel_err, c.worst);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
