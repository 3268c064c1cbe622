//! Filetests: each `filetests/*.wt` file names a test kind in its first line,
//! holds a kernel in the IR's text form, and ends with the expected output
//! after a `; ---- expected` line. `BLESS=1 cargo test --test filetests`
//! rewrites the expectations (review the diff before committing).
//!
//! Kinds:
//! - `print`: parse, then print; checks the canonical text form.
//! - `verify`: the verifier's verdict (`ok` or its error).
//! - `wasm`: verify, lower, run the passes named by `; passes:` (default all;
//!   `none` for none), encode, validate; the expectation is the module's WAT.
//! - `run`: compile and run in wasmtime; `; in NAME = v v v` lines give the
//!   inputs, the expectation is each written buffer's values.

mod common;

use std::fmt::Write;
use std::path::Path;

use wasmtime::{Instance, Memory, MemoryType, Module, Store, Val};
use webtune_compiler::ir::verify::{Flavor, verify};
use webtune_compiler::ir::{self, Elem, Space};
use webtune_compiler::schedule::WasmPasses;
use webtune_compiler::wasm::{self, LowerOptions, WasmOptions};

const SEP: &str = "; ---- expected\n";

fn header<'a>(src: &'a str, key: &str) -> Option<&'a str> {
    src.lines().find_map(|l| l.strip_prefix(&format!("; {key}:")).map(str::trim))
}

fn options(src: &str) -> WasmOptions {
    let passes = match header(src, "passes") {
        None => WasmPasses::default(),
        Some(list) => {
            let has = |p: &str| list.split_whitespace().any(|x| x == p);
            WasmPasses { offset: has("offset"), load_splat: has("load_splat"), tee: has("tee") }
        }
    };
    let relaxed_simd = header(src, "relaxed_simd") == Some("true");
    WasmOptions { lower: LowerOptions { relaxed_simd }, passes, memory_pages_min: 1 }
}

fn run_kind(kind: &str, src: &str) -> String {
    let func = match ir::parse::parse(src) {
        Ok(f) => f,
        Err(e) => return format!("parse error: {e}\n"),
    };
    match kind {
        "print" => ir::print::print(&func),
        "verify" => match verify(&func, Flavor::Cpu) {
            Ok(_) => "ok\n".into(),
            Err(e) => format!("{e}\n"),
        },
        "wasm" => match wasm::compile(&func, &options(src)) {
            Ok(m) => wasmprinter::print_bytes(&m.bytes).expect("printable") + "\n",
            Err(e) => format!("{e}\n"),
        },
        "run" => run(&func, src),
        other => panic!("unknown filetest kind `{other}`"),
    }
}

fn run(func: &ir::Func, src: &str) -> String {
    let m = wasm::compile(func, &options(src)).expect("compiles");
    let engine = common::engine();
    let module = Module::new(engine, &m.bytes).unwrap();
    let mut store = Store::new(engine, ());
    let mem = Memory::new(&mut store, MemoryType::new(1, None)).unwrap();
    let mut args = Vec::new();
    let mut off = 0usize;
    let mut placed = Vec::new();
    for h in func.params() {
        let b = &func.buffers[h];
        let name = format!("; in {} =", b.name);
        let values: Vec<u32> = match src.lines().find_map(|l| l.strip_prefix(&name)) {
            Some(vals) => vals
                .split_whitespace()
                .map(|v| match b.elem {
                    Elem::F32 => v.parse::<f32>().expect("f32 input").to_bits(),
                    Elem::U32 => v.parse::<u32>().expect("u32 input"),
                    Elem::F16 => unreachable!("f16 buffers are GPU only: wasm::compile refused this function"),
                })
                .collect(),
            // Unset buffers start poisoned, so reading them shows.
            None => vec![0x7FC0_DEAD; b.len as usize],
        };
        assert_eq!(values.len(), b.len as usize, "input count for {}", b.name);
        let bytes: Vec<u8> = values.iter().flat_map(|w| w.to_le_bytes()).collect();
        mem.write(&mut store, off, &bytes).unwrap();
        args.push(Val::I32(off as i32));
        placed.push((h, off));
        off += (bytes.len()).next_multiple_of(16);
    }
    if m.scratch_bytes > 0 {
        args.push(Val::I32(off as i32));
    }
    let inst = Instance::new(&mut store, &module, &[mem.into()]).unwrap();
    let f = inst.get_func(&mut store, "kernel").unwrap();
    f.call(&mut store, &args, &mut []).unwrap();
    let mut out = String::new();
    for (h, off) in placed {
        let b = &func.buffers[h];
        if !b.writable || b.space == Space::Scratch {
            continue;
        }
        let mut bytes = vec![0u8; b.len as usize * 4];
        mem.read(&store, off, &mut bytes).unwrap();
        let _ = write!(out, "{} =", b.name);
        for c in bytes.chunks(4) {
            let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            match b.elem {
                Elem::F32 => write!(out, " {}", f32::from_bits(w)),
                Elem::U32 => write!(out, " {w}"),
                Elem::F16 => unreachable!("f16 buffers are GPU only"),
            }
            .unwrap();
        }
        out.push('\n');
    }
    out
}

#[test]
fn filetests() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let bless = std::env::var_os("BLESS").is_some();
    let mut failures = Vec::new();
    let mut count = 0;
    let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    for path in paths.into_iter().filter(|p| p.extension().is_some_and(|e| e == "wt")) {
        count += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let (src, expected) = text.split_once(SEP).unwrap_or((&text, ""));
        let kind = header(src, "test").unwrap_or_else(|| panic!("{}: no `; test:` line", path.display()));
        let got = run_kind(kind, src);
        if got != expected {
            if bless {
                std::fs::write(&path, format!("{src}{SEP}{got}")).unwrap();
            } else {
                failures.push(format!("{}:\n--- expected\n{expected}--- got\n{got}", path.display()));
            }
        }
    }
    assert!(count >= 6, "found only {count} filetests in {}", dir.display());
    assert!(failures.is_empty(), "{} filetest(s) failed (BLESS=1 to update):\n{}", failures.len(), failures.join("\n"));
}
