import { type DecoderGraph, type DecoderTensor, type Fused, type Step } from './decoder.js';
/** Decode steps a caller may submit ahead of reading their tokens (`ahead`), with one step a submit. */
export declare const MAX_AHEAD = 3;
/** The most decode steps one submit may carry (`aheadMany`, GpuDecoderInit.stepsPerSubmit). */
export declare const MAX_STEPS_PER_SUBMIT = 4;
/** A tuned product as the backend records it (a `GpuKernel` of webtune.ts is one). */
export interface GpuProduct {
    /** The layout of the op's bind group 0 (arguments in ABI order): bind groups made with it survive swaps. */
    readonly bindGroupLayout: GPUBindGroupLayout;
    /** Dispatches `dispatch` records (2 for split-K across workgroups). */
    readonly passes: number;
    /** Records the kernel (its current pipeline: swaps apply to the next run). */
    dispatch(pass: GPUComputePassEncoder, group: GPUBindGroup): void;
}
/** Gives the kernel of a product (`op`, `[M, K, N]`); called once per product. */
export type GpuKernelSource = (op: string, shape: number[]) => Promise<GpuProduct>;
/** How the next token is picked on the GPU (sampler.ts's rule; `u` the sampler's draw, unused at temperature 0). */
export interface GpuSampling {
    temperature: number;
    topK: number;
    topP: number;
    u: number;
}
export interface GpuDecoderInit {
    device: GPUDevice;
    graph: DecoderGraph;
    tensors: DecoderTensor[];
    /** The bundle's weights blob. */
    weights: ArrayBuffer;
    /** Positions the caches hold (at most the graph's context). */
    context: number;
    /** The fixed kernels' WGSL (default: decoder-kernels.wgsl as built into webtune.js). */
    wgsl?: string;
    /** Run adjacent steps as one dispatch where `fusions` finds them, and the decode step's fused runs (`graph.fused`) as one product each. Default true. */
    fuse?: boolean;
    /**
     * With `fuse`: the decode step's attention in MERGE_PARTS parts a head,
     * merged by the product after it (`+merge`: decoder.ts's mergedRun)
     * instead of by a merge dispatch of its own. Default true.
     */
    mergeAttention?: boolean;
    /**
     * Decode steps at up to this many positions run the split attention as
     * one workgroup a key/value head walking every chunk (`attention_one`),
     * without partials or the merge: a dispatch fewer a layer. Default
     * SHORT_ATTENTION; 0 always splits.
     */
    shortAttention?: number;
    /**
     * With `mergeAttention`: decode steps past this many positions run the
     * attention's long form (longAttentionSource: chunks of 128 positions,
     * so that each of the MERGE_PARTS parts folds half the chunks), where
     * the graph has at most LONG_MAXG query heads a key/value head. Default
     * LONG_ATTENTION; 0 never.
     */
    longAttention?: number;
    /**
     * Decode steps run ahead that share one command buffer and one submit
     * (`aheadMany`; 1 to MAX_STEPS_PER_SUBMIT, default 1): each step still
     * samples on the GPU and feeds the next, and each token is read back on
     * its own, but a submit's fixed cost is paid once for all of them.
     * Tokens then arrive in groups of this many. On an H200 through Dawn in
     * Node, four a submit ran 0.99× the rate of one (BENCHMARKS.md); a
     * browser, where each submit also flushes to the GPU process, may differ.
     */
    stepsPerSubmit?: number;
}
/**
 * Where one run's time goes (`GpuDecoder.profile`, for benchmarks; needs
 * the device's `timestamp-query`). Times in ms.
 */
export interface GpuProfile {
    /** From the run's start to its submit: recording the pass on the host. */
    encodeMs: number;
    /** From the run's start until the sampled token is read back. */
    wallMs: number;
    /** The GPU's time for the run's one pass (timestamps at its start and end). */
    gpuMs: number;
    /** Each dispatch's GPU time, each in a pass of its own (a second run of the same tokens), in run order. */
    steps: {
        label: string;
        ms: number;
    }[];
}
/** What the backend has done, for benchmarks and the latency chart. */
export interface GpuDecoderStats {
    /** Dispatches of one decode step (bucket 1, the sampling included); 0 before the first. */
    dispatchesPerToken: number;
    /** Runs (one submit each) and tokens fed so far. */
    submits: number;
    tokens: number;
    /** Tokens the GPU could not sample (the host sampled from the read-back logits). */
    hostSampled: number;
}
/**
 * decoder-kernels.wgsl's attention in its long form: chunks of 128 positions (SCH),
 * two threads a position's key (KP), eight of its vectors and sixteen values loaded at once
 * (KB, VB), at most LONG_MAXG heads a group (MAXG), so that the chunk's scores still fit
 * its workgroup memory. Throws where the source lacks one of the lines it replaces.
 */
export declare function longAttentionSource(wgsl: string): string;
/**
 * Steps that run as one dispatch, by the index of the first of two: an
 * `add` and the `rms_norm` of the same buffer after it (`add_rms_norm`);
 * a `rope` and the `kv_store` of the same rows after it, the keys inside
 * the turned heads and the values outside them (`rope_kv`). The fused
 * kernels do the two steps' arithmetic.
 */
export declare function fusions(graph: DecoderGraph): Map<number, 'add_rms_norm' | 'rope_kv'>;
/** The steps of a fused run (`graph.fused`), by the part each plays. */
export interface FusedRun {
    norm?: Extract<Step, {
        step: 'rms_norm';
    }>;
    product: Extract<Step, {
        step: 'matmul';
    }>;
    glu?: Extract<Step, {
        step: 'swi_glu';
    }>;
    add?: Extract<Step, {
        step: 'add';
    }>;
}
/**
 * The steps of fused run `f` of `graph`, checked against its op's
 * suffixes (docs/ops.md's order: `+rms_norm`, `+swiglu`, `+residual`):
 * the norm writes what the product reads, on the same rows; the SwiGLU
 * reads the product's output of twice its columns; the add adds the last
 * output into another buffer; `k` and `n` are the product's. Throws one line.
 */
export declare function fusedRun(graph: DecoderGraph, f: Fused): FusedRun;
/** One recorded dispatch: a tuned product, or a fixed kernel on its grid; `perT` for a product reading the last of T token rows. */
type Dispatch = {
    label: string;
} & ({
    kernel: GpuProduct;
    group: GPUBindGroup;
    perT?: (t: number) => GPUBindGroup;
} | {
    pipeline: GPUComputePipeline;
    group: GPUBindGroup;
    grid: [number, number];
    gridAt?: (pos0: number) => [number, number];
    /** In a run that ends at position `upTo` or before: this dispatch instead (the short attention). */
    short?: {
        upTo: number;
        label: string;
        pipeline: GPUComputePipeline;
        group: GPUBindGroup;
        grid: [number, number];
    };
    /** In a run that ends past position `from`: this dispatch instead (the long attention). */
    long?: {
        from: number;
        label: string;
        pipeline: GPUComputePipeline;
        group: GPUBindGroup;
        grid: [number, number];
    };
    /** In a run that ends at this position or before: skipped (the merge of a short attention). */
    skipUpTo?: number;
});
interface Bucket {
    m: number;
    steps: Dispatch[];
}
/**
 * Checks what the WebGPU backend needs beyond `checkGraph`: a dispatch never
 * writes a buffer it also reads from another binding, attention's group and
 * head sizes fit its kernel, and a product reading the last of a run's token
 * rows reads it at a bindable offset. Throws one line.
 */
export declare function checkGpuGraph(graph: DecoderGraph): void;
/** The rotary table of `context` positions (decoder.ts's values: f64, rounded to f32). */
export declare function ropeTable(context: number, headDim: number, theta: number): Float32Array<ArrayBuffer>;
/**
 * A decoder graph on a GPUDevice: `create` uploads the weights and builds
 * the fixed pipelines; `setKernels` names where the tuned products come
 * from; `feed` runs tokens and reads the logits back, `next` runs them and
 * samples the next token on the GPU.
 */
export declare class GpuDecoder {
    private pipelines;
    /** The attention in parts' long form (GpuDecoderInit.longAttention), where made. */
    private longPipelines;
    private owned;
    private parts;
    private buffers;
    private caches;
    private rope;
    private stepParams;
    private stepSlot;
    private fused;
    private runParams;
    private ids;
    private token;
    /** Where sampled tokens are read back: a ring, so that runs submitted ahead each have their own. */
    private tokenReads;
    private logitsRead;
    private partials;
    /** One run's parameters a step of `aheadMany`, ALIGN bytes apart, copied into runParams before each step. */
    private runRing;
    /** The decode step's fused runs by their first step, the residual stream's twins, the norms' eps bindings. */
    private runs;
    readonly graph: DecoderGraph;
    readonly device: GPUDevice;
    /** Positions the caches hold. */
    readonly context: number;
    /** The largest bucket: a run's most tokens. */
    readonly maxRows: number;
    readonly stats: GpuDecoderStats;
    private kernelsOf;
    private buckets;
    private ready;
    private made;
    private pos;
    private lost;
    private closed;
    private runHost;
    /** The token read-back ring's next buffer, and the reads in flight (in order). */
    private readSlot;
    private reading;
    /** Decode steps at up to this many positions run the attention as one dispatch (GpuDecoderInit.shortAttention). */
    private shortUpTo;
    /** GpuDecoderInit.longAttention, checked (0 where the graph's groups are too large for the long form). */
    private longFrom;
    /** GpuDecoderInit.mergeAttention. */
    private mergeAttention;
    /** GpuDecoderInit.stepsPerSubmit. */
    readonly stepsPerSubmit: number;
    private constructor();
    /** Checks the graph, uploads the weights, the rotary table and the steps' parameters, and builds the fixed pipelines. */
    static create(init: GpuDecoderInit): Promise<GpuDecoder>;
    /** Why the GPU device was lost; null while it is not. */
    get lostReason(): string | null;
    /** Where the tuned products come from (before the first run). */
    setKernels(source: GpuKernelSource): void;
    /** Positions in the caches so far. */
    get position(): number;
    /** Forgets the caches' contents: the next run starts at position 0. */
    reset(): void;
    /** Bytes of GPU memory the model holds (weights, activations, caches). */
    get memoryBytes(): number;
    /** Makes bucket `m`'s kernels (every product a run in it calls) and bind groups, once. */
    kernels(m: number): Promise<Bucket>;
    /** Checks a run of `tokens` would fit: ids in the vocabulary and positions in the context. Throws one line. */
    check(tokens: ArrayLike<number>): void;
    /** Feeds `tokens` and returns a copy of the logits after the last one. */
    feed(tokens: ArrayLike<number>): Promise<Float32Array>;
    /** Feeds `tokens` without reading anything back (a prompt's chunks before its last); resolves when submitted. */
    prefill(tokens: ArrayLike<number>): Promise<void>;
    /**
     * Feeds `tokens` and samples the next token on the GPU (the one read-back:
     * its id); -1 when the GPU could not (more ids carry weight than its
     * sampler holds, with no top-k to bound them): then `logits()` has what
     * the host samples from, with the same draw.
     */
    next(tokens: ArrayLike<number>, sampling: GpuSampling): Promise<number>;
    /**
     * A decode step fed the token the latest run sampled on the GPU, without
     * the host reading it first, so that a caller can record and submit the
     * next steps while this one runs (up to MAX_AHEAD unread): resolves with
     * its own sampled token (as `next`; -1 where the GPU could not sample).
     * The caller must know that the latest run's token was sampled on the GPU
     * (not -1), and `rewind`s the steps it does not use.
     */
    ahead(sampling: GpuSampling): Promise<number>;
    /** Decode steps a caller may hold submitted and unread: MAX_AHEAD, or two submits' worth with stepsPerSubmit. */
    get aheadLimit(): number;
    /** Whether `aheadMany` can record now (the decode step's kernels are made). */
    get canBatch(): boolean;
    /**
     * `samplings.length` decode steps as `ahead` runs them, each fed the token
     * the step before sampled on the GPU, recorded into one command buffer
     * and submitted once (at most stepsPerSubmit; needs `canBatch`): each
     * step's parameters are copied from a ring into the run's before it.
     * Resolves each step's sampled token (as `ahead`; -1 where the GPU could
     * not sample), in order.
     */
    aheadMany(samplings: GpuSampling[]): Promise<number>[];
    /** Forgets the last `n` positions (steps run ahead that the caller does not use): the next run writes over them. */
    rewind(n: number): void;
    private sampled;
    /** A copy of the latest run's logits, read back from the GPU. */
    logits(): Promise<Float32Array>;
    /** Frees every buffer; the device stays the app's. */
    destroy(): void;
    /** The token a run sampled into read buffer `slot`; reads of the ring in the order of their runs. */
    private readToken;
    private mapped;
    /** Runs `tokens` in chunks of the largest bucket (one submit each); samples after the last where `sampling`. */
    private runAll;
    /**
     * One run: parameters and ids written, every step recorded into one pass
     * (with `timing`: timestamps at the pass's start and end, or with
     * `perStep` a pass per step), one submit.
     */
    private run;
    /** Records the sampled token's copy into the read-back ring's next buffer; that buffer's slot (for readToken). */
    private tokenToRead;
    /** The run parameters (decoder-kernels.wgsl's Run) of `t` tokens from the current position, with `sampling`'s. */
    private runParamsOf;
    /**
     * Records a run of `t` tokens of bucket `bk` from the current position into
     * `enc` (default a new command encoder): (`ahead`) the token the previous run sampled
     * copied into the ids, then every step's dispatch in one pass (with
     * `timing`, timestamps at its start and end, or with `perStep` a pass per
     * step), and the sampling where `sample`.
     */
    private encode;
    /**
     * The host's share of a decode step, for benchmarks: one step's command
     * buffer (every dispatch and the sampling, as `next` records it) built
     * and finished `reps` times and never submitted, so nothing runs and
     * nothing changes; ms each.
     */
    recordTimes(reps: number): Promise<number[]>;
    /**
     * Profiles one run of `tokens` (at most the largest bucket) from the
     * current position, greedy: first as `next` runs it, timed on the host
     * (recording, and until the token is read back) and on the GPU (the
     * pass's timestamps); then the same tokens at the same position again
     * with each dispatch in a pass of its own, for each one's GPU time. The
     * caches end as after one run of `tokens`. Needs the device's
     * `timestamp-query` feature; for benchmarks (passes of one dispatch each
     * cost the GPU more than one pass, so the steps' times add up to more
     * than `gpuMs`). With `perStep: false` only the first run (`steps`
     * then holds the labels, each at 0 ms). With `omit`, that first run
     * leaves out every dispatch of that label (what they cost in the pass is
     * the difference from a run without `omit`; the run's results, the
     * caches' new rows included, are then wrong: reset before using them).
     */
    profile(tokens: number[], opts?: {
        perStep?: boolean;
        omit?: string;
    }): Promise<GpuProfile>;
    private sampleBind;
    /** The sampling's dispatch: one workgroup over the logits. */
    private sampleStep;
    private fixedGroup;
    /** The `+merge` form of fused run `f` where this backend runs one (mergedRun, with GpuDecoderInit.mergeAttention), else null. */
    private mergeOf;
    private makeBucket;
}
export {};
