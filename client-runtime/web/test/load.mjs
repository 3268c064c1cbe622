// Loads the runtime's TypeScript sources for unit tests: esbuild bundles one
// entry in memory and Node imports it from a data: URL (no files written).

import * as esbuild from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** `define`: esbuild's, e.g. the WGSL texts build.mjs puts in (absent: those identifiers are undefined). */
export async function load(entry, define = {}) {
  const r = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [entry],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    write: false,
    logLevel: 'error',
    define,
  });
  const code = r.outputFiles[0].text;
  return import(`data:text/javascript;base64,${Buffer.from(code).toString('base64')}`);
}
