// A session's kernel reports, sent in batches. A page that tunes a whole
// model finishes tens of kernels in its first minute, and each finished
// kernel has a report (its top five, with the tickets that make them
// count). Sent one request each, they spend the session's rate on the
// server (`--rate-per-session`, 60 a minute with a burst of 20, shared with
// the candidate queues), and the queues then meet 429s. So reports wait a
// little and go together: `POST /v1/sessions/{id}/reports/batch` takes up
// to 16 in one request, which the server counts once.
//
// A report is never dropped on a refusal that says "later": a 429 or 503 is
// waited out for as long as its `Retry-After` says, as often as it comes
// (the server is there and counting); a network error is tried again with a
// growing wait, a few times. A server without the batch route (404, 405),
// or a batch refused whole (400, 413, 422), gets each report on its own
// (`POST /v1/sessions/{id}/reports`), which answers each one.

import { gateOf, noteAnswer, passGate, retryAfterSeconds, retryable } from './http.js';
import type { ReportRequest } from './types.js';

/** Reports in one batch at most (the server's limit). */
export const MAX_BATCH = 16;
/** A batch's body stays under this many bytes (the server takes 64 KiB). */
export const MAX_BATCH_BYTES = 56 * 1024;
/** How long a finished kernel's report waits for others to go with it, ms (`flush` sends at once). */
export const LINGER_MS = 5000;
/** Rate-limit answers (429, 503) waited out for one batch before its reports fail. */
export const MAX_LIMITED = 60;
/** Network failures of one batch before its reports fail; the waits between them double from 1 s. */
export const MAX_NETWORK_ATTEMPTS = 5;

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

type Waiting = { body: ReportRequest; size: number; at: number; resolve: (o: ReportOutcome) => void };

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The reports of one session, batched (see the file's comment). */
export class Reporter {
  private waiting: Waiting[] = [];
  private sending = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private flushing = false;
  /** Whether the server takes batches (false after a 404 or 405 from the batch route). */
  private batching = true;
  /** Requests sent (batches and single reports, retries included), and 429/503 answers met. */
  requests = 0;
  limited = 0;

  constructor(
    private readonly server: string,
    private readonly sessionId: string,
    private readonly fetcher: typeof fetch = (...a) => fetch(...a),
    private readonly lingerMs = LINGER_MS,
  ) {}

  /** One report sent alone at once, with the same retries (a tuner without a host's Reporter). */
  static one(server: string, sessionId: string, body: ReportRequest, fetcher?: typeof fetch): Promise<ReportOutcome> {
    const r = new Reporter(server, sessionId, fetcher, 0);
    r.batching = false;
    return r.submit(body);
  }

  /** Reports not yet answered. */
  get pending(): number {
    return this.waiting.length;
  }

  /** Queues a report; resolves once the server answered it (or it failed for good). */
  submit(body: ReportRequest): Promise<ReportOutcome> {
    return new Promise((resolve) => {
      this.waiting.push({ body, size: JSON.stringify(body).length, at: Date.now(), resolve });
      this.schedule();
    });
  }

  /** Sends what waits without lingering (the page has nothing else to tune, or closes). */
  flush(): void {
    if (!this.waiting.length) return;
    this.flushing = true;
    this.schedule();
  }

  private schedule(): void {
    if (this.sending || !this.waiting.length) return;
    const full = this.waiting.length >= MAX_BATCH || this.waiting.reduce((a, w) => a + w.size, 0) >= MAX_BATCH_BYTES;
    const due = this.waiting[0].at + this.lingerMs - Date.now();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.flushing || full || due <= 0) void this.send();
    else this.timer = setTimeout(() => ((this.timer = null), this.schedule()), due);
  }

  /** Sends batches until nothing waits that is due (one request in flight at a time). */
  private async send(): Promise<void> {
    this.sending = true;
    try {
      while (this.waiting.length) {
        const batch: Waiting[] = [];
        let bytes = 16;
        while (batch.length < MAX_BATCH && this.waiting.length) {
          const w = this.waiting[0];
          if (batch.length && bytes + w.size + 1 > MAX_BATCH_BYTES) break;
          batch.push(this.waiting.shift()!);
          bytes += w.size + 1;
        }
        await (this.batching ? this.sendBatch(batch) : this.sendEach(batch));
        if (!this.flushing && this.waiting.length && this.waiting.length < MAX_BATCH && this.waiting[0].at + this.lingerMs > Date.now()) break;
      }
    } finally {
      this.sending = false;
      if (!this.waiting.length) this.flushing = false;
      this.schedule();
    }
  }

  /**
   * One POST, tried again on 429 and 503 after their Retry-After (at most
   * MAX_LIMITED times) and on network errors (MAX_NETWORK_ATTEMPTS, waits
   * doubling from 1 s). Resolves with the last answer, or the last error.
   */
  private async post(url: string, body: string): Promise<{ status: number; text: string } | { error: string }> {
    let limited = 0, failures = 0;
    const gate = gateOf(url);
    for (;;) {
      if (gate) await passGate(gate);
      this.requests++;
      let res: Response;
      try {
        res = await this.fetcher(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      } catch (e) {
        if (++failures >= MAX_NETWORK_ATTEMPTS) return { error: `${e instanceof Error ? e.message : e}` };
        await sleep(1000 * 2 ** (failures - 1));
        continue;
      }
      const wait = retryAfterSeconds(res.headers.get('retry-after'));
      if (gate) noteAnswer(gate, res.status, wait);
      if (retryable(res.status) && limited < MAX_LIMITED) {
        limited++;
        this.limited++;
        await res.body?.cancel().catch(() => {});
        if (!gate) await sleep(1000 * wait);
        continue;
      }
      return { status: res.status, text: await res.text().catch(() => '') };
    }
  }

  private async sendBatch(batch: Waiting[]): Promise<void> {
    const url = `${this.server}/v1/sessions/${this.sessionId}/reports/batch`;
    const r = await this.post(url, JSON.stringify({ reports: batch.map((w) => w.body) } satisfies ReportBatch));
    if ('error' in r) {
      for (const w of batch) w.resolve({ response: null, error: `report: ${r.error}` });
      return;
    }
    if (r.status === 404 || r.status === 405) {
      // A server from before batches: every report on its own from now on.
      this.batching = false;
      return this.sendEach(batch);
    }
    const body = parse(r.text) as Partial<ReportBatchResponse>;
    const results = r.status === 200 && Array.isArray(body?.results) && body.results.length === batch.length ? body.results : null;
    // Refused whole (a body the server would not read, say): each alone, where each gets its own answer.
    if (!results) return this.sendEach(batch);
    batch.forEach((w, i) => {
      const x = results[i];
      if (x.status === 200) w.resolve({ response: x.report ?? null });
      else w.resolve({ response: x, error: `report: HTTP ${x.status}: ${x.error ?? ''}` });
    });
  }

  private async sendEach(batch: Waiting[]): Promise<void> {
    for (const w of batch) {
      const r = await this.post(`${this.server}/v1/sessions/${this.sessionId}/reports`, JSON.stringify(w.body));
      if ('error' in r) w.resolve({ response: null, error: `report: ${r.error}` });
      else {
        const json = parse(r.text);
        w.resolve(r.status >= 200 && r.status < 300 ? { response: json } : { response: json, error: `report: HTTP ${r.status}: ${r.text}` });
      }
    }
  }
}
