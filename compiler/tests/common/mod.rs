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
    let out = run_on(kernel, &inputs);
    (inputs, out)
}

/// Runs `kernel` on `inputs` (the output argument as given: poisoned) and
/// returns its output words.
pub fn run_on(kernel: &Kernel, inputs: &reference::Inputs) -> Vec<u32> {
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
    bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Runs and checks against the f64 reference, to the kernel's own
/// tolerance (f32 rounding, plus the rounding of A for a schedule that
/// quantises it: `reference::kernel_tolerance`).
pub fn run_and_check(op: &Op, kernel: &Kernel, seed: u64) -> Check {
    let (inputs, out) = run(op, kernel, seed);
    let r = reference::reference(op, &inputs);
    reference::check_kernel(op, &kernel.meta.config, &r, &out)
}

/// A wasmtime engine with the threads proposal (shared memories), for threaded kernels.
pub fn threads_engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        let mut c = Config::new();
        c.wasm_simd(true).wasm_relaxed_simd(true).wasm_threads(true).shared_memory(true);
        Engine::new(&c).expect("wasmtime engine with threads")
    })
}

/// Bytes of guard before and after every argument and the scratch area.
pub const GUARD: usize = 64;
const GUARD_WORD: u32 = 0x7FC0_6A4D;

/// A shared memory laid out for one threaded kernel: guard, argument,
/// guard, ... scratch, guard.
pub struct SharedLayout {
    pub memory: wasmtime::SharedMemory,
    pub offsets: Vec<usize>,
    pub scratch: usize,
    lens: Vec<usize>,
    scratch_len: usize,
}

impl SharedLayout {
    pub fn new(kernel: &Kernel, inputs: &reference::Inputs) -> SharedLayout {
        let mut at = GUARD;
        let mut offsets = Vec::new();
        let lens: Vec<usize> = inputs.args.iter().map(|a| a.len() * 4).collect();
        for len in &lens {
            offsets.push(at);
            at = (at + len).next_multiple_of(16) + GUARD;
        }
        let scratch = at;
        let scratch_len = kernel.meta.scratch_bytes.unwrap_or(0) as usize;
        let end = scratch + scratch_len + GUARD;
        let pages = (end.div_ceil(65536) as u32).max(kernel.meta.memory_pages_min.unwrap_or(0)).max(1);
        let memory = wasmtime::SharedMemory::new(threads_engine(), MemoryType::shared(pages, 65536)).expect("shared memory");
        let l = SharedLayout { memory, offsets, scratch, lens, scratch_len };
        l.fill(0, pages as usize * 65536, GUARD_WORD);
        for (a, &off) in inputs.args.iter().zip(&l.offsets) {
            l.write(off, a);
        }
        l
    }

    fn ptr(&self) -> *mut u8 {
        self.memory.data().as_ptr() as *mut u8
    }

    /// Writes `words` at byte `off`. No kernel may be running.
    pub fn write(&self, off: usize, words: &[u32]) {
        assert!(off + words.len() * 4 <= self.memory.data_size());
        #[allow(unsafe_code)]
        // SAFETY: in bounds (checked above); callers write only while no
        // thread runs a kernel on this memory, so nothing aliases the bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(words.as_ptr() as *const u8, self.ptr().add(off), words.len() * 4)
        }
    }

    /// Reads `n` words at byte `off`. No kernel may be running.
    pub fn read(&self, off: usize, n: usize) -> Vec<u32> {
        assert!(off + n * 4 <= self.memory.data_size());
        let mut out = vec![0u32; n];
        #[allow(unsafe_code)]
        // SAFETY: as in `write`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr().add(off), out.as_mut_ptr() as *mut u8, n * 4)
        }
        out
    }

    fn fill(&self, off: usize, bytes: usize, word: u32) {
        self.write(off, &vec![word; bytes / 4]);
    }

    /// The output's words.
    pub fn output(&self) -> Vec<u32> {
        let last = self.offsets.len() - 1;
        self.read(self.offsets[last], self.lens[last] / 4)
    }

    pub fn poison_output(&self) {
        let last = self.offsets.len() - 1;
        self.fill(self.offsets[last], self.lens[last], reference::POISON);
    }

    /// Names every guard region that no longer holds its pattern, and every
    /// input that changed.
    pub fn damage(&self, inputs: &reference::Inputs) -> Vec<String> {
        let mut bad = Vec::new();
        let guard_ok = |off: usize| self.read(off, GUARD / 4).iter().all(|&w| w == GUARD_WORD);
        for (i, (&off, &len)) in self.offsets.iter().zip(&self.lens).enumerate() {
            if !guard_ok(off - GUARD) {
                bad.push(format!("guard before argument {i}"));
            }
            if !guard_ok((off + len).next_multiple_of(16)) {
                bad.push(format!("guard after argument {i}"));
            }
            if i + 1 < self.offsets.len() && self.read(off, len / 4) != inputs.args[i] {
                bad.push(format!("input {i} was written"));
            }
        }
        if !guard_ok(self.scratch + self.scratch_len) {
            bad.push("guard after the scratch area".into());
        }
        bad
    }

    /// The kernel's parameters: argument offsets, then the scratch offset when it has scratch.
    pub fn params(&self, kernel: &Kernel) -> Vec<Val> {
        let mut p: Vec<Val> = self.offsets.iter().map(|&o| Val::I32(o as i32)).collect();
        if kernel.meta.scratch_bytes.unwrap_or(0) > 0 {
            p.push(Val::I32(self.scratch as i32));
        }
        p
    }

    /// Calls `entry` with `params` on a fresh instance in a store of its own.
    pub fn call(&self, module: &Module, entry: &str, params: &[Val]) {
        let mut store = Store::new(threads_engine(), ());
        let instance = Instance::new(&mut store, module, &[self.memory.clone().into()]).expect("instantiate on shared memory");
        let f = instance.get_func(&mut store, entry).unwrap_or_else(|| panic!("no `{entry}` export"));
        f.call(&mut store, params, &mut []).unwrap_or_else(|e| panic!("`{entry}` traps: {e}"));
    }
}
