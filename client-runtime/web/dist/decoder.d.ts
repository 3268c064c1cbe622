/** How a tensor's values are stored (docs/model-bundle.md, format 2). */
export type Format = 'f32' | 'q4_0' | 'q4_1' | 'q8_0';
/** An activation buffer: `cols` f32 per row; one row per token of the run (padded to its bucket), or one. */
export interface GraphBuffer {
    name: string;
    cols: number;
    rows: 'tokens' | 'one';
}
/** A key or value cache: `cols` f32 per position. */
export interface GraphCache {
    name: string;
    cols: number;
}
/** One step of a decoder graph (the serde form of `webtune_models::graph::Step`). */
export type Step = {
    step: 'embed';
    table: string;
    format: Format;
    out: string;
} | {
    step: 'rms_norm';
    x: string;
    weight: string;
    out: string;
    eps: number;
    last: boolean;
} | {
    step: 'matmul';
    kernel: string;
    a: string;
    weight: string;
    format: Format;
    out: string;
    k: number;
    n: number;
    last: boolean;
} | {
    step: 'rope';
    x: string;
    stride: number;
    heads: number;
    head_dim: number;
    theta: number;
} | {
    step: 'kv_store';
    x: string;
    stride: number;
    k_col: number;
    v_col: number;
    width: number;
    k_cache: string;
    v_cache: string;
} | {
    step: 'attention';
    x: string;
    stride: number;
    heads: number;
    kv_heads: number;
    head_dim: number;
    k_cache: string;
    v_cache: string;
    out: string;
    scale: number;
} | {
    step: 'swi_glu';
    x: string;
    ffn: number;
    out: string;
} | {
    step: 'add';
    x: string;
    y: string;
    cols: number;
};
/**
 * Consecutive steps `first..first + steps` that one tuned product (op
 * `kernel`, shape `[1, k, n]`: a block-quantised op with `+rms_norm`,
 * `+swiglu` and `+residual` epilogues) computes in WebGPU's decode step
 * (`webtune_models::graph::Fused`). Every other executor runs the steps.
 */
export interface Fused {
    first: number;
    steps: number;
    kernel: string;
    k: number;
    n: number;
}
/** A decoder's computation for one run of tokens (`webtune_models::graph::DecoderGraph`, version 1). */
export interface DecoderGraph {
    version: number;
    hidden: number;
    vocab: number;
    /** The model's context length: no run goes past it. */
    context: number;
    /** Row buckets of the tuned products, ascending. */
    buckets: number[];
    buffers: GraphBuffer[];
    caches: GraphCache[];
    steps: Step[];
    /** The buffer holding the last token's logits (one row of `vocab`). */
    logits: string;
    /** Runs of steps WebGPU's decode step runs as one product each (absent: none). */
    fused?: Fused[];
}
/** Where one part of a tensor lies in the weights blob. */
export interface TensorPart {
    offset: number;
    bytes: number;
}
/** A tensor of a format-2 manifest: `shape` [N, K] for a matrix (out, in), [len] for a vector. */
export interface DecoderTensor {
    name: string;
    format: Format;
    shape: number[];
    parts: Record<string, TensorPart>;
}
/** A tuned product the backend calls: arguments' byte offsets in ABI order (a WasmKernel is one). */
export interface ProductKernel {
    run(...offsets: number[]): void;
}
/** What a run goes through when the backend has one (`Webtune`'s plan guard): it runs `run` and may change which kernels `kernels` run meanwhile. */
export interface RunGuard {
    call(kind: string, kernels: readonly ProductKernel[], run: () => void): void;
    /** Whether a run of `kind` over `kernels` would be judged now. */
    due?(kind: string, kernels: readonly ProductKernel[]): boolean;
}
/** Gives the kernel of a product (`op`, `[M, K, N]`); called once per product and bucket. */
export type KernelSource = (op: string, shape: number[]) => Promise<ProductKernel>;
/** One matrix product a run needs. */
export interface Product {
    op: string;
    /** `[M, K, N]`. */
    shape: number[];
    /** How many times one run calls it. */
    calls: number;
}
/** The row bucket of a run of `tokens` tokens, or null past the largest. */
export declare function bucketOf(graph: DecoderGraph, tokens: number): number | null;
/**
 * Parts a head of a decode step's split attention where the product after
 * it merges them (`+merge`, docs/ops.md): NP in decoder-kernels.wgsl. Up to
 * NP·64 positions each part folds one chunk of 64; beyond, several.
 */
export declare const MERGE_PARTS = 16;
/**
 * The `+merge` form of fused run `f` (WebGPU's decode step), where its
 * product, in a block format, reads the output of an attention step right
 * before it and the run has no `+rms_norm`: the op and shape the backend runs instead, and
 * the attention; else null. The attention then writes its parts and no
 * merge dispatch runs.
 */
export declare function mergedRun(graph: DecoderGraph, f: Fused): {
    op: string;
    shape: number[];
    attention: Extract<Step, {
        step: 'attention';
    }>;
} | null;
/**
 * The distinct products of a run in bucket `m`, heaviest first (as
 * `DecoderGraph::products`); with `fused`, WebGPU's (`DecoderGraph::fused_products`:
 * in bucket 1 each of the graph's fused runs is one product, its fused op,
 * in its `+merge` form after an attention unless `merge` is false).
 */
export declare function productsOf(graph: DecoderGraph, m: number, fused?: boolean, merge?: boolean): Product[];
/** Byte offsets of everything the memory holds, and its size. */
export interface DecoderLayout {
    ids: number;
    weights: number;
    buffers: Map<string, number>;
    caches: Map<string, number>;
    rope: number;
    scores: number;
    /** Bytes the layout needs (the tuned kernels' scratch comes after). */
    bytes: number;
    maxRows: number;
    headDim: number;
    theta: number;
}
/** The layout of `graph` with a blob of `weightBytes` and `context` positions: the native runner's. */
export declare function layoutOf(graph: DecoderGraph, weightBytes: number, context: number): DecoderLayout;
/**
 * Checks that `graph` is one this backend runs with `tensors` in a blob of
 * `weightBytes`: every name it uses exists, every part lies inside the blob
 * at a 16-byte boundary and is as large as the step reads, and every row the
 * fixed kernels walk is a whole number of 4-float vectors. Throws one line
 * naming the first problem.
 */
export declare function checkGraph(graph: DecoderGraph, tensors: DecoderTensor[], weightBytes: number): void;
export interface DecoderInit {
    graph: DecoderGraph;
    tensors: DecoderTensor[];
    /** The bundle's weights blob. */
    weights: ArrayBuffer;
    /** Positions the caches hold (at most the graph's context). */
    context: number;
    /** The fixed kernels' module bytes (decoder-kernels.wat assembled). */
    fixed: Uint8Array<ArrayBuffer>;
    /** A shared memory (for threaded kernels). */
    shared: boolean;
}
/**
 * A decoder graph on one Wasm memory: `create` lays it out and instantiates
 * the fixed kernels; `setKernels` names where the tuned products come from
 * (the kernel machinery, once a session is open on `memory`); `feed` runs
 * tokens.
 */
export declare class GraphDecoder {
    readonly graph: DecoderGraph;
    readonly memory: WebAssembly.Memory;
    readonly layout: DecoderLayout;
    /** Positions the caches hold. */
    readonly context: number;
    private fixed;
    private parts;
    private rowsOf;
    private kernelsOf;
    /** The products' kernels of each bucket, made on its first run. */
    private buckets;
    /** Per bucket, each step's kernel (matmul steps) by step index. */
    private ready;
    /** Each distinct product's kernel (the head's is in every bucket). */
    private made;
    private ropeFilled;
    private guard;
    /** Per bucket, its distinct kernels (what a guarded run names). */
    private distinct;
    private i32;
    private f32;
    private pos;
    private constructor();
    /** Checks the graph, lays it out in a new memory with the weights copied in, and instantiates the fixed kernels. */
    static create(init: DecoderInit): Promise<GraphDecoder>;
    /**
     * Where the tuned products come from (before the first `feed`), and
     * optionally what every run goes through (`Webtune`'s plan guard: a run
     * of bucket `m` is one call of kind `m` over that bucket's kernels).
     */
    setKernels(source: KernelSource, guard?: RunGuard): void;
    /** Positions in the caches so far. */
    get position(): number;
    /** Forgets the caches' contents: the next run starts at position 0. */
    reset(): void;
    /** Makes the kernels of bucket `m` (every product a run in it calls), once; resolves with each step's. */
    kernels(m: number): Promise<ProductKernel[]>;
    /** Checks a run of `tokens` would fit: ids in the vocabulary and positions in the context. Throws one line. */
    check(tokens: ArrayLike<number>): void;
    /**
     * Feeds `tokens` at the next positions (in chunks of the largest bucket;
     * each chunk's kernels are fetched on the bucket's first use) and returns
     * a view of the logits after the last one (valid until the next run or a
     * memory growth: copy it to keep it).
     */
    feed(tokens: ArrayLike<number>): Promise<Float32Array>;
    /**
     * Runs the model once on a run that uses bucket `m`'s kernels (`m` tokens,
     * or as many as the context holds), for timing only: the tokens are
     * arbitrary, the run starts at the current position (or as late as the
     * context allows, the cache rows it overwrites saved and put back), and
     * the position is left as it was, so the caches read as before (the
     * logits buffer does not).
     */
    trialRun(m: number): Promise<void>;
    /** Buckets run before whose next run the guard would judge (their kernels changed since it last did). */
    dueBuckets(): number[];
    /** A run of bucket `m` through the guard, if any. */
    private guarded;
    /** The last run's logits (a view of the memory). */
    logits(): Float32Array;
    /** Bytes of Wasm memory in use. */
    get memoryBytes(): number;
    private views;
    /** The rotary table up to position `end`, filled as positions are first used. */
    private fillRope;
    private part;
    private buf;
    private cache;
    /** One run of at most the largest bucket's tokens, synchronous (no kernel swaps mid-run). */
    private run;
}
