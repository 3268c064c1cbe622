//! The IR parser on arbitrary text: it must answer Ok or a ParseError, never
//! panic; whatever it accepts must print and parse back to the same text,
//! and the verifier must answer (Ok or an error) without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webtune_compiler::ir::verify::{Flavor, verify};
use webtune_compiler::ir::{parse::parse, print::print};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(func) = parse(text) else { return };
    let printed = print(&func);
    let again = parse(&printed).unwrap_or_else(|e| panic!("printed IR does not parse back: {e}\n{printed}"));
    assert_eq!(print(&again), printed, "print ∘ parse is not a fixed point");
    let _ = verify(&func, Flavor::Cpu);
    let _ = verify(&func, Flavor::Gpu);
});
