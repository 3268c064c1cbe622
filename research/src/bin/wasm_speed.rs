//! Times Wasm kernels in wasmtime (single thread) for a few schedules.
//! `cargo run -p webtune-research --bin wasm_speed -- 384,768,768 '<schedule json>'...`

use std::time::Instant;

use wasmtime::{Config, Engine, Instance, Memory, MemoryType, Module, Store, Val};
use webtune_compiler::{Op, Schedule, Target, compile};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let op = Op::parse("matmul", &args[0]).unwrap();
    let mut c = Config::new();
    c.wasm_simd(true).wasm_relaxed_simd(true);
    let engine = Engine::new(&c).unwrap();
    for cfg in &args[1..] {
        let s = Schedule::from_json(cfg).unwrap();
        let k = compile(&op, Target::Wasm, &s).unwrap();
        let module = Module::new(&engine, &k.bytes).unwrap();
        let mut store = Store::new(&engine, ());
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
        let inst = Instance::new(&mut store, &module, &[mem.into()]).unwrap();
        let f = inst.get_func(&mut store, "kernel").unwrap();
        let mut a: Vec<Val> = offs.iter().map(|&o| Val::I32(o as i32)).collect();
        if scratch > 0 {
            a.push(Val::I32(sc as i32));
        }
        for _ in 0..3 {
            f.call(&mut store, &a, &mut []).unwrap();
        }
        let mut ts = vec![];
        for _ in 0..15 {
            let t = Instant::now();
            f.call(&mut store, &a, &mut []).unwrap();
            ts.push(t.elapsed().as_secs_f64());
        }
        ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let med = ts[ts.len() / 2];
        println!("{:8.2} GFLOP/s  {:7.3} ms  {} bytes  {}", op.flops() as f64 / med / 1e9, med * 1e3, k.bytes.len(), cfg);
    }
}
