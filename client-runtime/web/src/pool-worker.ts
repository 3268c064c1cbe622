// A thread-pool worker (threads.ts): instantiates each threaded kernel the
// page prepares on the page's shared memory, then runs the parts it claims
// of each call until the pool is closed. Bundled by build.mjs into a string
// that the page starts from a Blob URL.

import { CTRL, runClaimed } from './threads.js';

type Msg =
  | { kind: 'init'; ctrl: Int32Array<SharedArrayBuffer> }
  | { kind: 'kernel'; id: number; module: WebAssembly.Module; memory: WebAssembly.Memory; entry: string };

/** How long a worker spins for the next call before it sleeps. */
const SPIN_MS = 0.3;

let ctrl: Int32Array<SharedArrayBuffer> | null = null;
const kernels = new Map<number, (...a: number[]) => void>();
/** Broadcast messages handled: while fewer than `ctrl[MAIL]`, go read them. */
let mail = 0;
let seen = 0;
const args: number[] = [];

const scope = self as unknown as { onmessage: ((e: MessageEvent<Msg>) => void) | null; postMessage(m: unknown): void };

scope.onmessage = (e: MessageEvent<Msg>) => {
  const m = e.data;
  if (m.kind === 'init') {
    ctrl = m.ctrl;
    seen = Atomics.load(ctrl, CTRL.GEN);
  } else {
    mail++;
    try {
      const inst = new WebAssembly.Instance(m.module, { env: { memory: m.memory } });
      kernels.set(m.id, inst.exports[m.entry] as (...a: number[]) => void);
      scope.postMessage({ kind: 'ready', id: m.id });
    } catch (err) {
      scope.postMessage({ kind: 'error', id: m.id, error: `pool worker cannot instantiate kernel: ${err}` });
    }
  }
  loop();
};

function loop(): void {
  const c = ctrl;
  if (!c) return;
  let idleSince = performance.now();
  for (;;) {
    // The bell first: a call or message after this read changes it, and the
    // wait below then returns at once.
    const bell = Atomics.load(c, CTRL.BELL);
    if (Atomics.load(c, CTRL.MAIL) !== mail) return; // a message is waiting
    const gen = Atomics.load(c, CTRL.GEN);
    if (gen === seen) {
      if (performance.now() - idleSince < SPIN_MS) continue;
      Atomics.wait(c, CTRL.BELL, bell);
      idleSince = performance.now();
      continue;
    }
    seen = gen;
    const fn = kernels.get(c[CTRL.KERNEL]);
    const parts = c[CTRL.PARTS];
    args.length = c[CTRL.NARGS];
    for (let i = 0; i < args.length; i++) args[i] = c[CTRL.ARGS + i];
    if (fn) {
      runClaimed(c, gen, parts, (p) => {
        try {
          fn(...args, p);
        } catch {
          Atomics.store(c, CTRL.ERROR, 1);
        }
      });
    }
    idleSince = performance.now();
  }
}
