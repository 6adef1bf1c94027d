import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { checkKey } from './keys.js';
import { S3ObjectStore } from './s3.js';
import { countingStream, type PutOptions } from './counting.js';

export { ContentMismatchError, countingStream, type PutOptions } from './counting.js';

export { checkKey };

/** A byte range of an object: start inclusive, end exclusive. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * Where large blobs (job artifacts) live. Keys are relative, slash-separated names chosen by
 * Cairn (never by a client). Two implementations: local disk (below) and S3-compatible object
 * storage (s3.ts). Both stream both ways; neither holds a whole object in memory.
 */
export interface ObjectStore {
  /**
   * Stores the stream under key (replacing what was there) and returns the bytes written.
   * Atomic for readers: until it resolves, a get sees the old object or none, never a part.
   */
  put(key: string, stream: Readable, opts?: PutOptions): Promise<{ size: number; sha256: string }>;
  /** The stored bytes (or only those of `range`), or null when there is no such key. */
  get(key: string, range?: ByteRange): Promise<Readable | null>;
  delete(key: string): Promise<void>;
  /** Size in bytes, or null when absent. */
  size(key: string): Promise<number | null>;
  /** Every stored key (in no particular order): what a backup copies. */
  keys(): AsyncIterable<string>;
}


/**
 * Objects as files under one directory. A put writes a temporary file next to the target and
 * renames it, so a reader sees the old bytes or the new ones, never a half-written file; two
 * processes sharing the directory see the same objects.
 */
export class LocalObjectStore implements ObjectStore {
  constructor(readonly root: string) {}

  private file(key: string) {
    checkKey(key);
    return path.join(this.root, ...key.split('/'));
  }

  async put(key: string, stream: Readable, opts: PutOptions = {}): Promise<{ size: number; sha256: string }> {
    const target = this.file(key);
    await fs.promises.mkdir(path.dirname(target), { recursive: true });
    const tmp = `${target}.${crypto.randomBytes(6).toString('hex')}.tmp`;
    const counted = countingStream(opts.expect);
    try {
      await pipeline(stream, counted.stream, fs.createWriteStream(tmp, { highWaterMark: 1024 * 1024 }));
      await fs.promises.rename(tmp, target);
    } catch (err) {
      await fs.promises.rm(tmp, { force: true });
      throw err;
    }
    return counted.result();
  }

  async get(key: string, range?: ByteRange): Promise<Readable | null> {
    const file = this.file(key);
    try {
      const handle = await fs.promises.open(file, 'r');
      if (range && range.end <= range.start) {
        await handle.close();
        return Readable.from([]);
      }
      return handle.createReadStream({ highWaterMark: 1024 * 1024, ...(range ? { start: range.start, end: range.end - 1 } : {}) });
    } catch (err: any) {
      if (err?.code === 'ENOENT') return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await fs.promises.rm(this.file(key), { force: true });
  }

  /**
   * Walks the directory without following links; a put's temporary file (`<name>.<hex>.tmp`) and
   * anything that is not a regular file under a valid key is no object.
   */
  async *keys(): AsyncGenerator<string> {
    const walk = async function* (dir: string, prefix: string): AsyncGenerator<string> {
      let entries: fs.Dirent[];
      try {
        entries = await fs.promises.readdir(dir, { withFileTypes: true });
      } catch (err: any) {
        if (err?.code === 'ENOENT') return;
        throw err;
      }
      entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      for (const e of entries) {
        const key = prefix ? `${prefix}/${e.name}` : e.name;
        if (e.isDirectory()) yield* walk(path.join(dir, e.name), key);
        else if (e.isFile() && !/\.[0-9a-f]{12}\.tmp$/.test(e.name)) yield key;
      }
    };
    yield* walk(this.root, '');
  }

  async size(key: string): Promise<number | null> {
    try {
      return (await fs.promises.stat(this.file(key))).size;
    } catch (err: any) {
      if (err?.code === 'ENOENT') return null;
      throw err;
    }
  }
}

const stores = new Map<string, ObjectStore>();

/**
 * The artifacts store of a Cairn process: the S3-compatible store of CAIRN_OBJECT_STORE_URL
 * when set, otherwise `$CAIRN_DATA_DIR/artifacts` on local disk.
 */
export function artifactStore(config: { dataDir: string; objectStoreUrl?: string | null }): ObjectStore {
  const id = config.objectStoreUrl ? `s3:${config.objectStoreUrl}` : `local:${path.join(config.dataDir, 'artifacts')}`;
  let store = stores.get(id);
  if (!store) {
    store = config.objectStoreUrl ? S3ObjectStore.fromUrl(config.objectStoreUrl) : new LocalObjectStore(path.join(config.dataDir, 'artifacts'));
    stores.set(id, store);
  }
  return store;
}

/**
 * Deletes stored objects whose rows are gone (called after the deleting transaction commits, so
 * a rolled-back delete never loses bytes). Best effort: a file left behind is only disk space.
 */
export async function deleteObjects(store: ObjectStore, keys: string[]): Promise<void> {
  for (const key of new Set(keys)) {
    try {
      await store.delete(key);
    } catch (err) {
      console.error(`could not delete stored object ${key}`, err);
    }
  }
}
