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
    for (op, shape) in [("matmul", "29,31,37"), ("batch_matmul", "2,7,11,13"), ("matmul_q4", "2,64,13"), ("matmul_i16", "29,62,36")] {
        let op = Op::parse(op, shape).unwrap();
        for bits in 0..8u8 {
            for relaxed_simd in [false, true] {
                let mut s = Schedule::default_for(&op, Target::Wasm);
                s.passes = WasmPasses { offset: bits & 1 != 0, load_splat: bits & 2 != 0, tee: bits & 4 != 0 };
                s.relaxed_simd = relaxed_simd;
                s.cache_read = op.kind() != webtune_compiler::OpKind::MatmulQ4 && bits % 3 == 0;
                let k = compile(&op, Target::Wasm, &s).unwrap();
                let c = common::run_and_check(&op, &k, u64::from(bits));
                assert!(c.ok(), "{op} passes {:?} relaxed {relaxed_simd}: {}", s.passes, c.max_rel_err);
            }
        }
    }
}
