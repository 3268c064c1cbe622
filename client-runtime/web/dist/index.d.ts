/**
 * webtune's in-browser client runtime, its one public face (dist/webtune.js,
 * served at /web/webtune.js): the kernel session (`Webtune`: device-tuned
 * kernels, swapped in as the tuner finds faster ones) and the models that
 * run on it, each with its backends behind it:
 *
 * - `SentenceEncoder`: BERT-family sentence embeddings (Wasm, WebGPU);
 * - `TextGenerator`: llama-family text generation from a GGUF import, its
 *   decoder graph run by the Wasm or the WebGPU backend.
 *
 * ```js
 * import { TextGenerator } from '/web/webtune.js';
 * const gen = await TextGenerator.load({ model: 'smollm2-135m-instruct', target: 'wasm' });
 * for await (const piece of gen.chat([{ role: 'user', content: 'Hi!' }], { maxTokens: 64 })) out.textContent += piece;
 * await gen.idle();
 * ```
 */
export * from './webtune.js';
export { TextGenerator, DEFAULT_CONTEXT, DEFAULT_MAX_TOKENS, type GeneratorLoadOptions, type GenerateOptions, type ChatMessage, type GenerationStats, type LlmManifest, type GeneratorChoice, } from './text-generator.js';
export type { GpuDecoderStats } from './decoder-gpu.js';
export type { DecoderGraph, DecoderTensor, Step as DecoderStep, Format as TensorFormat } from './decoder.js';
export { type Sampling, Sampler } from './sampler.js';
