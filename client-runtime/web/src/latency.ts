// Model-level latency, for choosing a backend by measurement (docs/model-bundle.md,
// "Backend choice by measurement"): SentenceEncoder times its `encode`
// calls per (batch, padded length) bucket and reports the median to
// `POST /v1/models/{name}/latency` through its session; `target: 'auto'`
// asks `GET /v1/models/{name}/plan` which target is faster on this device
// class.

import { fetchRetrying } from './http.js';
import { median } from './stats.js';

/** Timed calls kept per bucket: the median of the latest ones is reported (tuning makes earlier ones stale). */
export const WINDOW = 15;
/** Calls of a bucket after which a report is sent: the first as soon as a median means something (the server asks for at least 3 runs), then sparser. */
export const REPORT_AT = [5, 15, 50];
/** After REPORT_AT, one report every this many calls of a bucket. */
export const REPORT_EVERY = 200;

/** Whether the `count`-th timed call of a bucket (1-based) is one after which to report. */
export function reportDue(count: number): boolean {
  return REPORT_AT.includes(count) || (count > REPORT_AT[REPORT_AT.length - 1] && count % REPORT_EVERY === 0);
}

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
export class LatencyLog {
  private samples = new Map<string, number[]>();
  private counts = new Map<string, number>();
  /** Reports sent and answered 201. */
  sent = 0;
  /**
   * Set when the server refused a report for this model (404, 422: e.g. a
   * server that takes latency reports for encoders only): none is sent again.
   */
  refused = false;

  constructor(
    private readonly server: string,
    private readonly model: string,
    private readonly maxSeqLength: number,
    private readonly fetcher: typeof fetch = fetch,
  ) {}

  /** Records one call of `ms` for `batch` texts padded to `seqLen`; reports through `sessionId` when due. */
  add(sessionId: string, target: 'wasm' | 'webgpu', batch: number, seqLen: number, ms: number): Promise<void> | null {
    const key = `${target}|${batch}|${seqLen}`;
    const xs = this.samples.get(key) ?? [];
    xs.push(ms);
    if (xs.length > WINDOW) xs.shift();
    this.samples.set(key, xs);
    const n = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, n);
    if (this.refused || !reportDue(n)) return null;
    return this.report({ session_id: sessionId, target, batch, seq_len: Math.min(seqLen, this.maxSeqLength), median_ms: median(xs), runs: xs.length });
  }

  /** Sends one report; resolves either way. */
  async report(r: LatencyReport): Promise<void> {
    try {
      const res = await fetchRetrying(`${this.server}/v1/models/${encodeURIComponent(this.model)}/latency`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(r),
      }, this.fetcher);
      if (res.status === 201) this.sent++;
      else if (res.status === 404 || res.status === 422) this.refused = true;
      await res.body?.cancel().catch(() => {});
    } catch {
      // Offline or refused: a latency report is advice, never worth failing an app over.
    }
  }
}

export interface PlanAnswer {
  target: 'wasm' | 'webgpu' | null;
  reason?: string;
}

/** `GET /v1/models/{name}/plan`: the faster target for `deviceKey`'s class at this batch and length, or null with why. */
export async function fetchPlan(server: string, model: string, deviceKey: string, batch: number, seqLen: number, fetcher: typeof fetch = fetch): Promise<PlanAnswer> {
  const q = new URLSearchParams({ device_key: deviceKey, batch: String(batch), seq_len: String(seqLen) });
  const res = await fetchRetrying(`${server}/v1/models/${encodeURIComponent(model)}/plan?${q}`, {}, fetcher);
  if (!res.ok) return { target: null, reason: `plan HTTP ${res.status}` };
  const body = (await res.json()) as PlanAnswer;
  return { target: body.target === 'wasm' || body.target === 'webgpu' ? body.target : null, reason: body.reason };
}
