import { type Policy, Webtune } from './webtune.js';
export interface EncoderLoadOptions {
    /** Base URL of the webtune server; default: this page's origin. */
    server?: string;
    /** The model's name in the server's store (`GET /v1/models` lists them). */
    model: string;
    /**
     * `'auto'`: the faster of the two on this device class, by measurement
     * (see `SentenceEncoder.choice`): what the server's plan says for this
     * GPU's device key, or, for the first device of its class, both timed here
     * and reported. Wasm where there is no WebGPU.
     */
    target: 'wasm' | 'webgpu' | 'auto';
    /** `'auto'`: the length in tokens at which the targets are compared (a text of that length, batch 1). Default 128. */
    autoLength?: number;
    /** WebGPU: the app's device; default: one requested from `navigator.gpu`. */
    device?: GPUDevice;
    /** Tune the model's kernels in `idle()`. Default true. */
    tune?: boolean;
    /** Wasm: tune in the bench worker (see `Webtune.open`). Default false. */
    worker?: boolean;
    /**
     * Wasm: threads a kernel may use (see `Webtune.open`). Default: the
     * device's cores, at most 8, where the page is cross-origin isolated.
     */
    threads?: number;
    /** Longest time one `idle()` call may take, ms. Default 8. */
    budgetMs?: number;
    /** Use the IndexedDB cache of winning kernels. Default true. */
    cache?: boolean;
    /** Candidates to evaluate per kernel at most (see `Webtune.open`). Default: all. */
    maxCandidates?: number;
    /** The tuning policy (see `Webtune.open`). Default `'fast'`. */
    policy?: Policy;
    /** Largest batch run at once; longer lists are encoded in several batches. Default 8. */
    maxBatch?: number;
    /**
     * Report the model-level latency measured per (batch, length) bucket to
     * the server (`POST /v1/models/{name}/latency`, after 5, 15 and 50 calls
     * of a bucket, then every 200), so that the server can tell other devices
     * like this one which target runs the model faster. Default true.
     */
    report?: boolean;
    /**
     * Wasm: `'int16'` runs the four weight products of each layer on
     * `matmul_i16`, weights quantised per column (by the importer, in the
     * manifest's `int16` blob, which is then fetched instead of the f32 one;
     * or at load) and activations per row before each product (see the
     * header of encoder.ts); `'fp32'` runs
     * them on `matmul`. `'int16'` needs target `'wasm'` (a TypeError with
     * `'webgpu'` or `'auto'`: WebGPU runs fp32 only) and sends no latency
     * reports (`report`: the server's plan compares the targets at fp32).
     * Default `'fp32'`.
     */
    precision?: 'fp32' | 'int16';
}
export interface ModelConfig {
    vocab_size: number;
    hidden_size: number;
    num_hidden_layers: number;
    num_attention_heads: number;
    intermediate_size: number;
    max_position_embeddings: number;
    type_vocab_size: number;
    layer_norm_eps: number;
    hidden_act: string;
}
interface Blob {
    sha256: string;
    bytes: number;
    url: string;
}
/** A tensor of a weights blob: little-endian, at a 64-byte-aligned byte offset. */
export interface TensorEntry {
    name: string;
    dtype: string;
    shape: number[];
    offset: number;
}
/** The bundle manifest (format 1), docs/model-bundle.md. */
export interface ModelManifest {
    format: number;
    name: string;
    architecture: string;
    config: ModelConfig;
    max_seq_length: number;
    pooling: 'mean' | 'cls';
    normalize: boolean;
    tokenizer: Blob;
    weights: Blob;
    tensors: TensorEntry[];
    /**
     * The pre-quantised blob for `precision: 'int16'` (absent in bundles
     * imported before it): every tensor of `weights`, in the same order,
     * except the four weight matrices of each layer, each replaced by
     * `{W}.q` (u32 [K/2, N], matmul_i16's B layout) and `{W}.scale` (f32 [N]),
     * and `embeddings.word` [V, H], replaced by `embeddings.word.q` (u32
     * [V, H/2], i16 pairs of a row) and `embeddings.word.scale` (f32 [V]);
     * quant.ts's rule, qmaxW(K) for the matrices and 32767 for the rows.
     */
    int16?: {
        weights: Blob;
        tensors: TensorEntry[];
    } | null;
}
/** How `target: 'auto'` chose. */
export interface AutoChoice {
    target: 'wasm' | 'webgpu';
    /** `plan`: the server's plan for this device class; `measured`: both timed here (and reported); `no-webgpu`: WebGPU did not open. */
    how: 'plan' | 'measured' | 'no-webgpu';
    reason: string;
    /** `measured`: median ms per call of each target at batch 1 × `seq_len` tokens. */
    ms?: {
        wasm: number;
        webgpu: number;
    };
    seq_len: number;
}
export declare class SentenceEncoder {
    /** `target: 'auto'`: which target it chose and why; null otherwise. */
    choice: AutoChoice | null;
    /** The webtune session whose kernels run the model (tuning, events, status). */
    readonly webtune: Webtune;
    readonly manifest: ModelManifest;
    /** Embedding width. */
    readonly dim: number;
    /** WebGPU: the backend that runs every batch; null on Wasm, whose state is the fields below. */
    private gpu;
    private memory;
    private fixed;
    private tokenizer;
    /** Memory offsets of the embedding tensors; `wordScale` is 0 unless `word` is the int16 blob's `embeddings.word.q`. */
    private emb;
    private layers;
    private buckets;
    private maxBatch;
    private queue;
    private i32;
    private f32;
    private latency;
    /** Wasm: the weight products' precision (see `EncoderLoadOptions.precision`). */
    private int16;
    private constructor();
    /**
     * int16 from the f32 blob: each layer's four weight matrices, quantised
     * per column and written over their own f32 copies: the words, then the
     * column scales 64-byte aligned after them (what the int16 blob holds ready).
     */
    private quantizeWeights;
    /**
     * Fetches the model's manifest, weights and tokenizer from the server
     * (each blob checked against its SHA-256 address; with `precision:
     * 'int16'` the int16 weights where the manifest has them, and then not
     * the f32 ones), copies the weights into
     * Wasm memory (or uploads them to the GPU device) and opens a webtune
     * session for the model's kernels.
     */
    static load(opts: EncoderLoadOptions): Promise<SentenceEncoder>;
    /** Token ids of one text: [CLS] … [SEP], at most max_seq_length of them. */
    tokenize(text: string): number[];
    /**
     * One embedding per text (`dim` floats, L2-normalised when the model says
     * so). Texts are grouped by length into batches padded to a bucket.
     */
    encode(texts: string[]): Promise<Float32Array[]>;
    private encodeNow;
    /** The bucket's buffers and kernels, made once. */
    private bucket;
    private makeBucket;
    /** Runs one padded batch through the model into `bk.pooled`; synchronous, so no kernel swaps mid-batch. */
    private run;
    /** Tunes the model's kernels for up to `budgetMs` (see `Webtune.idle`). */
    idle(budgetMs?: number): ReturnType<Webtune['idle']>;
    /** The target this encoder runs on. */
    get target(): 'wasm' | 'webgpu';
    close(): void;
    /**
     * `target: 'auto'`. The plan is asked with a WebGPU session's device key
     * (the GPU is what tells devices apart for this choice: the same CPU with
     * another GPU can flip it), at batch 1 and `autoLength` tokens, before
     * any weights are fetched. With no plan yet, both targets are loaded, each
     * encodes the same text (one untimed call, then 5 timed), both medians are
     * reported through that session, and the faster is kept: the next device
     * of this class gets the plan's answer and loads one target only.
     */
    private static loadAuto;
}
export {};
