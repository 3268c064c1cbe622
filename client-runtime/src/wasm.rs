//! Wasm kernels through wasmtime, following the kernel ABI: one imported
//! memory `env.memory`, arguments laid out 16-byte aligned in ABI order, then
//! the scratch area when `scratch_bytes` is non-zero (its offset is one more
//! `i32` parameter).

use std::time::Instant;

use wasmtime::{Config, Engine, Instance, Memory, MemoryType, Module, Store, TypedFunc};

use crate::{KernelDir, RunError, RunOptions, RunReport, Timing, calls_for, prepare, report, samples_of};
use webtune_compiler::Target;

/// A wasmtime engine with SIMD and relaxed SIMD, reusable across kernels.
#[derive(Debug, Clone)]
pub struct WasmEngine {
    engine: Engine,
}

/// The kernel entry, typed by its number of `i32` parameters.
enum Entry {
    P3(TypedFunc<(i32, i32, i32), ()>),
    P4(TypedFunc<(i32, i32, i32, i32), ()>),
    P5(TypedFunc<(i32, i32, i32, i32, i32), ()>),
}

impl WasmEngine {
    pub fn new() -> Result<WasmEngine, RunError> {
        let mut c = Config::new();
        c.wasm_simd(true).wasm_relaxed_simd(true);
        let engine = Engine::new(&c).map_err(|e| RunError::NoEngine(format!("wasmtime: {e}")))?;
        Ok(WasmEngine { engine })
    }

    pub fn adapter(&self) -> String {
        format!("wasmtime {} (cranelift, {})", "48", std::env::consts::ARCH)
    }

    pub fn run(&self, k: &KernelDir, opts: &RunOptions) -> Result<RunReport, RunError> {
        if k.meta.target != Target::Wasm {
            return Err(RunError::Input(format!("a {} kernel given to the Wasm runner", k.meta.target)));
        }
        let op = k.op()?;
        let prepared = prepare(&op, opts.seed);
        let (inputs, want) = &*prepared;
        let t0 = Instant::now();
        let module = Module::new(&self.engine, &k.bytes).map_err(|e| RunError::Engine(format!("wasmtime rejects the module: {e}")))?;
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut store = Store::new(&self.engine, ());
        let mut offsets = Vec::new();
        let mut total = 0u64;
        for a in &inputs.args {
            offsets.push(total);
            total += (a.len() as u64 * 4).next_multiple_of(16);
        }
        let scratch = k.meta.scratch_bytes.unwrap_or(0) as u64;
        let scratch_off = total;
        total += scratch;
        let pages = total.div_ceil(65536).max(k.meta.memory_pages_min.unwrap_or(0) as u64).max(1);
        if pages > 65536 {
            return Err(RunError::Input(format!("the arguments need {pages} pages, more than a 32-bit memory holds")));
        }
        let memory = Memory::new(&mut store, MemoryType::new(pages as u32, None)).map_err(|e| RunError::Engine(e.to_string()))?;
        for (a, &off) in inputs.args.iter().zip(&offsets) {
            // Wasm memory is little-endian, as every host this runs on.
            memory.write(&mut store, off as usize, bytemuck::cast_slice(a)).map_err(|e| RunError::Engine(e.to_string()))?;
        }
        let instance = Instance::new(&mut store, &module, &[memory.into()])
            .map_err(|e| RunError::Engine(format!("instantiation (the module must import only env.memory): {e}")))?;
        let mut params: Vec<i32> = offsets.iter().map(|&o| o as i32).collect();
        if scratch > 0 {
            params.push(scratch_off as i32);
        }
        let bad = |e: wasmtime::Error| RunError::Engine(format!("export `{}`: {e}", k.meta.entry));
        let entry = match params.len() {
            3 => Entry::P3(instance.get_typed_func(&mut store, &k.meta.entry).map_err(bad)?),
            4 => Entry::P4(instance.get_typed_func(&mut store, &k.meta.entry).map_err(bad)?),
            5 => Entry::P5(instance.get_typed_func(&mut store, &k.meta.entry).map_err(bad)?),
            n => return Err(RunError::Input(format!("a kernel with {n} parameters is not in ABI 1"))),
        };
        let p = &params;
        let call = |store: &mut Store<()>| -> Result<(), RunError> {
            match &entry {
                Entry::P3(f) => f.call(store, (p[0], p[1], p[2])),
                Entry::P4(f) => f.call(store, (p[0], p[1], p[2], p[3])),
                Entry::P5(f) => f.call(store, (p[0], p[1], p[2], p[3], p[4])),
            }
            .map_err(|e| RunError::Engine(format!("the kernel trapped: {e}")))
        };
        // Correctness first, on the poisoned output.
        call(&mut store)?;
        let out_off = *offsets.last().expect("ops have an output") as usize;
        let n = inputs.args.last().expect("ops have an output").len();
        let mut bytes = vec![0u8; n * 4];
        memory.read(&store, out_off, &mut bytes).map_err(|e| RunError::Engine(e.to_string()))?;
        let out: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
        let check = want.check(&out);
        let samples = samples_of(&out, &opts.sample_positions);
        let adapter = self.adapter();
        if !check.ok() {
            return Ok(report(k, &op, adapter, check, Timing { samples_ms: vec![], calls: 0, timer: "wall-clock", compile_ms }, samples));
        }
        for _ in 0..opts.warmup {
            call(&mut store)?;
        }
        let t = Instant::now();
        call(&mut store)?;
        let calls = calls_for(t.elapsed().as_secs_f64() * 1e3, opts.min_sample_ms);
        let warm = Instant::now();
        while warm.elapsed().as_secs_f64() * 1e3 < opts.warmup_ms {
            call(&mut store)?;
        }
        let mut samples_ms = Vec::with_capacity(opts.reps);
        for _ in 0..opts.reps {
            let t = Instant::now();
            for _ in 0..calls {
                call(&mut store)?;
            }
            samples_ms.push(t.elapsed().as_secs_f64() * 1e3 / calls as f64);
        }
        Ok(report(k, &op, adapter, check, Timing { samples_ms, calls, timer: "wall-clock", compile_ms }, samples))
    }
}
