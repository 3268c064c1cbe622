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
