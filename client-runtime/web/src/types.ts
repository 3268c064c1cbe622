// Shapes shared by the runtime's modules: kernel metadata, wire types and
// the interface each backend (Wasm, WebGPU) gives the tuner.

import type { ArgSpec } from './ops.js';

/** `kernel.json` (docs/kernel-abi.md). */
export interface KernelMeta {
  abi: number;
  op: string;
  shape: number[];
  target: 'wasm' | 'wgsl';
  config: Record<string, unknown>;
  args: { name: string; dtype: string; shape: number[] }[];
  flops: number;
  sha256: string;
  entry: string;
  memory_pages_min?: number | null;
  scratch_bytes?: number | null;
  /** Wasm, threaded kernels (ABI 2): parts, run by `kernel_part` on a thread pool. */
  threads?: number | null;
  /** Wasm, threaded kernels: each part's [start, end) along `config.split`. */
  parts?: number[][] | null;
  /** Wasm, threaded kernels with scratch: part p's scratch starts p · this into the scratch area. */
  part_scratch_bytes?: number | null;
  workgroup_size?: number[] | null;
  dispatch?: number[] | null;
  /** WGSL: the kernel reduces with subgroup operations (its text starts with
   * `enable subgroups;`); it needs the `subgroups` feature and subgroups of
   * at least this many invocations. */
  min_subgroup_size?: number | null;
  /** WGSL, ABI 3: every pass in order (the first is `entry`/`dispatch`), each
   * one dispatch on the same bindings plus a scratch storage buffer of
   * `scratch_bytes` at `@group(1) @binding(0)`. */
  passes?: { entry: string; workgroup_size: number[]; dispatch: number[] }[] | null;
}

/** `GET /v1/kernels/best`. */
export interface BestResponse {
  level: 'device' | 'arch' | 'vendor' | 'default';
  level_key?: string;
  meta: KernelMeta;
  url: string;
  votes: number;
  reports: number;
  space_checksum?: string;
  /** How the kernel was chosen: a winner the quorum `elected`, a `provisional`
   * one (what the key's first sessions agree on, before the quorum), the kernel
   * the device's lite space `predicted`, or the `portable` default (no device key). */
  source?: 'elected' | 'provisional' | 'predicted' | 'portable';
  /** 1 for an elected winner, sessions / quorum for a provisional one, else 0. */
  confidence?: number;
}

/** One `candidate` event of the queue. `seed` is kept exact as a BigInt. */
export interface Candidate {
  index: number;
  total: number;
  source: string;
  sha256: string;
  url: string;
  meta: KernelMeta;
  ticket: string;
  seed: bigint;
  /** Output positions whose values the report returns (newer servers). */
  check?: number[];
  space_checksum: string;
}

/** `POST /v1/sessions/{id}/reports`: one queue's fastest kernels, fastest first. */
export interface ReportRequest {
  op: string;
  shape: number[];
  target: 'wasm' | 'wgsl';
  entries: ReportEntry[];
}

/** One kernel of a report. */
export interface ReportEntry {
  sha256: string;
  ticket: string;
  median_us: number;
  runs: number;
  output_ok: boolean;
  /** Output values at the candidate's `check` positions (with `output_ok` only). */
  samples?: number[];
}

/** A loaded kernel, ready to run. */
export interface Impl {
  sha256: string;
  meta: KernelMeta;
  /** The fetched bytes (Wasm) or text (WGSL), kept for the local cache. */
  bytes: ArrayBuffer | string;
}

/** Where the tuner runs candidates: the runtime's own buffers, never the app's. */
export interface Bench<I extends Impl> {
  /** Timer resolution in ms, as measured. */
  readonly resolutionMs: number;
  /** Shortest worthwhile sample, ms: long enough that rounding is ~1 %. */
  readonly minSampleMs: number;
  /** Copies the seeded inputs (every argument but the output) in. */
  setInputs(args: Uint32Array<ArrayBuffer>[]): Promise<void>;
  /** Poisons the output with NaN, runs `impl` once, returns the output. */
  runOnce(impl: I): Promise<Float32Array>;
  /** Runs `impl` `reps` times back to back; the elapsed time in ms. */
  time(impl: I, reps: number): Promise<number>;
  dispose(): void;
}

/** What the tuner needs from a target. */
export interface Backend<I extends Impl> {
  readonly target: 'wasm' | 'wgsl';
  /** Turns fetched kernel bytes into something runnable (async: compiles off the main thread where it can). */
  load(bytes: ArrayBuffer | string, meta: KernelMeta): Promise<I>;
  /** A bench for arguments `specs`, sized for `meta`. */
  bench(specs: ArgSpec[], meta: KernelMeta): Bench<I>;
}
