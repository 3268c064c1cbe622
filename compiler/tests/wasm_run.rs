mod common;

use webtune_compiler::{Op, Schedule, Target, compile};

#[test]
fn default_schedules_compute_every_op() {
    for (op, shape) in [("matmul", "37,29,41"), ("batch_matmul", "3,17,9,13"), ("matmul_q4", "3,96,11"), ("matmul", "1,1,1")] {
        let op = Op::parse(op, shape).unwrap();
        let s = Schedule::default_for(&op, Target::Wasm);
        let k = compile(&op, Target::Wasm, &s).unwrap();
        let c = common::run_and_check(&op, &k, 7);
        assert!(c.ok(), "{op}: max_rel_err {} at {}", c.max_rel_err, c.worst);
    }
}
