/** Attempts in all, the first included. */
export declare const MAX_ATTEMPTS = 5;
/** The longest wait honoured between attempts, in seconds. */
export declare const MAX_WAIT_S = 30;
/** Whether a status asks the client to come back later. */
export declare function retryable(status: number): boolean;
/**
 * Seconds to wait before retrying, from a `Retry-After` header: delta
 * seconds or an HTTP date; 1 s when it is missing or unreadable, never more
 * than MAX_WAIT_S.
 */
export declare function retryAfterSeconds(header: string | null, now?: number): number;
export declare function sleep(ms: number, signal?: AbortSignal | null): Promise<void>;
/**
 * The requests a session's rate counts on the server (its queues and its
 * reports) pass through one gate per session: once the server has answered
 * one of them 429, they go one at a time, `Retry-After` apart (the time the
 * server's bucket takes to give one more), instead of every waiting request
 * retrying at once and all but one being refused again. Each success halves
 * the spacing, until it is gone.
 */
export interface SessionGate {
    /** Date.now() before which no request of the session goes. */
    next: number;
    /** Spacing between requests, ms (0: none). */
    interval: number;
}
/** The gate of the session whose rate `url` counts against, or null. */
export declare function gateOf(url: string): SessionGate | null;
/** Waits for this request's turn at the gate. */
export declare function passGate(g: SessionGate, signal?: AbortSignal | null): Promise<void>;
/** Notes the server's answer at the gate: a refusal spaces the requests by its wait; a success halves the spacing. */
export declare function noteAnswer(g: SessionGate, status: number, waitS: number): void;
/**
 * fetch(), retried after `Retry-After` while the server answers 429 or 503,
 * up to MAX_ATTEMPTS in all; the last answer is returned whatever it is.
 * A session's queues and reports pass its gate (`SessionGate`).
 * Network errors are not retried (the caller reports them). The body of
 * `init` must be replayable (a string or buffer), as every caller's is.
 */
export declare function fetchRetrying(input: string, init?: RequestInit, fetcher?: typeof fetch): Promise<Response>;
