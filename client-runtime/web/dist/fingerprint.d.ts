/** What `POST /v1/sessions` receives as `fingerprint`. */
export interface Fingerprint {
    /** Which kernels this session tunes: `wasm` (CPU) or `wgsl` (GPU). */
    target: 'wasm' | 'wgsl';
    vendor: string;
    architecture: string;
    device: string;
    adapter?: {
        vendor: string;
        architecture: string;
        device: string;
        description: string;
        subgroupMinSize?: number;
        subgroupMaxSize?: number;
        isFallbackAdapter?: boolean;
    };
    limits?: Record<string, number>;
    features?: string[];
    hardwareConcurrency: number;
    /** `x86` or `arm` (UA client hints' `architecture`), when known. */
    cpuArchitecture?: string;
    simd: boolean;
    relaxedSimd: boolean;
    threads: boolean;
    browser: {
        name: string;
        version: string;
    };
    os: string;
    rho?: string;
}
export interface WasmFeatures {
    simd: boolean;
    relaxedSimd: boolean;
    threads: boolean;
}
export declare function wasmFeatures(): WasmFeatures;
interface UaData {
    brands?: {
        brand: string;
        version: string;
    }[];
    platform?: string;
}
/** Browser name and major version, and the OS, from UA client hints or the UA string. */
export declare function browserInfo(ua?: string, data?: UaData | undefined): {
    browser: {
        name: string;
        version: string;
    };
    os: string;
    arch: string;
};
/** The adapter's info and limits in the browser's own names. */
export declare function adapterFields(adapter: GPUAdapter): Pick<Fingerprint, 'adapter' | 'limits' | 'features'>;
/**
 * The fingerprint of this browser for `target`. A WebGPU session describes
 * the GPU adapter; a Wasm session describes the CPU side only (the kernels run
 * on the CPU, whatever GPU is present), so its flat fields name the engine,
 * the platform and the core count.
 */
export declare function fingerprint(target: 'wasm' | 'webgpu', adapter: GPUAdapter | null, rho?: string): Promise<Fingerprint>;
export {};
