//! Schedules as a client or the CLI sends them (JSON), on a small op picked
//! by the first bytes: decoding and `Schedule::check` must never panic, and a
//! schedule that passes the check must compile (an `Internal` error or a
//! panic there is a compiler bug: the backends validate every module with
//! wasmparser and every WGSL string with naga).
#![no_main]

use libfuzzer_sys::fuzz_target;
use webtune_compiler::{CompileError, Op, Schedule, Target, compile};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (head, json) = data.split_at(4);
    let dim = |b: u8| 1 + (b as u32 % 40);
    let (kind, shape) = match head[0] % 4 {
        0 => ("matmul", format!("{},{},{}", dim(head[1]), dim(head[2]), dim(head[3]))),
        1 => ("batch_matmul", format!("{},{},{},{}", 1 + head[1] % 3, dim(head[2]), dim(head[3]), dim(head[1] ^ head[3]))),
        2 => ("matmul_q4", format!("{},{},{}", dim(head[1]), 32 * (1 + head[2] as u32 % 3), dim(head[3]))),
        _ => ("matmul_i16", format!("{},{},{}", dim(head[1]), 2 * dim(head[2]), 4 * dim(head[3]))),
    };
    let op = Op::parse(kind, &shape).expect("the fuzz target builds valid ops");
    let Ok(schedule) = serde_json::from_slice::<Schedule>(json) else { return };
    for target in [Target::Wasm, Target::Wgsl] {
        if schedule.check(&op, target).is_err() {
            continue;
        }
        match compile(&op, target, &schedule) {
            Ok(k) => assert!(!k.bytes.is_empty()),
            Err(CompileError::Schedule(_)) => {}
            Err(e) => panic!("{op} {target} {schedule:?}: {e}: {:?}", std::error::Error::source(&e)),
        }
    }
});
