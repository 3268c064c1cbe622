//! Fused epilogues: the erf both backends compute, measured against f64;
//! and every epilogue on matmul and batch_matmul run in wasmtime against the
//! f64 reference (outputs poisoned first, inputs seeded and non-zero).

mod common;

use webtune_compiler::ir::{self, erf_f32};
use webtune_compiler::op::Epilogue;
use webtune_compiler::wasm::{self, WasmOptions};
use webtune_compiler::{Op, OpKind, Schedule, Target, compile};

/// The dense grid: every 2^-12 from −6 to 6 (49 153 points).
fn grid() -> Vec<f32> {
    (-6 * 4096..=6 * 4096).map(|i| i as f32 / 4096.0).collect()
}

#[test]
fn erf_is_within_f32_rounding_of_the_f64_erf() {
    let (mut worst, mut at) = (0.0f64, 0.0f32);
    for x in grid() {
        let e = (erf_f32(x) as f64 - libm::erf(x as f64)).abs();
        if e > worst {
            (worst, at) = (e, x);
        }
    }
    println!("erf_f32: max |error| {worst:.3e} at x = {at} over {} points in [-6, 6]", grid().len());
    // f32's spacing just below 1 is 6e-8: the approximation (Eigen's and
    // XLA's) stays within 6 of those; measured 3.52e-7 at x = −3.397.
    assert!(worst < 4e-7, "erf error {worst:e} at {at}");
    // GELU through it: absolute error 0.5·|x|·δ plus rounding.
    let gelu = |x: f32| {
        let h = 0.5 * x;
        h.mul_add(erf_f32(x * std::f32::consts::FRAC_1_SQRT_2), h)
    };
    let mut worst = 0.0f64;
    for x in grid() {
        let x64 = x as f64;
        let want = 0.5 * x64 * (1.0 + libm::erf(x64 / 2f64.sqrt()));
        worst = worst.max((gelu(x) as f64 - want).abs() / x64.abs().max(1.0));
    }
    println!("gelu: max |error| / max(|x|, 1) {worst:.3e}");
    assert!(worst < 4e-7, "gelu error {worst:e}");
}

/// The Wasm lowering of `erf` gives exactly [`erf_f32`], lane-wise and scalar.
#[test]
fn wasm_erf_is_erf_f32_bit_for_bit() {
    let xs = grid();
    let n = xs.len() / 4 * 4;
    let src = format!(
        "kernel erf {{
  buf X: f32[{n}] param 0
  buf Y: f32[{n}] param 1 rw
  buf Z: f32[{n}] param 2 rw
  var i: i32
  for i in 0..{n} step 4 {{
    store Y[i] = erf(load.f32x4 X[i])
    store Z[i] = erf(load.f32 X[i])
    store Z[i + 1] = erf(load.f32 X[i + 1])
    store Z[i + 2] = erf(load.f32 X[i + 2])
    store Z[i + 3] = erf(load.f32 X[i + 3])
  }}
}}"
    );
    let f = ir::parse::parse(&src).unwrap();
    let pages = (3 * n * 4).div_ceil(65536) as u32;
    let m = wasm::compile(&f, &WasmOptions { memory_pages_min: pages, ..WasmOptions::default() }).unwrap();
    use wasmtime::{Instance, Memory, MemoryType, Module, Store, Val};
    let engine = common::engine();
    let module = Module::new(engine, &m.bytes).unwrap();
    let mut store = Store::new(engine, ());
    let mem = Memory::new(&mut store, MemoryType::new(pages, None)).unwrap();
    let bytes: Vec<u8> = xs[..n].iter().flat_map(|x| x.to_le_bytes()).collect();
    mem.write(&mut store, 0, &bytes).unwrap();
    let inst = Instance::new(&mut store, &module, &[mem.into()]).unwrap();
    let k = inst.get_func(&mut store, "kernel").unwrap();
    k.call(&mut store, &[Val::I32(0), Val::I32(4 * n as i32), Val::I32(8 * n as i32)], &mut []).unwrap();
    for (buf, what) in [(1, "f32x4"), (2, "f32")] {
        let mut out = vec![0u8; 4 * n];
        mem.read(&store, buf * 4 * n, &mut out).unwrap();
        for (i, c) in out.chunks(4).enumerate() {
            let got = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            assert_eq!(got.to_bits(), erf_f32(xs[i]).to_bits(), "{what} erf({}) = {got}, erf_f32 says {}", xs[i], erf_f32(xs[i]));
        }
    }
}

fn epilogues() -> Vec<Epilogue> {
    Epilogue::all().into_iter().filter(|e| !e.is_none()).collect()
}

#[test]
fn every_epilogue_on_default_and_split_k_schedules() {
    for e in epilogues() {
        for (kind, shape) in
            [(OpKind::Matmul, vec![37, 29, 41]), (OpKind::Matmul, vec![1, 7, 3]), (OpKind::BatchMatmul, vec![3, 13, 17, 11])]
        {
            let op = Op::with_epilogue(kind, e, &shape).unwrap();
            let base = Schedule::default_for(&op, Target::Wasm);
            // r1 below K: the epilogue must wait for the last K tile (a
            // static choice for the remainder tile, a run-time one for the
            // loop of full tiles); with and without the tile in registers.
            let split = Schedule { r0: 2, r1: 4, x1: base.x0 * 2, y1: base.y0 * 2, ..base.clone() };
            let memory = Schedule { unroll: vec![UnrollR0], ..split.clone() };
            for s in [base, split, memory] {
                s.check(&op, Target::Wasm).unwrap();
                let k = compile(&op, Target::Wasm, &s).unwrap();
                let c = common::run_and_check(&op, &k, 5);
                assert!(c.ok(), "{op} {}: max_rel_err {} at {}", serde_json::to_string(&s).unwrap(), c.max_rel_err, c.worst);
                // The kernel's arguments follow the ABI: A, B, bias, R, C.
                let names: Vec<_> = k.meta.args.iter().map(|a| a.name.as_str()).collect();
                let mut want = vec!["A", "B"];
                want.extend(e.bias.then_some("bias"));
                want.extend(e.residual.then_some("R"));
                want.push("C");
                assert_eq!(names, want);
                assert_eq!(k.meta.op, op.name());
                assert_eq!(k.meta.parsed_op().unwrap(), op);
            }
        }
    }
}

use webtune_compiler::schedule::UnrollLoop::R0 as UnrollR0;

#[test]
fn a_wrong_epilogue_is_caught() {
    // The check is not blind to the epilogue: a plain kernel's output
    // (same A and B) fails against the fused reference.
    let op = Op::parse("matmul+bias+gelu", "9,17,13").unwrap();
    let k = compile(&op.base(), Target::Wasm, &Schedule::default_for(&op, Target::Wasm)).unwrap();
    let fused_inputs = webtune_compiler::reference::inputs(&op, 3);
    let (plain_inputs, plain_out) = common::run(&op.base(), &k, 3);
    assert_eq!(plain_inputs.args[0], fused_inputs.args[0]);
    let r = webtune_compiler::reference::reference(&op, &fused_inputs);
    assert!(!webtune_compiler::reference::check(&r, &plain_out).ok());
}
