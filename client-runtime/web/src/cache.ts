// The local cache of winners (IndexedDB), so a reload starts with the kernel
// this browser last chose instead of the server's default. Any IndexedDB
// failure (private mode, quota, a blocked upgrade) only turns the cache off.

import type { KernelMeta } from './types.js';

const DB_NAME = 'webtune';
const STORE = 'kernels';

export interface CachedKernel {
  /** server | device key | op | shape | target */
  key: string;
  sha256: string;
  meta: KernelMeta;
  /** Wasm bytes or WGSL text. */
  bytes: ArrayBuffer | string;
  /** Whether this browser already tuned this kernel and reported. */
  tuned: boolean;
  /** Median of one call when it was chosen, µs (0 when never timed). */
  median_us: number;
  saved_at: number;
}


function req<T>(r: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

export class KernelCache {
  private constructor(private db: IDBDatabase | null) {}

  static async open(enabled: boolean): Promise<KernelCache> {
    if (!enabled || typeof indexedDB === 'undefined') return new KernelCache(null);
    try {
      const open = indexedDB.open(DB_NAME, 1);
      open.onupgradeneeded = () => open.result.createObjectStore(STORE, { keyPath: 'key' });
      return new KernelCache(await req(open));
    } catch {
      return new KernelCache(null);
    }
  }

  get enabled(): boolean {
    return this.db !== null;
  }

  async get(key: string): Promise<CachedKernel | null> {
    if (!this.db) return null;
    try {
      const r = await req(this.db.transaction(STORE, 'readonly').objectStore(STORE).get(key));
      return (r as CachedKernel | undefined) ?? null;
    } catch {
      return null;
    }
  }

  async put(entry: CachedKernel): Promise<void> {
    if (!this.db) return;
    try {
      const tx = this.db.transaction(STORE, 'readwrite');
      tx.objectStore(STORE).put(entry);
      await new Promise<void>((resolve, reject) => {
        tx.oncomplete = () => resolve();
        tx.onerror = () => reject(tx.error);
        tx.onabort = () => reject(tx.error);
      });
    } catch {
      // A cache write that fails costs a slower next start, nothing else.
    }
  }

  async clear(): Promise<void> {
    if (!this.db) return;
    try {
      await req(this.db.transaction(STORE, 'readwrite').objectStore(STORE).clear());
    } catch {
      // As above.
    }
  }
}
