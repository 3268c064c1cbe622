//! Prints the WAT of one kernel: `cargo run --example wat -- OP SHAPE '<schedule json>'`.
use webtune_compiler::{Op, Schedule, Target, compile};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let op = Op::parse(&a[0], &a[1]).unwrap();
    let k = compile(&op, Target::Wasm, &Schedule::from_json(&a[2]).unwrap()).unwrap();
    println!("{}", wasmprinter::print_bytes(&k.bytes).unwrap());
}
