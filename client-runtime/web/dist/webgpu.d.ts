import { type ArgSpec } from './ops.js';
import type { Backend, Bench, Impl, KernelMeta } from './types.js';
export interface GpuImpl extends Impl {
    /** The first pass's pipeline and workgroup counts. */
    pipeline: GPUComputePipeline;
    dispatch: [number, number, number];
    /** Every pass in order (one for ABI 1; ABI 3 kernels have several). */
    passes: {
        pipeline: GPUComputePipeline;
        dispatch: [number, number, number];
    }[];
    /** Bytes of the scratch buffer bound at group 1 (0: none). */
    scratchBytes: number;
}
/** Records `reps` calls of `impl` (every pass, in order) on bind group 0 =
 * `group` (and group 1 = `scratch` where the kernel has one); a one-pass
 * kernel's pipeline is set once. */
export declare function encodePasses(pass: GPUComputePassEncoder, impl: GpuImpl, group: GPUBindGroup, scratch: GPUBindGroup | null, reps?: number): void;
/** A scratch buffer at group 1 that grows to the largest kernel it serves; its contents never outlive a call. */
export declare class Scratch {
    private device;
    private layouts;
    private buffer;
    private group;
    constructor(device: GPUDevice, layouts: GpuLayouts);
    /** The bind group for `impl` (null where it needs no scratch). */
    for(impl: GpuImpl): GPUBindGroup | null;
    dispose(): void;
}
/** Layouts shared by every kernel with `nargs` arguments. */
export declare class GpuLayouts {
    readonly device: GPUDevice;
    private bgl;
    private pl;
    private scratch;
    constructor(device: GPUDevice);
    bindGroupLayout(nargs: number): GPUBindGroupLayout;
    /** Group 1 of a kernel with passes: one read-write storage buffer. */
    scratchLayout(): GPUBindGroupLayout;
    /** The layout of a kernel with `nargs` arguments, and a scratch buffer at group 1 where `scratch`. */
    pipelineLayout(nargs: number, scratch?: boolean): GPUPipelineLayout;
}
/** One line for a module that did not compile: `what`, then its compiler messages with line numbers, else `error`'s. */
export declare function compileErrors(module: GPUShaderModule, what: string, error: unknown): Promise<string>;
export declare class GpuBackend implements Backend<GpuImpl> {
    readonly device: GPUDevice;
    readonly layouts: GpuLayouts;
    private timerMs;
    readonly target: "wgsl";
    constructor(device: GPUDevice, layouts: GpuLayouts, timerMs: number);
    load(code: ArrayBuffer | string, meta: KernelMeta): Promise<GpuImpl>;
    bench(specs: ArgSpec[]): Bench<GpuImpl>;
}
