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
/**
 * fetch(), retried after `Retry-After` while the server answers 429 or 503,
 * up to MAX_ATTEMPTS in all; the last answer is returned whatever it is.
 * Network errors are not retried (the caller reports them). The body of
 * `init` must be replayable (a string or buffer), as every caller's is.
 */
export declare function fetchRetrying(input: string, init?: RequestInit, fetcher?: typeof fetch): Promise<Response>;
