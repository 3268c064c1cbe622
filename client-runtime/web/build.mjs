// Builds the client runtime and the demo into dist/ (committed, so that
// `webtune serve` embeds them without npm), or with --check, builds into a
// temporary folder and fails when dist/ differs from what the sources give.
//
//   dist/webtune.js   the ES module apps import (served at /web/webtune.js),
//                     with the bench worker's bundle inside as a string, the
//                     SentenceEncoder's Wasm kernels (encoder-kernels.wat) as base64,
//                     its WebGPU kernels (encoder-kernels.wgsl) as text,
//                     TextGenerator's fixed kernels (decoder-kernels.wat) as
//                     base64, @huggingface/tokenizers and @huggingface/jinja;
//                     its entry is src/index.ts, the runtime's one public face
//   dist/*.d.ts       its type declarations
//   dist/demo.js      the demo app (served at /web/demo.js), which imports
//                     /web/webtune.js like any other app would

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { assembleKernels } from './assemble.mjs';

const root = dirname(fileURLToPath(import.meta.url));
const names = (d) => {
  try {
    return readdirSync(d).sort();
  } catch {
    return [];
  }
};
const check = process.argv.includes('--check');
const out = check ? mkdtempSync(join(tmpdir(), 'webtune-web-')) : join(root, 'dist');

if (!check) rmSync(out, { recursive: true, force: true });

const common = {
  absWorkingDir: root,
  bundle: true,
  format: 'esm',
  target: 'es2022',
  platform: 'browser',
  charset: 'utf8',
  legalComments: 'none',
  logLevel: 'warning',
};
// The bench worker (the `worker` option) is bundled on its own and put into
// webtune.js as a string, started from a Blob URL: no second file to serve.
// The thread pool's worker goes the same way, into both webtune.js and the
// bench worker (which times threaded kernels on a pool of its own).
const poolWorker = await esbuild.build({ ...common, entryPoints: ['src/pool-worker.ts'], format: 'iife', write: false, outfile: 'pool-worker.js' });
const poolDefine = { __WEBTUNE_POOL_WORKER__: JSON.stringify(poolWorker.outputFiles[0].text) };
const worker = await esbuild.build({ ...common, entryPoints: ['src/eval-worker.ts'], format: 'iife', write: false, outfile: 'eval-worker.js', define: poolDefine });
// The sentence encoder's fixed kernels: the Wasm ones, assembled from
// src/encoder-kernels.wat with wabt, go in as base64; the WebGPU ones,
// src/encoder-kernels.wgsl, as their text.
const define = {
  ...poolDefine,
  __WEBTUNE_EVAL_WORKER__: JSON.stringify(worker.outputFiles[0].text),
  __WEBTUNE_ENCODER_KERNELS__: JSON.stringify((await assembleKernels()).toString('base64')),
  __WEBTUNE_ENCODER_WGSL__: JSON.stringify(readFileSync(join(root, 'src', 'encoder-kernels.wgsl'), 'utf8')),
  // The text generator's fixed kernels (src/decoder-kernels.wat, which the
  // native decoder assembles too), as base64.
  __WEBTUNE_DECODER_KERNELS__: JSON.stringify((await assembleKernels('decoder-kernels.wat')).toString('base64')),
  // Its WebGPU kernels (src/decoder-kernels.wgsl), as their text.
  __WEBTUNE_DECODER_WGSL__: JSON.stringify(readFileSync(join(root, 'src', 'decoder-kernels.wgsl'), 'utf8')),
};
await esbuild.build({ ...common, entryPoints: ['src/index.ts'], outfile: join(out, 'webtune.js'), define });
await esbuild.build({ ...common, entryPoints: ['demo/demo.ts'], outfile: join(out, 'demo.js'), external: ['/web/webtune.js'] });

const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
// Declarations for the module; then a type check of everything, demo included.
execFileSync(process.execPath, [tsc, '-p', 'tsconfig.json', '--outDir', out], { cwd: root, stdio: 'inherit' });
execFileSync(process.execPath, [tsc, '-p', 'tsconfig.demo.json'], { cwd: root, stdio: 'inherit' });

if (check) {
  const dist = join(root, 'dist');
  const want = names(out), have = names(dist);
  const differ = [...new Set([...want, ...have])].filter((n) => {
    try {
      return !readFileSync(join(out, n)).equals(readFileSync(join(dist, n)));
    } catch {
      return true;
    }
  });
  rmSync(out, { recursive: true, force: true });
  if (differ.length) {
    console.error(`client-runtime/web/dist is out of date (${differ.join(', ')}): run \`npm run build\` in client-runtime/web and commit dist/`);
    process.exit(1);
  }
  console.log('client-runtime/web/dist matches its sources');
} else {
  console.log(`built ${names(out).join(', ')}`);
}
