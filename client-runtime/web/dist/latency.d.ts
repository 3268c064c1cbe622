/** Timed calls kept per bucket: the median of the latest ones is reported (tuning makes earlier ones stale). */
export declare const WINDOW = 15;
/** Calls of a bucket after which a report is sent: the first as soon as a median means something (the server asks for at least 3 runs), then sparser. */
export declare const REPORT_AT: number[];
/** After REPORT_AT, one report every this many calls of a bucket. */
export declare const REPORT_EVERY = 200;
/** Whether the `count`-th timed call of a bucket (1-based) is one after which to report. */
export declare function reportDue(count: number): boolean;
export interface LatencyReport {
    session_id: string;
    target: 'wasm' | 'webgpu';
    batch: number;
    seq_len: number;
    median_ms: number;
    runs: number;
}
/**
 * One model's `encode` timings by bucket. `add` records a call (the first
 * call of each bucket, which fetches and compiles its kernels, is not
 * timed by the caller); due reports go out in the background, and a failed
 * one is dropped, never thrown into the app's `encode`.
 */
export declare class LatencyLog {
    private readonly server;
    private readonly model;
    private readonly maxSeqLength;
    private readonly fetcher;
    private samples;
    private counts;
    /** Reports sent and answered 201. */
    sent: number;
    /**
     * Set when the server refused a report for this model (404, 422: e.g. a
     * server that takes latency reports for encoders only): none is sent again.
     */
    refused: boolean;
    constructor(server: string, model: string, maxSeqLength: number, fetcher?: typeof fetch);
    /** Records one call of `ms` for `batch` texts padded to `seqLen`; reports through `sessionId` when due. */
    add(sessionId: string, target: 'wasm' | 'webgpu', batch: number, seqLen: number, ms: number): Promise<void> | null;
    /** Sends one report; resolves either way. */
    report(r: LatencyReport): Promise<void>;
}
export interface PlanAnswer {
    target: 'wasm' | 'webgpu' | null;
    reason?: string;
}
/** `GET /v1/models/{name}/plan`: the faster target for `deviceKey`'s class at this batch and length, or null with why. */
export declare function fetchPlan(server: string, model: string, deviceKey: string, batch: number, seqLen: number, fetcher?: typeof fetch): Promise<PlanAnswer>;
