//! Times naga's WGSL front end (`wgsl::parse`) and validator (`wgsl::check_module`)
//! on files, taken in turn (round robin, so that a noisy machine slows every
//! file alike), to see which source shapes cost parse time.
//!
//! `cargo run --release -p webtune-research --bin naga_parse -- FILE...`

use std::time::Instant;

fn main() {
    let files: Vec<(String, String)> = std::env::args().skip(1).map(|p| (std::fs::read_to_string(&p).expect("readable file"), p)).collect();
    let mut parse = vec![Vec::new(); files.len()];
    let mut valid = vec![Vec::new(); files.len()];
    for _ in 0..60 {
        for (i, (src, _)) in files.iter().enumerate() {
            let t = Instant::now();
            let m = webtune_compiler::wgsl::parse(src).expect("parses");
            parse[i].push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            webtune_compiler::wgsl::check_module(&m, src).expect("valid");
            valid[i].push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    for (i, (src, path)) in files.iter().enumerate() {
        parse[i].sort_by(f64::total_cmp);
        valid[i].sort_by(f64::total_cmp);
        println!("{path}: {} bytes, parse median {:.3} ms, validate median {:.3} ms", src.len(), parse[i][30], valid[i][30]);
    }
}
