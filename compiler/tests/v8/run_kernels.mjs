// Runs every kernel directory under argv[2] in Node's V8, as any host of the
// webtune Wasm ABI would: the layout comes from kernel.json alone.
//   DIR/case/kernel.wasm, kernel.json, inputs.bin  ->  DIR/case/output.bin
// inputs.bin holds every argument in ABI order, each padded to 16 bytes.
import { readFileSync, writeFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
let ran = 0;
for (const name of readdirSync(dir).sort()) {
  const d = join(dir, name);
  const meta = JSON.parse(readFileSync(join(d, 'kernel.json'), 'utf8'));
  const offsets = [];
  let total = 0;
  for (const a of meta.args) {
    offsets.push(total);
    const bytes = 4 * a.shape.reduce((x, y) => x * y, 1);
    total += Math.ceil(bytes / 16) * 16;
  }
  const out = meta.args[meta.args.length - 1];
  const outBytes = 4 * out.shape.reduce((x, y) => x * y, 1);
  const outOffset = offsets[offsets.length - 1];
  const params = [...offsets];
  if (meta.scratch_bytes > 0) {
    params.push(total);
    total += meta.scratch_bytes;
  }
  const pages = Math.max(Math.ceil(total / 65536), meta.memory_pages_min);
  const memory = new WebAssembly.Memory({ initial: pages });
  new Uint8Array(memory.buffer).set(readFileSync(join(d, 'inputs.bin')), 0);
  const { instance } = await WebAssembly.instantiate(readFileSync(join(d, 'kernel.wasm')), { env: { memory } });
  instance.exports[meta.entry](...params);
  writeFileSync(join(d, 'output.bin'), new Uint8Array(memory.buffer, outOffset, outBytes));
  ran++;
}
console.log(`v8: ran ${ran} kernels`);
