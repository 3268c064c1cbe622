// Assembles the fixed kernels (src/encoder-kernels.wat, the sentence
// encoder's, and src/decoder-kernels.wat, the text generator's) with wabt,
// for build.mjs (which embeds the bytes in webtune.js) and the tests (which
// run the very same bytes in Node).

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import wabtInit from 'wabt';

const root = dirname(fileURLToPath(import.meta.url));

export async function assembleKernels(file = 'encoder-kernels.wat') {
  const wabt = await wabtInit();
  const path = join(root, 'src', file);
  const mod = wabt.parseWat(file, readFileSync(path, 'utf8'), { simd: true });
  try {
    mod.validate();
    return Buffer.from(mod.toBinary({ log: false, write_debug_names: false }).buffer);
  } finally {
    mod.destroy();
  }
}
