//! The GGUF reader (`webtune_models::gguf`) and the llama import's checks
//! on arbitrary bytes: every input is refused with an error or read, never
//! a panic, and a parsed file's tensor ranges are inside it.
//!
//!   RUSTC_BOOTSTRAP=1 cargo fuzz run gguf_reader -- -max_total_time=120
//!
//! A seed worth giving it: the tiny llama of the import tests,
//! `webtune_models::gguf_fixture::tiny_llama(false).bytes()`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webtune_models::gguf;

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = gguf::parse(data) {
        assert!(g.data_offset <= data.len() as u64 || g.tensors.is_empty());
        for t in &g.tensors {
            let bytes = g.data(data, t).expect("parse checked that every tensor lies inside the file");
            if let Some(v) = gguf::dequantize(t.ty, bytes) {
                assert_eq!(v.len() as u64, t.elements(), "{}", t.name);
            }
        }
    }
    // Everything an import checks before it writes, and the layout it would write.
    let _ = webtune_models::llama::check_gguf("fuzz.gguf", data);
});
