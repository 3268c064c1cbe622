//! NNJIT's primitive vector ρ, measured on the device itself.
//!
//! Two devices can share a name (and so a key) and still behave differently:
//! a browser's Wasm engine may or may not map relaxed-SIMD multiply-add to a
//! fused instruction, a core may have 16 or 32 vector registers, and the same
//! laptop CPU runs differently under two engines. ρ tells them apart: one bit
//! per primitive, each from a pair of small kernels that differ in that
//! primitive alone, timed alternately on the device. A bit is `1` when the
//! variant is faster than the base by more than [`RHO_MARGIN`], else `0`, so
//! devices whose measured ratios agree within that noise band get the same
//! bit, and the same key (the key's last part).
//!
//! This module only defines the pairs (pure: the server compiles them, the
//! client times them); the list's [`rho_version`] changes whenever a pair
//! does, so that clients measure again instead of reusing a cached vector.

use sha2::{Digest, Sha256};
use webtune_compiler::schedule::UnrollLoop;
use webtune_compiler::{Op, Schedule, Target};

/// A bit is `1` only when the variant's median time is below `1 − RHO_MARGIN`
/// of the base's: 10%, beyond the run-to-run noise of a browser tab's timer
/// on small kernels, so that one device class does not split into two keys.
pub const RHO_MARGIN: f64 = 0.10;

/// One primitive: a base kernel and a variant that differs in that
/// primitive alone, both for `op`.
#[derive(Clone, Debug, PartialEq)]
pub struct RhoPrimitive {
    pub name: &'static str,
    /// What a `1` means, for people reading keys.
    pub meaning: &'static str,
    pub op: Op,
    pub base: Schedule,
    pub variant: Schedule,
    /// The variant needs relaxed SIMD; a device without it gets `0`.
    pub needs_relaxed_simd: bool,
}

/// The primitives of `target`, in bit order. Wasm: relaxed-SIMD FMA, the
/// combined `load32_splat`, a copied B tile (`cache_read`), and an 8×8
/// register tile (which spills where the core has 16 vector registers).
/// WGSL has none yet: its timing needs GPU timestamps that not every adapter
/// offers, and a GPU key already names the architecture.
pub fn rho_primitives(target: Target) -> Vec<RhoPrimitive> {
    if target != Target::Wasm {
        return Vec::new();
    }
    // 64³: about 0.5 MFLOP, 10–40 µs a call on a phone or laptop core, so a
    // few hundred calls fit in the 200 ms the client allows itself.
    let op = Op::parse("matmul", "64,64,64").expect("a valid shape");
    let base = Schedule {
        x0: 4,
        y0: 8,
        r0: 4,
        x1: 32,
        y1: 64,
        r1: 64,
        unroll: vec![UnrollLoop::X0, UnrollLoop::Y0, UnrollLoop::R0],
        ..Schedule::default_for(&op, Target::Wasm)
    };
    let mut no_splat = base.clone();
    no_splat.passes.load_splat = false;
    vec![
        RhoPrimitive {
            name: "relaxed_madd",
            meaning: "relaxed-SIMD multiply-add beats mul + add (a fused instruction underneath)",
            op: op.clone(),
            base: base.clone(),
            variant: Schedule { relaxed_simd: true, ..base.clone() },
            needs_relaxed_simd: true,
        },
        RhoPrimitive {
            name: "no_load_splat",
            meaning: "a separate load and splat beat v128.load32_splat",
            op: op.clone(),
            base: base.clone(),
            variant: no_splat,
            needs_relaxed_simd: false,
        },
        RhoPrimitive {
            name: "cache_read",
            meaning: "copying B's cache tile first beats reading it in place",
            op: op.clone(),
            base: base.clone(),
            variant: Schedule { cache_read: true, ..base.clone() },
            needs_relaxed_simd: false,
        },
        RhoPrimitive {
            name: "tile_8x8",
            meaning: "an 8×8 register tile beats 4×8 (enough vector registers not to spill)",
            op,
            base: base.clone(),
            variant: Schedule { x0: 8, ..base },
            needs_relaxed_simd: false,
        },
    ]
}

/// A short checksum of `target`'s pairs and the margin: equal versions
/// measure the same thing.
pub fn rho_version(target: Target) -> String {
    let mut text = format!("margin={RHO_MARGIN}\n");
    for p in rho_primitives(target) {
        let base = serde_json::to_string(&p.base).expect("schedules serialise");
        let variant = serde_json::to_string(&p.variant).expect("schedules serialise");
        text.push_str(&format!("{} {} {base} {variant}\n", p.name, p.op));
    }
    hex::encode(Sha256::digest(text.as_bytes()))[..16].to_string()
}

/// The bit of one primitive from its measured time ratio variant / base.
pub fn rho_bit(ratio: f64) -> char {
    if ratio.is_finite() && ratio < 1.0 - RHO_MARGIN { '1' } else { '0' }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_compiles_and_differs_from_its_base() {
        let ps = rho_primitives(Target::Wasm);
        assert_eq!(ps.len(), 4);
        for p in &ps {
            p.base.check(&p.op, Target::Wasm).unwrap();
            p.variant.check(&p.op, Target::Wasm).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_ne!(p.base, p.variant, "{}", p.name);
            assert_eq!(p.base, ps[0].base, "every pair shares one base");
            assert_eq!(p.needs_relaxed_simd, p.variant.relaxed_simd, "{}", p.name);
        }
        assert!(rho_primitives(Target::Wgsl).is_empty());
    }

    #[test]
    fn bits_need_a_clear_win() {
        assert_eq!(rho_bit(0.85), '1');
        assert_eq!(rho_bit(0.95), '0', "inside the noise band");
        assert_eq!(rho_bit(1.3), '0');
        assert_eq!(rho_bit(f64::NAN), '0');
    }

    #[test]
    fn version_is_stable_and_names_the_pairs() {
        assert_eq!(rho_version(Target::Wasm), rho_version(Target::Wasm));
        assert_ne!(rho_version(Target::Wasm), rho_version(Target::Wgsl));
    }
}
