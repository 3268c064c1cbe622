// fetch() that waits out the server's admission limits. The server answers
// 429 (a rate limit) or 503 (too much work in flight) with `Retry-After`;
// an app's tuning must slow down, not fail, when it meets either.

/** Attempts in all, the first included. */
export const MAX_ATTEMPTS = 5;
/** The longest wait honoured between attempts, in seconds. */
export const MAX_WAIT_S = 30;

/** Whether a status asks the client to come back later. */
export function retryable(status: number): boolean {
  return status === 429 || status === 503;
}

/**
 * Seconds to wait before retrying, from a `Retry-After` header: delta
 * seconds or an HTTP date; 1 s when it is missing or unreadable, never more
 * than MAX_WAIT_S.
 */
export function retryAfterSeconds(header: string | null, now = Date.now()): number {
  if (header === null || header.trim() === '') return 1;
  const v = header.trim();
  let s: number;
  if (/^\d+$/.test(v)) s = Number(v);
  else {
    const at = Date.parse(v);
    s = Number.isFinite(at) ? (at - now) / 1000 : 1;
  }
  return Math.min(MAX_WAIT_S, Math.max(0, s));
}

function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', stop);
      resolve();
    }, ms);
    const stop = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', stop, { once: true });
  });
}

/**
 * fetch(), retried after `Retry-After` while the server answers 429 or 503,
 * up to MAX_ATTEMPTS in all; the last answer is returned whatever it is.
 * Network errors are not retried (the caller reports them). The body of
 * `init` must be replayable (a string or buffer), as every caller's is.
 */
export async function fetchRetrying(
  input: string,
  init: RequestInit = {},
  fetcher: typeof fetch = fetch,
): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    const res = await fetcher(input, init);
    if (!retryable(res.status) || attempt >= MAX_ATTEMPTS) return res;
    const wait = retryAfterSeconds(res.headers.get('retry-after'));
    await res.body?.cancel().catch(() => {});
    await sleep(wait * 1000, init.signal);
  }
}
