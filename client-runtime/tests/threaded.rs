//! Threaded Wasm kernels (ABI 2) through the native runner: parts on a pool
//! of threads over one shared memory, checked against the f64 reference
//! (output poisoned first) and timed; metadata that does not match the
//! module is an error that says what is wrong, never a panic.

use webtune_client_runtime::wasm::WasmEngine;
use webtune_client_runtime::{KernelDir, RunError, RunOptions};
use webtune_compiler::schedule::Split;
use webtune_compiler::{Kernel, Op, Schedule, Target, compile};

/// Correctness and a few timed samples, kept short.
fn quick() -> RunOptions {
    RunOptions { reps: 3, warmup: 1, warmup_ms: 0.0, min_sample_ms: 0.2, seed: 7, ..RunOptions::default() }
}

fn threaded(op: &str, shape: &str, f: impl FnOnce(Schedule) -> Schedule) -> (Op, Kernel) {
    let op = Op::parse(op, shape).unwrap();
    let s = f(Schedule::default_for(&op, Target::Wasm));
    s.check(&op, Target::Wasm).unwrap_or_else(|e| panic!("{op}: {e}"));
    let k = compile(&op, Target::Wasm, &s).unwrap();
    assert_eq!(k.meta.abi, 2, "{op}: a threaded schedule compiles to ABI 2");
    (op, k)
}

#[test]
fn threaded_kernels_run_on_their_threads_and_pass_the_check() {
    let engine = WasmEngine::new().unwrap();
    let cases = [
        threaded("matmul", "64,48,40", |s| Schedule { threads: 2, split: Some(Split::M), x1: 32, ..s }),
        threaded("matmul", "1,64,96", |s| Schedule { threads: 2, split: Some(Split::N), y1: 32, ..s }),
        threaded("batch_matmul", "3,17,24,20", |s| Schedule { threads: 3, split: Some(Split::Batch), ..s }),
        // Five arguments, scratch (cache_read) and the part: seven parameters.
        threaded("matmul+bias+gelu+residual", "37,40,24", |s| Schedule {
            threads: 2,
            split: Some(Split::M),
            x1: 16,
            cache_read: true,
            ..s
        }),
        // GGUF decode split over N: Q4_1 with per-part scratch, Q8_0 without.
        threaded("matmul_q4_1", "1,576,96", |s| Schedule { threads: 3, split: Some(Split::N), y1: 16, ..s }),
        threaded("matmul_q8_0", "1,576,96", |s| Schedule { threads: 2, split: Some(Split::N), y1: 16, ..s }),
    ];
    let mut with_scratch = false;
    for (op, k) in cases {
        let threads = k.meta.threads.unwrap();
        with_scratch |= k.meta.scratch_bytes.unwrap_or(0) > 0;
        let r = engine.run(&KernelDir::from_kernel(k), &quick()).unwrap_or_else(|e| panic!("{op}: {e}"));
        assert!(r.correct, "{op}: max_rel_err {}", r.max_rel_err);
        assert_eq!(r.threads, threads, "{op}");
        assert_eq!(r.samples, 3, "{op}");
        assert!(r.min_ms > 0.0 && r.min_ms <= r.median_ms && r.median_ms <= r.max_ms && r.gflops > 0.0, "{op}: {r:?}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["threads"], threads, "{op}: the report's JSON says how many threads ran");
    }
    assert!(with_scratch, "one case must have per-part scratch");
}

#[test]
fn single_threaded_kernels_report_one_thread() {
    let engine = WasmEngine::new().unwrap();
    let op = Op::parse("matmul", "64,48,40").unwrap();
    let k = compile(&op, Target::Wasm, &Schedule::default_for(&op, Target::Wasm)).unwrap();
    assert_eq!((k.meta.abi, k.meta.threads), (1, None));
    let r = engine.run(&KernelDir::from_kernel(k), &quick()).unwrap();
    assert!(r.correct && r.samples == 3, "{r:?}");
    assert_eq!(r.threads, 1);
}

/// `webtune run` loads kernel directories: an ABI 2 one loads and runs.
#[test]
fn a_threaded_kernel_directory_loads_and_runs() {
    let (_, k) = threaded("matmul", "64,48,40", |s| Schedule { threads: 2, split: Some(Split::M), x1: 32, ..s });
    let dir = std::env::temp_dir().join(format!("webtune-threaded-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("kernel.wasm"), &k.bytes).unwrap();
    std::fs::write(dir.join("kernel.json"), serde_json::to_vec(&k.meta).unwrap()).unwrap();
    let loaded = KernelDir::load(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let r = WasmEngine::new().unwrap().run(&loaded.unwrap(), &quick()).unwrap();
    assert!(r.correct && r.threads == 2, "{r:?}");
}

fn input_error(k: Kernel) -> String {
    match WasmEngine::new().unwrap().run(&KernelDir::from_kernel(k), &quick()) {
        Err(RunError::Input(m)) => m,
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn metadata_that_does_not_match_the_module_is_a_clear_error() {
    let (_, k) = threaded("matmul", "64,48,40", |s| Schedule { threads: 2, split: Some(Split::M), x1: 32, ..s });

    // ABI 2 without its threads.
    let mut no_threads = k.clone();
    no_threads.meta.threads = None;
    let e = input_error(no_threads);
    assert!(e.contains("ABI 2") && e.contains("`threads`"), "{e}");

    // The threading fields removed and the ABI set back to 1: the runner would
    // give the module a plain memory; it says why it cannot.
    let mut as_single = k.clone();
    as_single.meta.abi = 1;
    as_single.meta.threads = None;
    as_single.meta.parts = None;
    as_single.meta.part_scratch_bytes = None;
    let e = input_error(as_single);
    assert!(e.contains("shared memory") && e.contains("no `threads`"), "{e}");

    // One part per thread.
    let mut short = k.clone();
    short.meta.parts.as_mut().unwrap().pop();
    let e = input_error(short);
    assert!(e.contains("2 threads but 1 parts"), "{e}");

    // A single-threaded kernel said to have threads.
    let op = Op::parse("matmul", "64,48,40").unwrap();
    let mut single = compile(&op, Target::Wasm, &Schedule::default_for(&op, Target::Wasm)).unwrap();
    single.meta.abi = 2;
    single.meta.threads = Some(2);
    single.meta.parts = Some(vec![[0, 32], [32, 64]]);
    let e = input_error(single);
    assert!(e.contains("not shared"), "{e}");
}

/// A threaded kernel run on fewer threads than it has parts leaves part of
/// the output poisoned: reported wrong, and not timed.
#[test]
fn a_part_left_out_is_reported_wrong_and_not_timed() {
    let (_, mut k) = threaded("matmul", "64,48,40", |s| Schedule { threads: 2, split: Some(Split::M), x1: 32, ..s });
    k.meta.threads = Some(1);
    k.meta.parts.as_mut().unwrap().truncate(1);
    let r = WasmEngine::new().unwrap().run(&KernelDir::from_kernel(k), &quick()).unwrap();
    assert!(!r.correct, "{r:?}");
    assert!(r.median_ms.is_nan() && r.samples == 0, "{r:?}");
    assert_eq!(r.threads, 1);
}
