// Assembles the sentence encoder's fixed kernels (src/encoder-kernels.wat)
// with wabt, for build.mjs (which embeds the bytes in webtune.js) and the
// tests (which run the very same bytes in Node).

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import wabtInit from 'wabt';

const root = dirname(fileURLToPath(import.meta.url));

export async function assembleKernels() {
  const wabt = await wabtInit();
  const path = join(root, 'src', 'encoder-kernels.wat');
  const mod = wabt.parseWat('encoder-kernels.wat', readFileSync(path, 'utf8'), { simd: true });
  try {
    mod.validate();
    return Buffer.from(mod.toBinary({ log: false, write_debug_names: false }).buffer);
  } finally {
    mod.destroy();
  }
}
