//! Plausibility of a reported time: a median that implies more arithmetic
//! or memory traffic than the device class can do is a lie or a broken
//! timer, and is refused before it can vote.
//!
//! The ceilings are generous on purpose (several times the fastest device of
//! each class), so an honest report is never refused:
//! - Wasm runs on one CPU thread: 128-bit SIMD at up to ~5 GHz with two FMA
//!   ports is ~80 GFLOP/s; the ceiling is 1 TFLOP/s and 1 TB/s.
//! - WebGPU on a hardware GPU: the fastest fp32 parts today are under
//!   100 TFLOP/s and 8 TB/s (NVIDIA B200: ~80 TFLOP/s fp32, 8 TB/s HBM3e);
//!   the ceiling is 250 TFLOP/s and 25 TB/s.
//! - WebGPU on a software adapter (SwiftShader, llvmpipe, any key naming
//!   one): a CPU pretending to be a GPU; the ceiling is 5 TFLOP/s and 2 TB/s.

use webtune_compiler::{Op, Target};
use webtune_kernel_db::DeviceKeys;

/// (FLOP/s, bytes/s) ceilings for a device class.
fn ceilings(target: Target, keys: &DeviceKeys) -> (f64, f64) {
    match target {
        Target::Wasm => (1e12, 1e12),
        Target::Wgsl => {
            let k = keys.device_key.to_lowercase();
            if ["swiftshader", "llvmpipe", "lavapipe", "software", "warp"].iter().any(|s| k.contains(s)) {
                (5e12, 2e12)
            } else {
                (2.5e14, 2.5e13)
            }
        }
    }
}

/// `Ok` when one call of `op` in `median_us` microseconds is within the
/// device class's ceilings; otherwise what it implies.
pub fn check(op: &Op, target: Target, keys: &DeviceKeys, median_us: f64) -> Result<(), String> {
    let (max_flops, max_bytes) = ceilings(target, keys);
    let s = median_us * 1e-6;
    let flops = op.flops() as f64 / s;
    // Every argument is read or written at least once.
    let bytes = op.args().iter().map(|a| a.bytes()).sum::<u64>() as f64 / s;
    if flops > max_flops {
        return Err(format!(
            "{median_us} µs implies {:.3e} FLOP/s, above the {:.1e} FLOP/s any {target} device of this class can do",
            flops, max_flops
        ));
    }
    if bytes > max_bytes {
        return Err(format!(
            "{median_us} µs implies {:.3e} bytes/s of argument traffic, above the {:.1e} bytes/s ceiling",
            bytes, max_bytes
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &str) -> DeviceKeys {
        DeviceKeys { device_key: k.into(), arch_key: String::new(), vendor_key: String::new(), rho: String::new() }
    }

    #[test]
    fn honest_times_pass_and_impossible_ones_do_not() {
        let op = Op::parse("matmul", "4096,4096,4096").unwrap();
        let gpu = keys("nvidia/hopper/h100");
        // cuBLAS fp32 on an H100: 49.9 TFLOP/s, 2.75 ms.
        assert!(check(&op, Target::Wgsl, &gpu, 2750.0).is_ok());
        assert!(check(&op, Target::Wgsl, &gpu, 100.0).unwrap_err().contains("FLOP/s"));
        // The same time from a software adapter is a lie.
        assert!(check(&op, Target::Wgsl, &keys("google/swiftshader/x"), 2750.0).is_err());
        let k0 = Op::parse("matmul", "384,768,768").unwrap();
        // 25 GFLOP/s in wasmtime is honest; 10 TFLOP/s from one Wasm thread is not.
        assert!(check(&k0, Target::Wasm, &keys("cpu"), 18_000.0).is_ok());
        assert!(check(&k0, Target::Wasm, &keys("cpu"), 45.0).is_err());
        // A matrix-vector product is bounded by memory: 10.5 MB in 10 µs
        // (1 TB/s) is honest, in 0.3 µs (35 TB/s) it is not.
        let mv = Op::parse("matmul_q4", "1,4096,4096").unwrap();
        assert!(check(&mv, Target::Wgsl, &gpu, 10.0).is_ok());
        assert!(check(&mv, Target::Wgsl, &gpu, 0.3).unwrap_err().contains("bytes/s"));
    }

    #[test]
    fn epilogue_ops_parse_from_the_wire_and_their_arguments_count_as_traffic() {
        let (op, target) = crate::service::parse_kind("matmul+bias+gelu+residual", &[128, 384, 1536], "wasm").unwrap();
        assert_eq!(op.name(), "matmul+bias+gelu+residual");
        assert_eq!(crate::service::kind_of(&op, target).op, "matmul+bias+gelu+residual");
        for bad in ["matmul+gelu+bias", "matmul_q4+bias", "matmul+"] {
            assert!(crate::service::parse_kind(bad, &[1, 32, 2], "wasm").is_err(), "{bad}");
        }
        // Same FLOPs as the plain op, more bytes (bias and R): a time the
        // plain op's bandwidth ceiling just allows is refused with them.
        let plain = op.base();
        assert_eq!(op.flops(), plain.flops());
        let bytes = |o: &Op| o.args().iter().map(|a| a.bytes()).sum::<u64>() as f64;
        let us = bytes(&plain) / 1e12 * 1e6 * 1.01;
        assert!(check(&plain, Target::Wasm, &keys("cpu"), us.max(op.flops() as f64 / 1e12 * 1e6 * 1.01)).is_ok());
        assert!(check(&op, Target::Wasm, &keys("cpu"), bytes(&plain) / 1e12 * 1e6 * 1.01).is_err());
    }
}
