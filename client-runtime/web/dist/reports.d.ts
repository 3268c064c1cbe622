import type { ReportRequest } from './types.js';
/** Reports in one batch at most (the server's limit). */
export declare const MAX_BATCH = 16;
/** A batch's body stays under this many bytes (the server takes 64 KiB). */
export declare const MAX_BATCH_BYTES: number;
/** How long a finished kernel's report waits for others to go with it, ms (`flush` sends at once). */
export declare const LINGER_MS = 5000;
/** Rate-limit answers (429, 503) waited out for one batch before its reports fail. */
export declare const MAX_LIMITED = 60;
/** Network failures of one batch before its reports fail; the waits between them double from 1 s. */
export declare const MAX_NETWORK_ATTEMPTS = 5;
/** `POST /v1/sessions/{id}/reports/batch`'s body. */
export interface ReportBatch {
    reports: ReportRequest[];
}
/** Its answer: one result per report, in order. */
export interface ReportBatchResponse {
    results: ReportResult[];
}
/** One report's fate: the status it would have had alone, with the answer or the error. */
export interface ReportResult {
    status: number;
    report?: unknown;
    error?: string;
}
/** What became of one report: the server's answer (null without one) and, when it was not stored, why. */
export interface ReportOutcome {
    response: unknown;
    error?: string;
}
/** The reports of one session, batched (see the file's comment). */
export declare class Reporter {
    private readonly server;
    private readonly sessionId;
    private readonly fetcher;
    private readonly lingerMs;
    private waiting;
    private sending;
    private timer;
    private flushing;
    /** Whether the server takes batches (false after a 404 or 405 from the batch route). */
    private batching;
    /** Requests sent (batches and single reports, retries included), and 429/503 answers met. */
    requests: number;
    limited: number;
    constructor(server: string, sessionId: string, fetcher?: typeof fetch, lingerMs?: number);
    /** One report sent alone at once, with the same retries (a tuner without a host's Reporter). */
    static one(server: string, sessionId: string, body: ReportRequest, fetcher?: typeof fetch): Promise<ReportOutcome>;
    /** Reports not yet answered. */
    get pending(): number;
    /** Queues a report; resolves once the server answered it (or it failed for good). */
    submit(body: ReportRequest): Promise<ReportOutcome>;
    /** Sends what waits without lingering (the page has nothing else to tune, or closes). */
    flush(): void;
    private schedule;
    /** Sends batches until nothing waits that is due (one request in flight at a time). */
    private send;
    /**
     * One POST, tried again on 429 and 503 after their Retry-After (at most
     * MAX_LIMITED times) and on network errors (MAX_NETWORK_ATTEMPTS, waits
     * doubling from 1 s). Resolves with the last answer, or the last error.
     */
    private post;
    private sendBatch;
    private sendEach;
}
