import { type DecoderGraph, type DecoderTensor } from './decoder.js';
import { GpuDecoder } from './decoder-gpu.js';
import { type Policy, Webtune } from './webtune.js';
/** Positions a generator holds by default (at most the model's). */
export declare const DEFAULT_CONTEXT = 2048;
/** Tokens `generate` makes by default. */
export declare const DEFAULT_MAX_TOKENS = 256;
export interface GeneratorLoadOptions {
    /** Base URL of the webtune server; default: this page's origin. */
    server?: string;
    /** The model's name in the server's store (`GET /v1/models` lists them). */
    model: string;
    /**
     * `'wasm'`, `'webgpu'` (the decode step on the GPU: one submit and one
     * token id read back per token; refused in one line where WebGPU is
     * absent), or `'auto'`: the faster of the two on this device class, by
     * measurement (see `TextGenerator.choice`): the server's plan for this
     * class if it has one, else both are loaded and timed on the same decode
     * steps here, reported, and the faster is kept (Wasm where WebGPU does
     * not open).
     */
    target: 'wasm' | 'webgpu' | 'auto';
    /** WebGPU: the app's GPUDevice; one is requested if absent. */
    device?: GPUDevice;
    /** WebGPU: the adapter to fingerprint (see `Webtune.open`). */
    adapter?: GPUAdapter;
    /** `'auto'`: the position up to which the targets' decode steps are compared (a prompt that long, then a few steps). Default 128. */
    autoLength?: number;
    /**
     * Threads a kernel may use (see `Webtune.open`). Default: the device's
     * cores, at most 8, where the page is cross-origin isolated.
     */
    threads?: number;
    /**
     * Positions the key/value caches hold: the longest prompt plus generated
     * text. Memory grows with it (SmolLM2-135M: 46 KB a position, so 94 MB at
     * 2048). Default: 2048, or the model's context if smaller.
     */
    context?: number;
    /**
     * WebGPU: decode steps a submit (1 to 4; GpuDecoderInit.stepsPerSubmit).
     * Default 1; tokens of a generation then stream in groups of this many.
     */
    stepsPerSubmit?: number;
    /** Tune the model's kernels in `idle()`. Default true. */
    tune?: boolean;
    /** Tune in the bench worker (see `Webtune.open`). Default false. */
    worker?: boolean;
    /** Longest time one `idle()` call may take, ms. Default 8. */
    budgetMs?: number;
    /** Use the IndexedDB cache of winning kernels. Default true. */
    cache?: boolean;
    /** Candidates to evaluate per kernel at most (see `Webtune.open`). Default: all. */
    maxCandidates?: number;
    /** The tuning policy (see `Webtune.open`). Default `'fast'`. */
    policy?: Policy;
    /**
     * Report the per-token decode latency to the server (`POST
     * /v1/models/{name}/latency`, batch 1, seq_len the power of two at least
     * 64 that holds the position, after 5, 15 and 50 tokens of a length
     * bucket, then every 200). Default true.
     */
    report?: boolean;
}
export interface GenerateOptions {
    /** Tokens to generate at most (0: none). Default 256; capped by the context. */
    maxTokens?: number;
    /** 0 (default): greedy. Otherwise the softmax temperature. */
    temperature?: number;
    /** Sample from the k most likely tokens only; 0 (default): all. */
    topK?: number;
    /** Sample from the smallest set of most likely tokens whose probability reaches p; 1 (default): all. */
    topP?: number;
    /** The sampler's seed (a u64). Default 0. */
    seed?: number | bigint;
    /** Strings that end the text (not yielded themselves). */
    stop?: string | string[];
    /** Stops the generation: the iterator ends after the text so far. */
    signal?: AbortSignal;
}
/** One message of a chat. */
export interface ChatMessage {
    role: string;
    content: string;
}
/** How the latest generation went. */
export interface GenerationStats {
    promptTokens: number;
    /** Tokens sampled (end-of-generation ids not counted). */
    generatedTokens: number;
    /**
     * Why it ended: an end-of-generation id, `maxTokens`, the context full,
     * a stop string, or `abort`: the signal, or the caller stopped iterating.
     */
    finish: 'eog' | 'length' | 'context' | 'stop' | 'abort';
    /** Time to feed the prompt, ms. */
    prefillMs: number;
    /** Time of the decode steps (one token each), ms; per step in `stepMs`. */
    decodeMs: number;
    stepMs: number[];
}
interface BlobRef {
    sha256: string;
    bytes: number;
    url: string;
}
/** A language model's bundle manifest (format 2, docs/model-bundle.md). */
export interface LlmManifest {
    format: 2;
    name: string;
    architecture: string;
    task?: string;
    source?: {
        file: string;
        sha256: string;
    };
    config: {
        vocab_size: number;
        hidden_size: number;
        num_layers: number;
        num_heads: number;
        num_kv_heads: number;
        head_dim: number;
        ffn_size: number;
        rope_theta: number;
        rms_eps: number;
        context_length: number;
        tied_embeddings: boolean;
    };
    tokenizer: BlobRef;
    chat_template: string | null;
    special: {
        bos_id: number | null;
        eos_id: number | null;
        eog_ids: number[];
        add_bos: boolean;
    };
    weights: BlobRef;
    tensors: DecoderTensor[];
}
/** How `target: 'auto'` chose. */
export interface GeneratorChoice {
    target: 'wasm' | 'webgpu';
    /**
     * `plan`: the server's plan for this device class; `measured`: both timed
     * here (and reported); `no-webgpu`: WebGPU did not open or could not hold
     * the model; `device-lost`: the GPU device was lost after loading, and
     * the model runs on Wasm since the call after.
     */
    how: 'plan' | 'measured' | 'no-webgpu' | 'device-lost';
    reason: string;
    /** `measured`: median ms of a decode step of each target at positions up to `seq_len`. */
    ms?: {
        wasm: number;
        webgpu: number;
    };
    seq_len: number;
}
export declare class TextGenerator {
    /** `target: 'auto'`: which target it chose and why; null otherwise. */
    choice: GeneratorChoice | null;
    /** The webtune session whose kernels run the model (tuning, events, status); a new one after a fallback to Wasm. */
    webtune: Webtune;
    readonly manifest: LlmManifest;
    /** The decoder graph the backend runs (served by `GET /v1/models/{name}/graph`). */
    readonly graph: DecoderGraph;
    /** Positions the caches hold: the longest prompt plus generated text. */
    readonly context: number;
    /** How the latest `generate`/`chat` went; null before the first. */
    stats: GenerationStats | null;
    private decoder;
    private tokenizer;
    private template;
    private eog;
    private tail;
    /** Turns taken or waited for (`lock`): a generation or a low-level call in flight when > 0. */
    private locks;
    private latency;
    private closed;
    /** `target: 'auto'` on WebGPU: loads the model on Wasm, for when the GPU device is lost. */
    private fallback;
    private constructor();
    /** The target running the model. */
    get target(): 'wasm' | 'webgpu';
    /** WebGPU: the backend (for benchmarks: `profile`, `stats`); null on Wasm. */
    get gpu(): GpuDecoder | null;
    /** WebGPU: dispatches of one decode step (the sampling included), as last run; null on Wasm or before the first step. */
    get dispatchesPerToken(): number | null;
    /**
     * Fetches the model's manifest, decoder graph, weights and tokenizer from
     * the server (each blob checked against its SHA-256 address), lays the
     * model out (Wasm: in one memory; WebGPU: in GPU buffers, the weights
     * uploaded once), opens a webtune session of the target and fetches the
     * decode step's kernels (a prompt's prefill buckets are fetched on their
     * first use).
     */
    static load(opts: GeneratorLoadOptions): Promise<TextGenerator>;
    /**
     * `target: 'auto'`. The plan is asked with a WebGPU session's device key
     * (the GPU is what tells devices apart for this choice) at batch 1 and
     * `autoLength` positions, before any weights are fetched. With no plan,
     * both targets are loaded, each feeds the same prompt of about
     * `autoLength` − 6 tokens and then times 5 decode steps (greedy, after one
     * untimed), both medians are reported through that session, and the
     * faster is kept.
     */
    private static loadAuto;
    /**
     * At the start of each call: where the GPU device was lost, the model
     * goes on on Wasm (`target: 'auto'`: loaded again there, its caches empty,
     * `choice` saying why), or the call fails in one line (`target:
     * 'webgpu'`). A call in flight when the device goes fails in one line.
     */
    private recover;
    /** The prompt's token ids as `generate` feeds them (BOS first when the manifest says `add_bos`). */
    tokenize(text: string): number[];
    /** The text of token ids (special tokens left out). */
    decode(ids: number[]): string;
    /** A chat rendered with the model's chat template, ready for the assistant's turn. */
    applyChatTemplate(messages: ChatMessage[]): string;
    /**
     * Generates text after `prompt`, as an async iterator of text pieces as
     * they are decoded (see the header of text-generator.ts for every policy).
     */
    generate(prompt: string, options?: GenerateOptions): AsyncGenerator<string, void, undefined>;
    /** Generates the assistant's reply to `messages`, rendered with the model's chat template. */
    chat(messages: ChatMessage[], options?: GenerateOptions): AsyncGenerator<string, void, undefined>;
    /**
     * Low level: feeds `ids` at the next positions (with `reset`, from
     * position 0) and returns a copy of the logits after the last one, e.g.
     * to teacher-force a reference's tokens.
     */
    forward(ids: number[], { reset }?: {
        reset?: boolean;
    }): Promise<Float32Array>;
    /**
     * Low level: feeds `ids` (with `reset`, from position 0) and returns the
     * greedy next token, whatever it is (end-of-generation ids included), e.g.
     * to run a fixed number of decode steps. On WebGPU its id is all that is
     * read back.
     */
    nextToken(ids: number[], { reset }?: {
        reset?: boolean;
    }): Promise<number>;
    /**
     * Low level: feeds `ids` (with `reset`, from position 0) and returns the
     * next `n` greedy tokens, each step fed the token before whatever it is
     * (end-of-generation ids included), as `generate` runs its steps (on
     * WebGPU, submitted ahead of their read-backs), e.g. to time decoding.
     */
    nextTokens(ids: number[], n: number, { reset }?: {
        reset?: boolean;
    }): Promise<number[]>;
    /** Positions the caches hold now (after `forward`, or the latest generation). */
    get position(): number;
    /** Bytes of memory the model uses: the Wasm memory, or on WebGPU its GPU buffers. */
    get memoryBytes(): number;
    /**
     * Tunes the model's kernels for up to `budgetMs` (see `Webtune.idle`);
     * call it between generations. On Wasm a candidate that wins on the bench
     * replaces a kernel only once it also wins in the model's own calls (the
     * session's `trials: 'all'`: on the bench its weights stay in cache, in
     * the model every layer's stream from memory). A generation feeds those
     * trials; between generations `idle()` runs model steps that call the
     * kernels on trial (in their bucket, the position kept), at least one per
     * call while a trial is open (a prompt bucket's step may outlast a small
     * budget) and more while the budget lasts.
     */
    idle(budgetMs?: number): ReturnType<Webtune['idle']>;
    close(): void;
    /** Waits for the generation in flight, if any; resolves with the release of the next turn. */
    private lock;
    private stream;
    /** The end of a call that ran decode steps: the steps run ahead and unused forgotten, then the next turn released. */
    private endTurn;
    /** A call's error where the GPU device was lost during it: one line saying what happens next. */
    private lostLine;
}
export {};
