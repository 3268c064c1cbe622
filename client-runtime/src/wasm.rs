//! Wasm kernels through wasmtime, following the kernel ABI: one imported
//! memory `env.memory`, arguments laid out 16-byte aligned in ABI order, then
//! the scratch area when `scratch_bytes` is non-zero (its offset is one more
//! `i32` parameter).
//!
//! A threaded kernel (ABI 2, `threads` in its metadata) runs as a browser
//! runs it: one shared memory, one instance (each in a store of its own) per
//! part, on as many OS threads, which stay parked between calls for the
//! whole run. The calling thread runs part 0 and `threads − 1` pool threads
//! the others; a call publishes a new generation, every thread runs
//! `kernel_part(args..., [scratch], its part)`, and the call returns when
//! the last part is done. The time of a call includes that wake-up and
//! wait, as it does in a browser.

use std::cell::UnsafeCell;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use wasmtime::{Config, Engine, ExternType, Instance, Memory, MemoryType, Module, SharedMemory, Store, TypedFunc};

use crate::{KernelDir, Reference, RunError, RunOptions, RunReport, Timing, calls_for, prepare, report, samples_of};
use webtune_compiler::Target;
use webtune_compiler::op::Op;

/// Pages of the shared memory's maximum: a threaded kernel imports its
/// memory with this maximum, and an imported memory's maximum must not
/// exceed the import's.
const SHARED_MAX_PAGES: u32 = 65536;

/// A wasmtime engine with SIMD, relaxed SIMD and threads (shared memories),
/// reusable across kernels.
#[derive(Debug, Clone)]
pub struct WasmEngine {
    engine: Engine,
}

type Params6 = (i32, i32, i32, i32, i32, i32);
type Params7 = (i32, i32, i32, i32, i32, i32, i32);

/// A kernel export, typed by its number of `i32` parameters: up to five
/// arguments (`A`, `B`, `bias`, `R`, `C`), the scratch offset, and for
/// `kernel_part` the part number.
enum Entry {
    P3(TypedFunc<(i32, i32, i32), ()>),
    P4(TypedFunc<(i32, i32, i32, i32), ()>),
    P5(TypedFunc<(i32, i32, i32, i32, i32), ()>),
    P6(TypedFunc<Params6, ()>),
    P7(TypedFunc<Params7, ()>),
}

impl Entry {
    fn get(store: &mut Store<()>, instance: &Instance, name: &str, params: usize) -> Result<Entry, RunError> {
        let bad = |e: wasmtime::Error| RunError::Engine(format!("export `{name}`: {e}"));
        Ok(match params {
            3 => Entry::P3(instance.get_typed_func(&mut *store, name).map_err(bad)?),
            4 => Entry::P4(instance.get_typed_func(&mut *store, name).map_err(bad)?),
            5 => Entry::P5(instance.get_typed_func(&mut *store, name).map_err(bad)?),
            6 => Entry::P6(instance.get_typed_func(&mut *store, name).map_err(bad)?),
            7 => Entry::P7(instance.get_typed_func(&mut *store, name).map_err(bad)?),
            n => return Err(RunError::Input(format!("`{name}` with {n} parameters is not in the kernel ABI"))),
        })
    }

    fn call(&self, store: &mut Store<()>, p: &[i32]) -> wasmtime::Result<()> {
        match self {
            Entry::P3(f) => f.call(store, (p[0], p[1], p[2])),
            Entry::P4(f) => f.call(store, (p[0], p[1], p[2], p[3])),
            Entry::P5(f) => f.call(store, (p[0], p[1], p[2], p[3], p[4])),
            Entry::P6(f) => f.call(store, (p[0], p[1], p[2], p[3], p[4], p[5])),
            Entry::P7(f) => f.call(store, (p[0], p[1], p[2], p[3], p[4], p[5], p[6])),
        }
    }
}

/// Where the arguments and the scratch area lie in the kernel's memory.
struct Layout {
    offsets: Vec<u64>,
    scratch: u64,
    scratch_off: u64,
    pages: u64,
}

impl Layout {
    fn new(k: &KernelDir, args: &[Vec<u32>]) -> Result<Layout, RunError> {
        let mut offsets = Vec::new();
        let mut total = 0u64;
        for a in args {
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
        Ok(Layout { offsets, scratch, scratch_off, pages })
    }

    /// `kernel`'s parameters: the argument offsets, then the scratch offset
    /// when the kernel has scratch.
    fn params(&self) -> Vec<i32> {
        let mut params: Vec<i32> = self.offsets.iter().map(|&o| o as i32).collect();
        if self.scratch > 0 {
            params.push(self.scratch_off as i32);
        }
        params
    }
}

/// A kernel ready to call, checked and timed by [`measure`].
trait Callable {
    /// One call of the whole op.
    fn call(&mut self) -> Result<(), RunError>;
    /// `n` words at byte `off`, read while no call runs.
    fn read(&mut self, off: usize, n: usize) -> Result<Vec<u32>, RunError>;
}

/// A single-threaded kernel: `kernel` on one instance, on the calling thread.
struct Single {
    store: Store<()>,
    memory: Memory,
    entry: Entry,
    params: Vec<i32>,
}

impl Callable for Single {
    fn call(&mut self) -> Result<(), RunError> {
        self.entry.call(&mut self.store, &self.params).map_err(|e| RunError::Engine(format!("the kernel trapped: {e}")))
    }

    fn read(&mut self, off: usize, n: usize) -> Result<Vec<u32>, RunError> {
        let mut bytes = vec![0u8; n * 4];
        self.memory.read(&self.store, off, &mut bytes).map_err(|e| RunError::Engine(e.to_string()))?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}

impl WasmEngine {
    pub fn new() -> Result<WasmEngine, RunError> {
        let mut c = Config::new();
        c.wasm_simd(true).wasm_relaxed_simd(true).wasm_threads(true).shared_memory(true);
        let engine = Engine::new(&c).map_err(|e| RunError::NoEngine(format!("wasmtime: {e}")))?;
        Ok(WasmEngine { engine })
    }

    /// The wasmtime engine, for runners that load many modules on one memory
    /// (the decoder).
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn adapter(&self) -> String {
        format!("wasmtime {} (cranelift, {})", "48", std::env::consts::ARCH)
    }

    /// Checks `k` against the f64 reference on its seeded inputs, output
    /// poisoned first, then times it. A threaded kernel runs on
    /// `k.meta.threads` threads over one shared memory (module docs);
    /// [`RunReport::threads`] says how many ran.
    pub fn run(&self, k: &KernelDir, opts: &RunOptions) -> Result<RunReport, RunError> {
        if k.meta.target != Target::Wasm {
            return Err(RunError::Input(format!("a {} kernel given to the Wasm runner", k.meta.target)));
        }
        crate::check_abi(&k.meta)?;
        let op = k.op()?;
        let prepared = prepare(&op, opts.seed);
        let (inputs, want) = &*prepared;
        let t0 = Instant::now();
        let module = Module::new(&self.engine, &k.bytes).map_err(|e| RunError::Engine(format!("wasmtime rejects the module: {e}")))?;
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        check_memory_import(&module, k.meta.threads)?;
        let layout = Layout::new(k, &inputs.args)?;
        if let Some(threads) = k.meta.threads {
            return self.run_threaded(k, &op, &module, &layout, &inputs.args, want, opts, compile_ms, threads);
        }
        let mut store = Store::new(&self.engine, ());
        let memory = Memory::new(&mut store, MemoryType::new(layout.pages as u32, None)).map_err(|e| RunError::Engine(e.to_string()))?;
        for (a, &off) in inputs.args.iter().zip(&layout.offsets) {
            // Wasm memory is little-endian, as every host this runs on.
            memory.write(&mut store, off as usize, bytemuck::cast_slice(a)).map_err(|e| RunError::Engine(e.to_string()))?;
        }
        let instance = Instance::new(&mut store, &module, &[memory.into()])
            .map_err(|e| RunError::Engine(format!("instantiation (the module must import only env.memory): {e}")))?;
        let params = layout.params();
        let entry = Entry::get(&mut store, &instance, &k.meta.entry, params.len())?;
        let mut single = Single { store, memory, entry, params };
        self.measure(k, &op, &layout, inputs.args.last().expect("ops have an output").len(), want, opts, compile_ms, &mut single)
    }

    /// Checks, then times, a kernel ready to call.
    #[allow(clippy::too_many_arguments)]
    fn measure(
        &self,
        k: &KernelDir,
        op: &Op,
        layout: &Layout,
        out_len: usize,
        want: &Reference,
        opts: &RunOptions,
        compile_ms: f64,
        kernel: &mut dyn Callable,
    ) -> Result<RunReport, RunError> {
        // Correctness first, on the poisoned output.
        kernel.call()?;
        let out_off = *layout.offsets.last().expect("ops have an output") as usize;
        let out = kernel.read(out_off, out_len)?;
        let mut check = want.check(&out);
        // The kernel's own tolerance: wider where its schedule quantises A.
        check.tolerance = check.tolerance.max(webtune_compiler::reference::kernel_tolerance(op, &k.meta.config));
        let samples = samples_of(&out, &opts.sample_positions);
        let adapter = self.adapter();
        if !check.ok() {
            return Ok(report(k, op, adapter, check, Timing { samples_ms: vec![], calls: 0, timer: "wall-clock", compile_ms }, samples));
        }
        for _ in 0..opts.warmup {
            kernel.call()?;
        }
        let t = Instant::now();
        kernel.call()?;
        let calls = calls_for(t.elapsed().as_secs_f64() * 1e3, opts.min_sample_ms);
        let warm = Instant::now();
        while warm.elapsed().as_secs_f64() * 1e3 < opts.warmup_ms {
            kernel.call()?;
        }
        let mut samples_ms = Vec::with_capacity(opts.reps);
        for _ in 0..opts.reps {
            let t = Instant::now();
            for _ in 0..calls {
                kernel.call()?;
            }
            samples_ms.push(t.elapsed().as_secs_f64() * 1e3 / calls as f64);
        }
        Ok(report(k, op, adapter, check, Timing { samples_ms, calls, timer: "wall-clock", compile_ms }, samples))
    }

    /// A threaded kernel: one shared memory, part 0 on this thread and the
    /// other parts on a pool of scoped threads that lives as long as the run.
    #[allow(clippy::too_many_arguments)]
    fn run_threaded(
        &self,
        k: &KernelDir,
        op: &Op,
        module: &Module,
        layout: &Layout,
        args: &[Vec<u32>],
        want: &Reference,
        opts: &RunOptions,
        compile_ms: f64,
        threads: u32,
    ) -> Result<RunReport, RunError> {
        let memory = SharedMemory::new(&self.engine, MemoryType::shared(layout.pages as u32, SHARED_MAX_PAGES))
            .map_err(|e| RunError::Engine(format!("shared memory of {} pages: {e}", layout.pages)))?;
        for (a, &off) in args.iter().zip(&layout.offsets) {
            // No thread runs yet: nothing else touches the memory.
            shared_write(&memory, off as usize, bytemuck::cast_slice(a))?;
        }
        let params = layout.params();
        let part_params = |part: u32| {
            let mut p = params.clone();
            p.push(part as i32);
            p
        };
        // Part 0's instance first, on this thread: a module that does not
        // instantiate on the shared memory fails here, before any thread starts.
        let mut own = Part::new(&self.engine, module, &memory, part_params(0))?;
        let pool = Pool::new(threads as usize - 1);
        std::thread::scope(|scope| {
            // From here on, every way out of this closure (return or unwind)
            // stops the pool first, so that the scope's join never waits on a
            // parked thread.
            let stop = StopOnDrop(&pool);
            for part in 1..threads {
                let (pool, engine, memory, params) = (&pool, &self.engine, &memory, part_params(part));
                let spawned = std::thread::Builder::new()
                    .name(format!("webtune-part-{part}"))
                    .spawn_scoped(scope, move || pool.serve(part, Part::new(engine, module, memory, params)));
                if let Err(e) = spawned {
                    return Err(RunError::Engine(format!("cannot start the thread of part {part}: {e}")));
                }
            }
            pool.wait_ready()?;
            let mut threaded = Threaded { pool: &pool, own: &mut own, memory: &memory };
            let out_len = args.last().expect("ops have an output").len();
            let r = self.measure(k, op, layout, out_len, want, opts, compile_ms, &mut threaded);
            drop(stop);
            r
        })
    }
}

/// Refuses a module whose memory import does not match the metadata: a
/// shared memory for a kernel that claims one thread (it could not be
/// instantiated on the plain memory that a single-threaded host gives), or
/// a plain one for a kernel that claims threads.
fn check_memory_import(module: &Module, threads: Option<u32>) -> Result<(), RunError> {
    let memory = module.imports().find_map(|i| match i.ty() {
        ExternType::Memory(m) if i.module() == "env" && i.name() == "memory" => Some(m),
        _ => None,
    });
    let Some(memory) = memory else {
        return Err(RunError::Input("the module does not import `env.memory`, as the kernel ABI requires".into()));
    };
    match (memory.is_shared(), threads) {
        (true, None) => Err(RunError::Input(
            "the module imports a shared memory (a threaded kernel, ABI 2), but kernel.json has no `threads`: \
             run it with the kernel.json it was compiled with, which names its threads and parts"
                .into(),
        )),
        (false, Some(t)) => Err(RunError::Input(format!(
            "kernel.json says {t} threads, but the module imports a memory that is not shared: \
             a single-threaded kernel has no `threads` (and ABI 1)"
        ))),
        _ => Ok(()),
    }
}

/// Copies `bytes` into `memory` at byte `off`.
fn shared_write(memory: &SharedMemory, off: usize, bytes: &[u8]) -> Result<(), RunError> {
    let Some(dst) = memory.data().get(off..off + bytes.len()) else {
        return Err(RunError::Engine(format!("bytes {off}..{} lie outside the shared memory", off + bytes.len())));
    };
    #[allow(unsafe_code)]
    // SAFETY: `dst` is in bounds (checked above) and lies in the memory's
    // fixed allocation, which lives as long as `memory`. Callers write only
    // while no kernel runs on the memory (before the first call, or between
    // calls, after the pool's handshake under its mutex has ordered every
    // part's stores before this), so no other access to these bytes is
    // concurrent with the copy.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), UnsafeCell::raw_get(dst.as_ptr()), bytes.len());
    }
    Ok(())
}

/// `n` words of `memory` at byte `off`.
fn shared_read(memory: &SharedMemory, off: usize, n: usize) -> Result<Vec<u32>, RunError> {
    let Some(src) = memory.data().get(off..off + n * 4) else {
        return Err(RunError::Engine(format!("bytes {off}..{} lie outside the shared memory", off + n * 4)));
    };
    let mut out = vec![0u32; n];
    #[allow(unsafe_code)]
    // SAFETY: as in `shared_write`: in bounds, and read only while no kernel
    // runs on the memory (after a call's last part has reported done).
    unsafe {
        std::ptr::copy_nonoverlapping(UnsafeCell::raw_get(src.as_ptr()) as *const u8, out.as_mut_ptr() as *mut u8, n * 4);
    }
    Ok(out)
}

/// One part's instance: a store of its own on the shared memory.
struct Part {
    store: Store<()>,
    entry: Entry,
    params: Vec<i32>,
}

impl Part {
    fn new(engine: &Engine, module: &Module, memory: &SharedMemory, params: Vec<i32>) -> Result<Part, RunError> {
        let mut store = Store::new(engine, ());
        let instance = Instance::new(&mut store, module, &[memory.clone().into()])
            .map_err(|e| RunError::Engine(format!("instantiation on a shared memory (the module must import only env.memory): {e}")))?;
        let entry = Entry::get(&mut store, &instance, "kernel_part", params.len())?;
        Ok(Part { store, entry, params })
    }

    fn call(&mut self) -> Result<(), String> {
        let part = self.params.last().copied().unwrap_or_default();
        self.entry.call(&mut self.store, &self.params).map_err(|e| format!("part {part} trapped: {e}"))
    }
}

/// What the pool's threads and the caller share, under one mutex.
#[derive(Debug, Default)]
struct PoolState {
    /// Bumped by each call; a thread runs its part once per generation.
    generation: u64,
    /// Pool threads that have not finished the current call (or, before the
    /// first call, have not reported ready).
    pending: usize,
    stop: bool,
    /// The first failure since the caller last looked.
    failure: Option<String>,
}

/// The threads of parts 1.. of a threaded kernel, parked between calls.
#[derive(Debug)]
struct Pool {
    /// Pool threads (parts − 1).
    threads: usize,
    state: Mutex<PoolState>,
    /// Wakes the pool's threads for a call or to stop.
    go: Condvar,
    /// Wakes the caller when the last pending thread is done.
    done: Condvar,
}

impl Pool {
    fn new(threads: usize) -> Pool {
        Pool {
            threads,
            state: Mutex::new(PoolState { pending: threads, ..PoolState::default() }),
            go: Condvar::new(),
            done: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // No code panics while holding the lock; a poisoned one is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One pool thread: reports ready (or why not), then runs its part once
    /// per generation until stopped.
    fn serve(&self, part: u32, instance: Result<Part, RunError>) {
        let (mut instance, failure) = match instance {
            Ok(i) => (Some(i), None),
            Err(e) => (None, Some(format!("part {part}: {e}"))),
        };
        let mut seen = 0;
        let mut failure = failure;
        loop {
            {
                let mut s = self.lock();
                if let Some(f) = failure.take() {
                    s.failure.get_or_insert(f);
                }
                s.pending -= 1;
                if s.pending == 0 {
                    self.done.notify_one();
                }
                while s.generation == seen && !s.stop {
                    s = self.go.wait(s).unwrap_or_else(|p| p.into_inner());
                }
                if s.stop {
                    return;
                }
                seen = s.generation;
            }
            failure = match instance.as_mut() {
                Some(i) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| i.call()))
                    .unwrap_or_else(|_| Err(format!("part {part} panicked"))),
                None => Err(format!("part {part} has no instance")),
            }
            .err();
        }
    }

    /// Waits until every pool thread has its instance; the first failure
    /// to make one is the error.
    fn wait_ready(&self) -> Result<(), RunError> {
        let mut s = self.lock();
        while s.pending > 0 {
            s = self.done.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        match s.failure.take() {
            Some(f) => Err(RunError::Engine(f)),
            None => Ok(()),
        }
    }

    /// Starts one call on every pool thread.
    fn start(&self) {
        let mut s = self.lock();
        s.generation += 1;
        s.pending = self.threads;
        self.go.notify_all();
    }

    /// Waits until every pool thread has finished the current call.
    fn finish(&self) -> Result<(), String> {
        let mut s = self.lock();
        while s.pending > 0 {
            s = self.done.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.failure.take().map_or(Ok(()), Err)
    }

    fn stop(&self) {
        self.lock().stop = true;
        self.go.notify_all();
    }
}

/// Stops the pool when dropped, however the caller leaves the scope.
struct StopOnDrop<'a>(&'a Pool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// A threaded kernel ready to call: part 0 on the calling thread, the
/// others on the pool.
struct Threaded<'a> {
    pool: &'a Pool,
    own: &'a mut Part,
    memory: &'a SharedMemory,
}

impl Callable for Threaded<'_> {
    fn call(&mut self) -> Result<(), RunError> {
        self.pool.start();
        let own = self.own.call();
        // Always wait for the others, so that no part still runs when this returns.
        let others = self.pool.finish();
        own.and(others).map_err(RunError::Engine)
    }

    fn read(&mut self, off: usize, n: usize) -> Result<Vec<u32>, RunError> {
        shared_read(self.memory, off, n)
    }
}
