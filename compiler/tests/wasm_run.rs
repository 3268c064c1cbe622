mod common;

use webtune_compiler::{Op, Schedule, Target, compile};

#[test]
fn default_schedules_compute_every_op() {
    for (op, shape) in [
        ("matmul", "37,29,41"),
        ("batch_matmul", "3,17,9,13"),
        ("matmul_q4", "3,96,11"),
        ("matmul", "1,1,1"),
        ("matmul_i16", "37,58,44"),
        ("matmul_i16+bias+gelu+residual", "5,2,4"),
        ("matmul_q4_1", "3,96,11"),
        ("matmul_q8_0", "3,96,11"),
        ("matmul_q4_1", "1,576,67"),
        ("matmul_q8_0", "1,576,67"),
    ] {
        let op = Op::parse(op, shape).unwrap();
        let s = Schedule::default_for(&op, Target::Wasm);
        let k = compile(&op, Target::Wasm, &s).unwrap();
        let c = common::run_and_check(&op, &k, 7);
        assert!(c.ok(), "{op}: max_rel_err {} at {}", c.max_rel_err, c.worst);
    }
}

#[test]
fn every_pass_combination_on_every_op() {
    use webtune_compiler::WasmPasses;
    for (op, shape) in [
        ("matmul", "29,31,37"),
        ("batch_matmul", "2,7,11,13"),
        ("matmul_q4", "2,64,13"),
        ("matmul_i16", "29,62,36"),
        ("matmul_q4_1", "2,64,13"),
        ("matmul_q8_0", "2,64,13"),
    ] {
        let op = Op::parse(op, shape).unwrap();
        for bits in 0..8u8 {
            for relaxed_simd in [false, true] {
                let mut s = Schedule::default_for(&op, Target::Wasm);
                s.passes = WasmPasses { offset: bits & 1 != 0, load_splat: bits & 2 != 0, tee: bits & 4 != 0 };
                s.relaxed_simd = relaxed_simd;
                s.cache_read = !op.kind().block_quantized() && bits % 3 == 0;
                let k = compile(&op, Target::Wasm, &s).unwrap();
                let c = common::run_and_check(&op, &k, u64::from(bits));
                assert!(c.ok(), "{op} passes {:?} relaxed {relaxed_simd}: {}", s.passes, c.max_rel_err);
            }
        }
    }
}

/// The GGUF kernels' checks can fail: a kernel that forgot Q4_1's minimums
/// (`Mn`) or read Q8_0's bytes unsigned would be caught, since the
/// reference of those mistakes is far outside the tolerance of the right one.
#[test]
fn gguf_checks_catch_wrong_kernels() {
    use webtune_compiler::reference;
    for (name, wrong) in [("matmul_q4_1", "no minimums"), ("matmul_q8_0", "unsigned bytes")] {
        for vectorize in [4, 1] {
            let op = Op::parse(name, "2,96,13").unwrap();
            let y0 = if vectorize == 4 { 4 } else { 3 };
            let s = Schedule { vectorize, y0, y1: 4 * y0, ..Schedule::default_for(&op, Target::Wasm) };
            let k = compile(&op, Target::Wasm, &s).unwrap();
            let (inputs, out) = common::run(&op, &k, 5);
            let right = reference::check(&reference::reference(&op, &inputs), &out);
            assert!(right.ok(), "{name} vectorize {vectorize}: {}", right.max_rel_err);
            let mut mutated = inputs.clone();
            if name == "matmul_q4_1" {
                mutated.args[3].iter_mut().for_each(|m| *m = 0f32.to_bits());
            } else {
                mutated.args[1].iter_mut().for_each(|w| *w &= 0x7F7F_7F7F);
            }
            let caught = reference::check(&reference::reference(&op, &mutated), &out);
            assert!(!caught.ok() && caught.max_rel_err > 100.0 * caught.tolerance, "{name} {wrong}: {}", caught.max_rel_err);
        }
    }
}

/// The GGUF kernels with 16-bit activations (`quantize_a`) on the model's
/// decode shapes and small prompts, tiles that do and do not divide, with
/// and without relaxed SIMD: each within its own tolerance of the f64
/// reference.
#[test]
fn quantize_a_kernels_match_the_reference() {
    for (name, shape, x0, y0, r0) in [
        ("matmul_q8_0", "1,576,67", 1, 4, 32),
        ("matmul_q4_1", "1,576,67", 1, 4, 64),
        ("matmul_q4_1", "1,1536,40", 1, 8, 96),
        ("matmul_q8_0", "1,1536,9", 1, 12, 32),
        ("matmul_q4_1", "5,96,13", 2, 4, 32),
        ("matmul_q8_0", "3,64,21", 3, 8, 64),
    ] {
        for relaxed_simd in [false, true] {
            let op = Op::parse(name, shape).unwrap();
            let s = Schedule {
                x0,
                x1: x0,
                y0,
                y1: 4 * y0,
                r0,
                r1: r0,
                relaxed_simd,
                quantize_a: true,
                ..Schedule::default_for(&op, Target::Wasm)
            };
            let k = compile(&op, Target::Wasm, &s).unwrap();
            let c = common::run_and_check(&op, &k, 3);
            assert!(c.ok(), "{op} {}: max_rel_err {} at {}", serde_json::to_string(&s).unwrap(), c.max_rel_err, c.worst);
        }
    }
}

/// The tolerance of a kernel that quantises A is needed, and enough: on
/// blocks built to round badly (one value of 1, the 31 others just under
/// half a 16-bit step, which rounds to 0, each against a weight of one
/// sign), the quantising kernel errs by more than the f32 tolerance and
/// within `reference::A16_ROUNDING`, which its bound says (8.5e-5 here
/// against 8.8e-5), while the f32 kernel stays within the f32 tolerance.
#[test]
fn quantised_activations_need_and_meet_their_tolerance() {
    use webtune_compiler::reference;
    for name in ["matmul_q8_0", "matmul_q4_1"] {
        let op = Op::parse(name, "1,64,8").unwrap();
        let mut inputs = reference::inputs(&op, 1);
        let h = 0.499f32 / 32767.0;
        inputs.args[0] = (0..64).map(|k| if k % 32 == 0 { 1f32 } else { h }.to_bits()).collect();
        if name == "matmul_q8_0" {
            // Every byte 127 but the one against the 1.
            inputs.args[1] = (0..8 * 16).map(|i| if i % 8 == 0 { 0x7F7F_7F00u32 } else { 0x7F7F_7F7F }).collect();
        } else {
            inputs.args[1].iter_mut().for_each(|w| *w = u32::MAX);
            inputs.args[3].iter_mut().for_each(|m| *m = 0f32.to_bits());
        }
        let r = reference::reference(&op, &inputs);
        let base = Schedule { y0: 4, y1: 8, ..Schedule::default_for(&op, Target::Wasm) };
        for quantize_a in [false, true] {
            let s = Schedule { quantize_a, ..base.clone() };
            let out = common::run_on(&compile(&op, Target::Wasm, &s).unwrap(), &inputs);
            let (strict, own) = (reference::check(&r, &out), reference::check_kernel(&op, &s, &r, &out));
            assert!(own.ok(), "{name} quantize_a {quantize_a}: {}", own.max_rel_err);
            assert_eq!(strict.ok(), !quantize_a, "{name} quantize_a {quantize_a}: {}", strict.max_rel_err);
            if quantize_a {
                assert!(own.max_rel_err > 0.9 * reference::A16_ROUNDING, "{name}: the bound is nearly reached ({})", own.max_rel_err);
            }
        }
    }
}
