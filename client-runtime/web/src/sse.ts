// A pull-based Server-Sent Events reader over fetch(). EventSource is not
// used: it reconnects (and so restarts the queue) when the server closes the
// stream after `done`, and it reads ahead without limit; here the next event
// is read only when the tuner wants the next candidate.

import { fetchRetrying, retryAfterSeconds } from './http.js';

export interface SseEvent {
  event: string;
  data: string;
}

export class SseReader {
  private buf = '';
  private decoder = new TextDecoder();
  private ended = false;

  constructor(private reader: ReadableStreamDefaultReader<Uint8Array>) {}

  static async open(url: string, signal?: AbortSignal): Promise<SseReader> {
    const res = await fetchRetrying(url, { headers: { accept: 'text/event-stream' }, cache: 'no-store', signal });
    if (!res.ok || !res.body) {
      const e = new Error(`queue ${url}: HTTP ${res.status}: ${await res.text().catch(() => '')}`);
      throw Object.assign(e, { status: res.status, retryAfter: retryAfterSeconds(res.headers.get('retry-after')) });
    }
    return new SseReader(res.body.getReader());
  }

  /** The next event, or null at the end of the stream. Comments are skipped. */
  async next(): Promise<SseEvent | null> {
    for (;;) {
      const cut = this.buf.search(/\r?\n\r?\n/);
      if (cut >= 0) {
        const block = this.buf.slice(0, cut);
        this.buf = this.buf.slice(cut + (this.buf[cut] === '\r' ? 4 : 2));
        let event = 'message';
        const data: string[] = [];
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let value = colon < 0 ? '' : line.slice(colon + 1);
          if (value.startsWith(' ')) value = value.slice(1);
          if (field === 'event') event = value;
          else if (field === 'data') data.push(value);
        }
        if (data.length) return { event, data: data.join('\n') };
        continue;
      }
      if (this.ended) return null;
      const { value, done } = await this.reader.read();
      if (done) {
        this.ended = true;
        this.buf += this.decoder.decode();
        if (!/\r?\n\r?\n/.test(this.buf)) this.buf += '\n\n';
      } else {
        this.buf += this.decoder.decode(value, { stream: true });
      }
    }
  }

  cancel(): void {
    this.reader.cancel().catch(() => {});
  }
}
