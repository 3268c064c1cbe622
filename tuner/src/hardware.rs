//! Hardware resource models by vendor and architecture: what Table 1 of the
//! NNJIT paper needs to know about a core.
//!
//! A "core" is the unit that runs workgroups and shares a register file and
//! workgroup memory among them: an NVIDIA SM, an AMD CU, an Intel subslice
//! (Xe-core), an Apple GPU core, a Mali shader core, an Adreno SP, or one CPU
//! thread of a software renderer. Registers are 32-bit, counted per core and
//! per thread (invocation). Figures come from the vendors' public programming
//! guides and architecture whitepapers, named beside each entry; where a
//! vendor publishes nothing the figure is a conservative estimate and says so.
//! Architectures are those browsers report in `GPUAdapterInfo.architecture`
//! (Dawn's `gpu_info` names); there is no table of individual products.
//! Anything unrecognised gets the vendor's most conservative model, and an
//! unknown vendor gets [`GpuModel::UNKNOWN`].

/// What a GPU core offers to workgroups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuModel {
    /// The model's name (vendor/architecture family), for `--stats`.
    pub name: &'static str,
    /// Threads that execute in lockstep (warp, wavefront, SIMD width).
    pub warp_width: u32,
    /// 32-bit registers per core (TOTAL_REGS_PER_CORE).
    pub regs_per_core: u32,
    /// Registers one thread may use before spilling (or losing occupancy).
    pub max_regs_per_thread: u32,
    /// Resident warps per core (TOTAL_WARPS_PER_CORE).
    pub max_warps_per_core: u32,
    /// Resident workgroups per core.
    pub max_blocks_per_core: u32,
    /// Workgroup (shared) memory per core in bytes (L1_SIZE_PER_CORE).
    pub shared_bytes_per_core: u32,
}

const KIB: u32 = 1024;

impl GpuModel {
    /// Anything not recognised: smaller than every model below in each
    /// resource, so that no candidate it admits overruns a real device.
    pub const UNKNOWN: GpuModel = GpuModel {
        name: "unknown-gpu",
        warp_width: 32,
        regs_per_core: 16384,
        max_regs_per_thread: 64,
        max_warps_per_core: 16,
        max_blocks_per_core: 8,
        shared_bytes_per_core: 16 * KIB,
    };

    /// The model for a normalised vendor and architecture slug.
    pub fn for_gpu(vendor: &str, arch: &str) -> GpuModel {
        let a = arch;
        match vendor {
            // CUDA C++ Programming Guide, "Technical Specifications per
            // Compute Capability": 64 K registers per SM and at most 255 per
            // thread on every architecture since Kepler; warps, blocks and
            // shared memory per SM vary as below.
            "nvidia" => {
                let (name, warps, blocks, smem) = match a {
                    "maxwell" | "pascal" => ("nvidia-maxwell-pascal", 64, 32, 64 * KIB), // cc 5.x/6.x
                    "volta" => ("nvidia-volta", 64, 32, 96 * KIB),                       // cc 7.0
                    "turing" => ("nvidia-turing", 32, 16, 64 * KIB),                     // cc 7.5
                    // "ampere" covers GA100 (cc 8.0) and GA10x (cc 8.6): the smaller, GA10x.
                    "ampere" => ("nvidia-ampere", 48, 16, 100 * KIB),
                    "lovelace" | "ada" => ("nvidia-lovelace", 48, 24, 100 * KIB), // cc 8.9
                    "hopper" => ("nvidia-hopper", 64, 32, 228 * KIB),             // cc 9.0
                    // "blackwell" covers cc 10.0 and 12.0: the smaller, 12.0.
                    "blackwell" => ("nvidia-blackwell", 48, 24, 100 * KIB),
                    _ => ("nvidia-unknown", 32, 16, 64 * KIB), // the least of the above (Turing)
                };
                GpuModel {
                    name,
                    warp_width: 32,
                    regs_per_core: 65536,
                    max_regs_per_thread: 255,
                    max_warps_per_core: warps,
                    max_blocks_per_core: blocks,
                    shared_bytes_per_core: smem,
                }
            }
            // AMD "RDNA Architecture" whitepaper (2019): a CU has two SIMD32
            // with 128 KiB of VGPRs each (64 K registers per CU), up to 256
            // VGPRs per lane, 64 KiB of LDS per CU; 16 waves per SIMD on
            // RDNA 3 (20 before), 32 per CU taken. "AMD Graphics Core Next"
            // whitepaper and the GCN3/Vega ISA guides: four SIMD16 running
            // wave64, 64 KiB of VGPRs per SIMD, 10 waves per SIMD, 64 KiB LDS.
            "amd" => {
                if a.starts_with("gcn") || a.starts_with("cdna") {
                    GpuModel {
                        name: "amd-gcn",
                        warp_width: 64,
                        regs_per_core: 65536,
                        max_regs_per_thread: 255,
                        max_warps_per_core: 40,
                        max_blocks_per_core: 16,
                        shared_bytes_per_core: 64 * KIB,
                    }
                } else if a.starts_with("rdna") {
                    GpuModel {
                        name: "amd-rdna",
                        warp_width: 32,
                        regs_per_core: 65536,
                        max_regs_per_thread: 255,
                        max_warps_per_core: 32,
                        max_blocks_per_core: 16,
                        shared_bytes_per_core: 64 * KIB,
                    }
                } else {
                    // Unknown AMD: wave64 (the stricter full-wave rule), GCN's
                    // register file, RDNA's fewer waves.
                    GpuModel {
                        name: "amd-unknown",
                        warp_width: 64,
                        regs_per_core: 65536,
                        max_regs_per_thread: 128,
                        max_warps_per_core: 32,
                        max_blocks_per_core: 16,
                        shared_bytes_per_core: 64 * KIB,
                    }
                }
            }
            // Intel "The Compute Architecture of Intel Processor Graphics
            // Gen9" and the oneAPI GPU Optimization Guide ("Xe GPU
            // architecture"): each EU thread has 128 GRF registers of 32
            // bytes, i.e. 64 32-bit registers per lane in SIMD16; 7 threads
            // per EU; 64 KiB SLM per subslice. Gen9/Gen11 subslices have 8
            // EUs, Xe (Gen12) subslices and Xe-cores 16, with 8 threads per
            // vector engine on Xe-HPG and later.
            "intel" => {
                let (name, eus, threads) = match a {
                    x if x.starts_with("gen-12") || x == "xe-lp" || x == "xe-lpg" => ("intel-xe-lp", 16, 7),
                    x if x.starts_with("xe") => ("intel-xe-hpg", 16, 8),
                    _ => ("intel-gen9", 8, 7), // Gen9/Gen11 and unknown: the smaller subslice
                };
                GpuModel {
                    name,
                    warp_width: 16,
                    regs_per_core: eus * threads * 16 * 64,
                    max_regs_per_thread: 64,
                    max_warps_per_core: eus * threads,
                    max_blocks_per_core: 16,
                    shared_bytes_per_core: 64 * KIB,
                }
            }
            // Apple publishes the "Metal Feature Set Tables" (SIMD-group width
            // 32, 32 KiB of threadgroup memory per threadgroup, 1024 threads)
            // but no register file size; the figures here are the
            // reverse-engineered ones of the open "metal-benchmarks" study
            // (about 208 KiB of registers per core, 24 resident SIMD-groups
            // at full occupancy), rounded down.
            "apple" => GpuModel {
                name: "apple",
                warp_width: 32,
                regs_per_core: 49152,
                max_regs_per_thread: 128,
                max_warps_per_core: 24,
                max_blocks_per_core: 24,
                shared_bytes_per_core: 32 * KIB,
            },
            // Arm "Mali GPU Best Practices" and the Mali "GPU Datasheet":
            // Valhall and 5th-gen cores run 16-wide warps, up to 1024 (2048
            // on 5th gen) threads per core at full occupancy with at most 32
            // registers per thread, half occupancy up to 64; Bifrost runs
            // 4- or 8-wide warps, 768 threads per core. Mali has no dedicated
            // shared memory: workgroup memory is cached system memory, and
            // drivers advertise 32 KiB.
            "arm" => {
                let (name, warp, threads) = match a {
                    "valhall" => ("arm-valhall", 16, 1024),
                    x if x.starts_with("5th") || x.starts_with("gen-5") => ("arm-5th-gen", 16, 2048),
                    "bifrost" => ("arm-bifrost", 8, 768),
                    _ => ("arm-unknown", 8, 512),
                };
                GpuModel {
                    name,
                    warp_width: warp,
                    regs_per_core: threads * 32,
                    max_regs_per_thread: 64,
                    max_warps_per_core: threads / warp,
                    max_blocks_per_core: 16,
                    shared_bytes_per_core: 32 * KIB,
                }
            }
            // Qualcomm "Snapdragon Mobile Platform OpenCL General Programming
            // and Optimization" guide: waves of 64 (full precision) on Adreno
            // 6xx/7xx, 32 KiB of local memory per SP, workgroups up to 1024.
            // The register file size is not published: a conservative
            // estimate of 32 K registers and 16 waves per SP.
            "qualcomm" => GpuModel {
                name: "qualcomm-adreno",
                warp_width: 64,
                regs_per_core: 32768,
                max_regs_per_thread: 64,
                max_warps_per_core: 16,
                max_blocks_per_core: 8,
                shared_bytes_per_core: 32 * KIB,
            },
            // Software renderers run one workgroup at a time on one CPU
            // thread, SIMD-wide: SwiftShader's subgroup is 4 lanes (measured:
            // BENCHMARKS.md, "Facts carried in"), llvmpipe's 8 ("llvmpipe (LLVM 15, 256 bits)").
            // Values that do not fit the CPU's registers spill to the stack,
            // which stays in the 32 KiB L1, so L1 is the register file here.
            "google" | "mesa" | "microsoft" => {
                let warp = if a == "llvmpipe" || vendor == "mesa" { 8 } else { 4 };
                GpuModel {
                    name: if warp == 8 { "software-llvmpipe" } else { "software-swiftshader" },
                    warp_width: warp,
                    regs_per_core: 8192,
                    max_regs_per_thread: 255,
                    max_warps_per_core: 256 / warp,
                    max_blocks_per_core: 1,
                    shared_bytes_per_core: 32 * KIB,
                }
            }
            _ => GpuModel::UNKNOWN,
        }
    }
}

/// How a Wasm engine's compiler copes with a micro-kernel whose register
/// tile needs more vector registers than the CPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterTiles {
    /// Spilled accumulators cost little: Cranelift (wasmtime, the native
    /// client) ran 8×16 tiles (37 live vectors on x86's 16) as fast as 4×8
    /// (11 live) in BENCHMARKS.md's "The CPU register model, measured".
    MaySpill,
    /// Every spill is slow, so the tile, a row of B and a splat of A stay in
    /// the registers the engine allocates ([`CpuModel::allocatable`]). V8 in Chromium
    /// 156: on K0 the spill-free 6×8 tile ran at 48 GFLOP/s and the spilling
    /// 4×16 and 8×16 tiles the other rule favours at 28–31 (BENCHMARKS.md,
    /// "Lite space in V8"). Engines not measured get this rule: it never
    /// spills, whatever the allocator.
    InRegisters,
}

/// What one CPU core offers to a single-threaded Wasm kernel, as the
/// browser's Wasm engine compiles it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuModel {
    pub name: &'static str,
    /// 128-bit vector registers the Wasm engine allocates (TOTAL_REGS_PER_CORE).
    pub vector_registers: u32,
    /// L1 data cache per core in bytes (L1_SIZE_PER_CORE).
    pub l1_bytes: u32,
    /// How the engine treats a register tile larger than the registers.
    pub tiles: RegisterTiles,
    /// Vector registers V8's register allocator hands out, the ones its
    /// code generator keeps as scratch left out (`ALLOCATABLE_DOUBLE_REGISTERS`
    /// in V8's `register-x64.h` and `register-arm64.h`): xmm0–14 on x86-64
    /// (xmm15 is scratch), d0–14 and d16–28 on arm64. The budget of an
    /// [`RegisterTiles::InRegisters`] tile.
    pub allocatable: u32,
}

impl CpuModel {
    /// The model for an ISA (`x86`, `arm`, `unknown`) and OS slug, with the
    /// engine the device key names (`v8`, `webtune-native`, ...).
    pub fn for_cpu(isa: &str, os: &str, engine: &str) -> CpuModel {
        let tiles = match engine {
            // The native client runs kernels in wasmtime (Cranelift).
            "webtune-native" | "wasmtime" => RegisterTiles::MaySpill,
            _ => RegisterTiles::InRegisters,
        };
        let (name, vector_registers, l1_bytes, allocatable) = match (isa, os) {
            // Apple M-series and A-series performance cores: 128 KiB L1D
            // (Apple publishes no figure; AnandTech's "Apple M1" and A14
            // deep dives measured it). Arm A64 has 32 vector registers.
            ("arm", "macos" | "ios") => ("cpu-arm-apple", 32, 128 * KIB, 28),
            // Arm Architecture Reference Manual (A64): 32 128-bit V
            // registers. L1D is 32–64 KiB on Cortex-A55..A78 and X cores
            // (their TRMs): the smaller.
            ("arm", _) => ("cpu-arm", 32, 32 * KIB, 28),
            // Intel SDM vol. 1: 16 XMM registers in 64-bit mode without
            // EVEX; V8 and Cranelift allocate xmm0–15 for SIMD128 even on
            // AVX-512 parts. L1D: 32 KiB on Intel Skylake–Cascade Lake and
            // AMD Zen 1–4 (48 KiB on Ice Lake and later): the smaller.
            ("x86", _) => ("cpu-x86", 16, 32 * KIB, 15),
            _ => ("cpu-unknown", 16, 32 * KIB, 15),
        };
        CpuModel { name, vector_registers, l1_bytes, tiles, allocatable }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_is_the_most_conservative() {
        let vendors = [
            ("nvidia", "turing"),
            ("nvidia", "hopper"),
            ("nvidia", "x"),
            ("amd", "rdna-3"),
            ("amd", "gcn-5"),
            ("amd", "x"),
            ("intel", "gen-9"),
            ("intel", "gen-12lp"),
            ("intel", "xe-2lpg"),
            ("apple", "common-3"),
            ("arm", "valhall"),
            ("arm", "bifrost"),
            ("arm", "x"),
            ("qualcomm", "adreno-7xx"),
        ];
        let u = GpuModel::UNKNOWN;
        for (v, a) in vendors {
            let m = GpuModel::for_gpu(v, a);
            assert!(m.regs_per_core >= u.regs_per_core, "{v}/{a}");
            assert!(m.shared_bytes_per_core >= u.shared_bytes_per_core, "{v}/{a}");
            assert!(m.max_regs_per_thread >= u.max_regs_per_thread, "{v}/{a}");
            assert!(m.max_blocks_per_core >= u.max_blocks_per_core, "{v}/{a}");
            assert!(m.warp_width.is_power_of_two() && m.regs_per_core >= m.max_regs_per_thread * m.warp_width);
        }
        assert_eq!(GpuModel::for_gpu("someone", "else"), u);
        assert_eq!(GpuModel::for_gpu("nvidia", "hopper").shared_bytes_per_core, 228 * 1024);
        assert_eq!(GpuModel::for_gpu("intel", "gen-9").regs_per_core, 8 * 7 * 16 * 64);
    }

    #[test]
    fn cpu_models() {
        assert_eq!(CpuModel::for_cpu("x86", "linux", "v8").vector_registers, 16);
        assert_eq!(CpuModel::for_cpu("arm", "android", "v8").vector_registers, 32);
        assert_eq!(CpuModel::for_cpu("arm", "macos", "jsc").l1_bytes, 128 * 1024);
        assert_eq!(CpuModel::for_cpu("unknown", "macos", "v8"), CpuModel::for_cpu("nope", "x", "v8"));
        assert_eq!(CpuModel::for_cpu("x86", "linux", "v8").tiles, RegisterTiles::InRegisters);
        assert_eq!(CpuModel::for_cpu("x86", "linux", "webtune-native").tiles, RegisterTiles::MaySpill);
        assert_eq!(CpuModel::for_cpu("x86", "linux", "someengine").tiles, RegisterTiles::InRegisters, "unmeasured engines never spill");
        assert_eq!(CpuModel::for_cpu("x86", "linux", "v8").allocatable, 15);
        assert_eq!(CpuModel::for_cpu("arm", "android", "v8").allocatable, 28);
    }
}
