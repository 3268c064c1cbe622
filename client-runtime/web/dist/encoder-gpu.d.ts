import type { ModelManifest } from './encoder.js';
import type { Webtune } from './webtune.js';
/** Binding offsets are multiples of this: WebGPU's default, and largest allowed, minStorageBufferOffsetAlignment. */
export declare const ALIGN = 256;
export interface PackedTensor {
    /** Index of the weight buffer, byte offset in it, bytes. */
    buffer: number;
    offset: number;
    bytes: number;
}
/**
 * Places f32 tensors in buffers of at most `maxBytes`, in order, each at a
 * multiple of ALIGN; a tensor starts a new buffer when it does not fit in
 * the current one. Returns each buffer's size and each tensor's place.
 */
export declare function packTensors(tensors: {
    name: string;
    shape: number[];
}[], maxBytes: number): {
    sizes: number[];
    at: Map<string, PackedTensor>;
};
/** Workgroups for `n` rows (or element blocks) as a grid of at most 65535 in x; the kernels fold y back in. */
export declare function grid(n: number): [number, number];
export declare class GpuEncoder {
    private webtune;
    private manifest;
    private fixed;
    private weights;
    private tensors;
    private layers;
    private params;
    private maxBatch;
    private device;
    private buckets;
    private latency;
    private closed;
    private constructor();
    /**
     * Checks the manifest's tensors, uploads the weights (the bundle's blob)
     * to the session's device and builds the fixed kernels' pipelines.
     */
    static create(init: {
        webtune: Webtune;
        manifest: ModelManifest;
        weights: ArrayBuffer;
        maxBatch: number;
        report: boolean;
    }): Promise<GpuEncoder>;
    /** One embedding per list of token ids, batched and padded as the Wasm path does. */
    encode(toks: number[][]): Promise<Float32Array[]>;
    /** The bucket's buffers, kernels and bind groups, made once. */
    private bucket;
    private makeBucket;
    /** Runs one padded batch: one command buffer, one submit, one map of the pooled embeddings. */
    private run;
    /** Frees the weights and every bucket's buffers; the device stays the app's. */
    destroy(): void;
}
