// One file out of a stored zip, without reading the archive: yauzl walks the central directory
// through ranged reads of the object store (small reads served from a few cached 64 KiB blocks,
// so S3 sees a handful of requests, not one per entry), then the single entry's bytes are
// streamed and inflated. Memory stays bounded whatever the archive's size.
import { isUtf8 } from 'node:buffer';
import { PassThrough, type Readable } from 'node:stream';
import yauzl from 'yauzl';
import type { ObjectStore } from './index.js';

const BLOCK = 64 * 1024;
const CACHED_BLOCKS = 8;

class StoreRangeReader extends yauzl.RandomAccessReader {
  private readonly blocks = new Map<number, Promise<Buffer>>();

  constructor(private readonly store: ObjectStore, private readonly key: string, private readonly total: number) {
    super();
  }

  private async fetch(start: number, end: number): Promise<Buffer> {
    const stream = await this.store.get(this.key, { start, end });
    if (!stream) throw new Error('the stored archive is gone');
    const chunks: Buffer[] = [];
    for await (const c of stream) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  }

  private block(index: number): Promise<Buffer> {
    let b = this.blocks.get(index);
    if (!b) {
      const start = index * BLOCK;
      b = this.fetch(start, Math.min(this.total, start + BLOCK));
      b.catch(() => this.blocks.delete(index));
      this.blocks.set(index, b);
      if (this.blocks.size > CACHED_BLOCKS) this.blocks.delete(this.blocks.keys().next().value as number);
    }
    return b;
  }

  private async small(start: number, end: number): Promise<Buffer> {
    const parts: Buffer[] = [];
    for (let i = Math.floor(start / BLOCK); i * BLOCK < end; i++) {
      const data = await this.block(i);
      const from = Math.max(start, i * BLOCK) - i * BLOCK;
      const to = Math.min(end, (i + 1) * BLOCK) - i * BLOCK;
      parts.push(data.subarray(from, to));
    }
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }

  override read(buffer: Buffer, offset: number, length: number, position: number, callback: (err: Error | null) => void) {
    if (length > 4 * BLOCK) return super.read(buffer, offset, length, position, callback as any);
    this.small(position, position + length).then(
      (data) => {
        if (data.length !== length) return callback(new Error('unexpected end of the stored archive'));
        data.copy(buffer, offset);
        callback(null);
      },
      (err) => callback(err),
    );
  }

  override _readStreamForRange(start: number, end: number): Readable {
    // yauzl wants a stream at once; the store answers asynchronously.
    const out = new PassThrough();
    this.store.get(this.key, { start, end }).then(
      (s) => {
        if (!s) return out.destroy(new Error('the stored archive is gone'));
        s.on('error', (err) => out.destroy(err));
        out.on('close', () => s.destroy());
        s.pipe(out);
      },
      (err) => out.destroy(err),
    );
    return out;
  }
}

/** An entry name as written, decoded like unzip does (UTF-8 when flagged or valid, else CP437-ish latin1). */
function entryName(entry: yauzl.Entry): string {
  const raw = entry.fileName as unknown as Buffer;
  return (entry.generalPurposeBitFlag & 0x800) !== 0 || isUtf8(raw) ? raw.toString('utf8') : raw.toString('latin1');
}

/**
 * An artifact path a client may ask for: relative, no `..` or `.` segments, no NUL, no
 * backslash tricks. Returns the path as archived (without a leading ./) or null (400).
 */
export function validArtifactPath(p: string): string | null {
  if (!p || p.includes('\0') || p.startsWith('/') || p.includes('\\') || /^[A-Za-z]:/.test(p)) return null;
  const segments = p.split('/');
  if (segments.some((s) => s === '..')) return null;
  const cleaned = segments.filter((s) => s !== '' && s !== '.');
  if (!cleaned.length) return null;
  return cleaned.join('/');
}

/** What the central directory says of one file entry. */
export interface ZipEntryInfo {
  name: string;
  /** Inflated size as declared; yauzl refuses to inflate past it (validateEntrySizes). */
  size: number;
  compressedSize: number;
  /** 0 stored, 8 deflated (others are not read). */
  method: number;
  crc32: number;
  encrypted: boolean;
}

/**
 * How to read the entry found: its bytes inflated, its stored bytes as they are (a deflated
 * entry's raw deflate data, to pass on without inflating), or not at all (the caller answers
 * from the entry's description alone).
 */
export type ZipEntryRead = 'inflate' | 'raw' | 'none';

export interface ZipEntryStream extends ZipEntryInfo {
  /** null when the read chosen was 'none'. */
  stream: Readable | null;
}

function openReader(reader: StoreRangeReader, size: number): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) =>
    yauzl.fromRandomAccessReader(reader, size, { lazyEntries: true, decodeStrings: false, validateEntrySizes: true, autoClose: false }, (err, z) =>
      err ? reject(err) : resolve(z!),
    ),
  );
}

/**
 * The file `path` (already validated) inside the zip stored under key, read as `read` chooses
 * once the entry is known (by default inflated), or null when the archive has no such file
 * (directories and symlinks are not files). Throws when the archive cannot be read as a zip.
 */
export async function openZipEntry(store: ObjectStore, key: string, size: number, path: string, read: (entry: ZipEntryInfo) => ZipEntryRead = () => 'inflate'): Promise<ZipEntryStream | null> {
  const reader = new StoreRangeReader(store, key, size);
  const zip = await openReader(reader, size);
  let found: yauzl.Entry | null = null;
  try {
    found = await new Promise<yauzl.Entry | null>((resolve, reject) => {
      zip.on('error', reject);
      zip.on('end', () => resolve(null));
      zip.on('entry', (entry: yauzl.Entry) => {
        const name = entryName(entry).replace(/^(\.\/)+/, '');
        const mode = (entry.externalFileAttributes >>> 16) & 0o170000;
        if (name === path && !name.endsWith('/') && mode !== 0o120000 && mode !== 0o040000) resolve(entry);
        else zip.readEntry();
      });
      zip.readEntry();
    });
  } catch (err) {
    zip.close();
    throw err;
  }
  if (!found) {
    zip.close();
    return null;
  }
  const entry = found;
  const info: ZipEntryInfo = { name: path, size: entry.uncompressedSize, compressedSize: entry.compressedSize, method: entry.compressionMethod, crc32: entry.crc32 >>> 0, encrypted: entry.isEncrypted() };
  const how = read(info);
  if (how === 'none') {
    zip.close();
    return { ...info, stream: null };
  }
  let stream: Readable;
  try {
    stream = await new Promise<Readable>((resolve, reject) =>
      zip.openReadStream(entry, how === 'raw' ? { decodeFileData: false } : {}, (err, s) => (err ? reject(err) : resolve(s!))),
    );
  } catch (err) {
    zip.close();
    throw err;
  }
  stream.once('close', () => zip.close());
  stream.once('end', () => zip.close());
  return { ...info, stream };
}
