//! The cost of a fused epilogue in wasmtime (single thread): plain matmul
//! against `+bias+gelu` and `+bias+residual` on the same shape and schedule,
//! timed interleaved (one call of each in turn, repeated), so that drift of
//! the machine hits every variant alike. Also the compile time per candidate.
//! `cargo run -p webtune-research --bin epilogue_cost [-- ROUNDS]`

use std::time::Instant;

use wasmtime::{Config, Engine, Instance, Memory, MemoryType, Module, Store, Val};
use webtune_compiler::reference;
use webtune_compiler::schedule::UnrollLoop;
use webtune_compiler::{Op, Schedule, Target, compile};

struct Loaded {
    store: Store<()>,
    f: wasmtime::Func,
    args: Vec<Val>,
}

fn load(engine: &Engine, op: &Op, s: &Schedule) -> Loaded {
    let k = compile(op, Target::Wasm, s).unwrap();
    let module = Module::new(engine, &k.bytes).unwrap();
    let mut store = Store::new(engine, ());
    let inputs = reference::inputs(op, 1);
    let mut offs = vec![];
    let mut total = 0u64;
    for a in op.args() {
        offs.push(total);
        total += a.bytes().next_multiple_of(16);
    }
    let scratch = k.meta.scratch_bytes.unwrap_or(0);
    let sc = total;
    total += scratch as u64;
    let mem = Memory::new(&mut store, MemoryType::new(total.div_ceil(65536) as u32, None)).unwrap();
    for (a, &o) in inputs.args.iter().zip(&offs) {
        let bytes: Vec<u8> = a.iter().flat_map(|w| w.to_le_bytes()).collect();
        mem.write(&mut store, o as usize, &bytes).unwrap();
    }
    let inst = Instance::new(&mut store, &module, &[mem.into()]).unwrap();
    let f = inst.get_func(&mut store, "kernel").unwrap();
    let mut args: Vec<Val> = offs.iter().map(|&o| Val::I32(o as i32)).collect();
    if scratch > 0 {
        args.push(Val::I32(sc as i32));
    }
    Loaded { store, f, args }
}

impl Loaded {
    fn call(&mut self) -> f64 {
        let t = Instant::now();
        self.f.call(&mut self.store, &self.args, &mut []).unwrap();
        t.elapsed().as_secs_f64()
    }
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    xs[xs.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(41);
    let mut c = Config::new();
    c.wasm_simd(true).wasm_relaxed_simd(true);
    let engine = Engine::new(&c).unwrap();
    let variants = ["", "+bias+gelu", "+bias+residual"];
    for shape in ["128,384,1536", "128,1536,384"] {
        let plain = Op::parse("matmul", shape).unwrap();
        let k = plain.bmkn().2;
        // The tile that did best in this machine's earlier searches (4×8,
        // r0 4, whole K per cache tile, relaxed SIMD), beside the default.
        let tuned = Schedule {
            x0: 4,
            y0: 8,
            r0: 4,
            x1: 64,
            y1: 256,
            r1: k,
            inner_n_first: true,
            relaxed_simd: true,
            unroll: vec![UnrollLoop::X0, UnrollLoop::Y0, UnrollLoop::R0],
            ..Schedule::default_for(&plain, Target::Wasm)
        };
        for (label, s) in [("default", Schedule::default_for(&plain, Target::Wasm)), ("tuned", tuned)] {
            let ops: Vec<Op> = variants.iter().map(|v| Op::parse(&format!("matmul{v}"), shape).unwrap()).collect();
            // Compile time per candidate (median of 21 compiles each).
            for op in &ops {
                let mut ts: Vec<f64> = (0..21)
                    .map(|_| {
                        let t = Instant::now();
                        std::hint::black_box(compile(op, Target::Wasm, &s).unwrap());
                        t.elapsed().as_secs_f64() * 1e3
                    })
                    .collect();
                println!("compile {op} {label}: median {:.3} ms", median(&mut ts));
            }
            let mut loaded: Vec<Loaded> = ops.iter().map(|op| load(&engine, op, &s)).collect();
            for l in &mut loaded {
                for _ in 0..3 {
                    l.call();
                }
            }
            let mut times = vec![Vec::new(); loaded.len()];
            for _ in 0..rounds {
                for (i, l) in loaded.iter_mut().enumerate() {
                    times[i].push(l.call());
                }
            }
            let meds: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
            println!("matmul {shape}, {label} schedule {}:", serde_json::to_string(&s).unwrap());
            for (op, m) in ops.iter().zip(&meds) {
                println!(
                    "  {:32} median {:7.3} ms  {:6.2} GFLOP/s  {:+6.1}% vs plain",
                    op.name(),
                    m * 1e3,
                    plain.flops() as f64 / m / 1e9,
                    (m / meds[0] - 1.0) * 100.0
                );
            }
        }
    }
}
