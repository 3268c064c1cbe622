// What the Chromium tests and benches share: where the server binary and
// Debian's Chromium are, the flags Chromium runs with here, starting a real
// `webtune serve` on loopback, and the cosine the model checks use. Never
// downloads a browser.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** The server binary: WEBTUNE_BIN, default target/release/webtune. */
export const BIN = process.env.WEBTUNE_BIN ?? join(ROOT, 'target', 'release', 'webtune');
/** Debian's Chromium (the binary, not the wrapper script), or CHROMIUM. */
export const CHROMIUM = process.env.CHROMIUM ?? ['/usr/lib/chromium/chromium', '/usr/bin/chromium'].find((p) => existsSync(p));
/** Headless, no sandbox (root), and none of the background connections this closed network refuses. */
export const FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-dev-shm-usage', '--remote-debugging-pipe',
];
/**
 * WebGPU on Chromium's SwiftShader adapter (CPU Vulkan, exact results):
 * Debian's Chromium offers no adapter with --disable-gpu unless ANGLE and
 * WebGPU are both pointed at it.
 */
export const WEBGPU_FLAGS = ['--enable-unsafe-webgpu', '--use-angle=swiftshader', '--use-webgpu-adapter=swiftshader'];

/**
 * Starts `webtune serve --addr 127.0.0.1:0 --database-url sqlite://DB` plus
 * `extra` arguments; resolves with the process, its URL and its stderr so far
 * once it says where it listens (60 s at most).
 */
export function startServer(db, extra = [], bin = BIN) {
  return new Promise((resolve, reject) => {
    const args = ['serve', '--addr', '127.0.0.1:0', '--database-url', `sqlite://${db}`, ...extra];
    const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    const timer = setTimeout(() => reject(new Error(`webtune serve did not start in 60 s: ${out}${err}`)), 60_000);
    p.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ proc: p, url: m[1], log: () => err });
      }
    });
    p.stderr.on('data', (d) => (err += d));
    p.on('exit', (code) => reject(new Error(`webtune serve exited with ${code}: ${out}${err}`)));
  });
}

/** Chromium with FLAGS, a fresh profile in `profileDir`, and `extra` flags. */
export function launchChromium(profileDir, extra = []) {
  return chromium.launch({
    executablePath: CHROMIUM,
    ignoreDefaultArgs: true,
    args: [...FLAGS, `--user-data-dir=${profileDir}`, ...extra],
    timeout: 60_000,
  });
}

/** Cosine similarity of two equal-length vectors, in f64. */
export function cosine(a, b) {
  let d = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    d += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return d / Math.sqrt(na * nb);
}
