//! Runs compiled Wasm kernels in wasmtime for the compiler's tests.
#![allow(dead_code)]

use std::sync::OnceLock;

use wasmtime::{Config, Engine, Instance, Memory, MemoryType, Module, Store, Val};
use webtune_compiler::reference::{self, Check};
use webtune_compiler::{Kernel, Op};

pub fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        let mut c = Config::new();
        c.wasm_simd(true).wasm_relaxed_simd(true).wasm_multi_memory(false);
        Engine::new(&c).expect("wasmtime engine")
    })
}

/// Runs `kernel` on seeded inputs and returns its output words.
pub fn run(op: &Op, kernel: &Kernel, seed: u64) -> (reference::Inputs, Vec<u32>) {
    let inputs = reference::inputs(op, seed);
    let module = Module::new(engine(), &kernel.bytes).expect("wasmtime accepts the module");
    let mut store = Store::new(engine(), ());
    let mut offsets = Vec::new();
    let mut total = 0u64;
    for a in &inputs.args {
        offsets.push(total);
        total += (a.len() as u64 * 4).next_multiple_of(16);
    }
    let scratch = kernel.meta.scratch_bytes.unwrap_or(0);
    let scratch_off = total;
    total += scratch as u64;
    let pages = total.div_ceil(65536).max(kernel.meta.memory_pages_min.unwrap_or(0) as u64).max(1);
    let memory = Memory::new(&mut store, MemoryType::new(pages as u32, None)).expect("memory");
    for (a, &off) in inputs.args.iter().zip(&offsets) {
        let bytes: Vec<u8> = a.iter().flat_map(|w| w.to_le_bytes()).collect();
        memory.write(&mut store, off as usize, &bytes).expect("write");
    }
    let instance = Instance::new(&mut store, &module, &[memory.into()]).expect("instantiate");
    let f = instance.get_func(&mut store, "kernel").expect("kernel export");
    let mut args: Vec<Val> = offsets.iter().map(|&o| Val::I32(o as i32)).collect();
    if scratch > 0 {
        args.push(Val::I32(scratch_off as i32));
    }
    f.call(&mut store, &args, &mut []).expect("kernel runs without trapping");
    let out_off = *offsets.last().unwrap() as usize;
    let n = inputs.args.last().unwrap().len();
    let mut bytes = vec![0u8; n * 4];
    memory.read(&store, out_off, &mut bytes).expect("read");
    let out = bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    (inputs, out)
}

/// Runs and checks against the f64 reference.
pub fn run_and_check(op: &Op, kernel: &Kernel, seed: u64) -> Check {
    let (inputs, out) = run(op, kernel, seed);
    let r = reference::reference(op, &inputs);
    reference::check(&r, &out)
}
