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

export function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
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

const SESSION_RATED = /\/v1\/sessions\/([0-9a-f]{32})\/(?:queue|reports)/;
const gates = new Map<string, SessionGate>();

/** The gate of the session whose rate `url` counts against, or null. */
export function gateOf(url: string): SessionGate | null {
  const m = SESSION_RATED.exec(url);
  if (!m) return null;
  let g = gates.get(m[1]);
  if (!g) gates.set(m[1], (g = { next: 0, interval: 0 }));
  return g;
}

/** Waits for this request's turn at the gate. */
export async function passGate(g: SessionGate, signal?: AbortSignal | null): Promise<void> {
  const now = Date.now();
  const slot = Math.max(now, g.next);
  if (g.interval > 0) g.next = slot + g.interval;
  if (slot > now) await sleep(slot - now, signal);
}

/** Notes the server's answer at the gate: a refusal spaces the requests by its wait; a success halves the spacing. */
export function noteAnswer(g: SessionGate, status: number, waitS: number): void {
  if (retryable(status)) {
    g.interval = Math.max(g.interval, 1000 * waitS);
    g.next = Math.max(g.next, Date.now() + 1000 * waitS);
  } else {
    g.interval = g.interval / 2 < 250 ? 0 : g.interval / 2;
  }
}

/**
 * fetch(), retried after `Retry-After` while the server answers 429 or 503,
 * up to MAX_ATTEMPTS in all; the last answer is returned whatever it is.
 * A session's queues and reports pass its gate (`SessionGate`).
 * Network errors are not retried (the caller reports them). The body of
 * `init` must be replayable (a string or buffer), as every caller's is.
 */
export async function fetchRetrying(
  input: string,
  init: RequestInit = {},
  fetcher: typeof fetch = fetch,
): Promise<Response> {
  const gate = gateOf(input);
  for (let attempt = 1; ; attempt++) {
    if (gate) await passGate(gate, init.signal);
    const res = await fetcher(input, init);
    const wait = retryAfterSeconds(res.headers.get('retry-after'));
    if (gate) noteAnswer(gate, res.status, wait);
    if (!retryable(res.status) || attempt >= MAX_ATTEMPTS) return res;
    await res.body?.cancel().catch(() => {});
    // At the gate, the gate's next turn is the wait.
    if (!gate) await sleep(wait * 1000, init.signal);
  }
}
