import { type ArgSpec } from './ops.js';
import type { Backend, Bench, Impl, KernelMeta } from './types.js';
export interface GpuImpl extends Impl {
    pipeline: GPUComputePipeline;
    dispatch: [number, number, number];
}
/** Layouts shared by every kernel with `nargs` arguments. */
export declare class GpuLayouts {
    readonly device: GPUDevice;
    private bgl;
    private pl;
    constructor(device: GPUDevice);
    bindGroupLayout(nargs: number): GPUBindGroupLayout;
    pipelineLayout(nargs: number): GPUPipelineLayout;
}
export declare class GpuBackend implements Backend<GpuImpl> {
    readonly device: GPUDevice;
    readonly layouts: GpuLayouts;
    private timerMs;
    readonly target: "wgsl";
    constructor(device: GPUDevice, layouts: GpuLayouts, timerMs: number);
    load(code: ArrayBuffer | string, meta: KernelMeta): Promise<GpuImpl>;
    bench(specs: ArgSpec[]): Bench<GpuImpl>;
}
