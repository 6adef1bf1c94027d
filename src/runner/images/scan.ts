// How big a layer becomes once unpacked, read before anything is unpacked: the layer (a tar,
// gzip-compressed or not) is streamed through a tar header reader that adds up the entries'
// sizes (plus a block per entry, so a million empty files count too) and stops as soon as the
// total passes the limit: a gzip bomb is refused after reading at most `limit` bytes of it.
import fs from 'node:fs';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';

export class LayerTooBigError extends Error {}
export class LayerFormatError extends Error {}

const BLOCK = 512;
/** Largest pax or GNU long-name header read (they hold a few names and numbers). */
const META_MAX = 1024 * 1024;

function parseNumber(field: Buffer): number {
  // GNU base-256: the first byte's high bit set, the rest a big-endian number.
  if (field[0] & 0x80) {
    let n = field[0] & 0x7f;
    for (let i = 1; i < field.length; i++) n = n * 256 + field[i];
    return n;
  }
  const s = field.toString('ascii').replace(/[\0 ]+$/g, '').replace(/^[\0 ]+/, '');
  if (!s) return 0;
  if (!/^[0-7]+$/.test(s)) throw new LayerFormatError(`bad number field ${JSON.stringify(s)} in a tar header`);
  return parseInt(s, 8);
}

function paxSize(body: Buffer): number | null {
  let size: number | null = null;
  let at = 0;
  while (at < body.length) {
    const space = body.indexOf(0x20, at);
    if (space < 0) break;
    const len = Number(body.toString('ascii', at, space));
    if (!Number.isSafeInteger(len) || len <= 0 || at + len > body.length) throw new LayerFormatError('bad pax header in a layer');
    const record = body.toString('utf8', space + 1, at + len - 1);
    const eq = record.indexOf('=');
    if (eq > 0 && record.slice(0, eq) === 'size') {
      const n = Number(record.slice(eq + 1));
      if (!Number.isSafeInteger(n) || n < 0) throw new LayerFormatError('bad pax size in a layer');
      size = n;
    }
    at += len;
  }
  return size;
}

/** A Transform that swallows a tar stream and counts what it would unpack to. */
class TarCounter extends Transform {
  bytes = 0;
  entries = 0;
  private pending = Buffer.alloc(0);
  /** Content bytes still to skip (including padding). */
  private skip = 0;
  /** A pax/GNU header's content being collected. */
  private meta: { kind: string; need: number; chunks: Buffer[]; got: number; padding: number } | null = null;
  private nextSize: number | null = null;
  private ended = false;

  constructor(private readonly limit: number) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.consume(chunk);
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  private consume(chunk: Buffer): void {
    let buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = Buffer.alloc(0);
    while (buf.length && !this.ended) {
      if (this.meta) {
        const m = this.meta;
        const take = Math.min(m.need - m.got, buf.length);
        m.chunks.push(buf.subarray(0, take));
        m.got += take;
        buf = buf.subarray(take);
        if (m.got === m.need) {
          if (m.kind === 'x') this.nextSize = paxSize(Buffer.concat(m.chunks)) ?? this.nextSize;
          this.meta = null;
          this.skip = m.padding;
        }
        continue;
      }
      if (this.skip) {
        const take = Math.min(this.skip, buf.length);
        this.skip -= take;
        buf = buf.subarray(take);
        continue;
      }
      if (buf.length < BLOCK) {
        this.pending = Buffer.from(buf);
        return;
      }
      const header = buf.subarray(0, BLOCK);
      buf = buf.subarray(BLOCK);
      if (header.every((b) => b === 0)) {
        // The end-of-archive marker; whatever follows is padding.
        this.ended = true;
        return;
      }
      let sum = 0;
      for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i];
      if (parseNumber(header.subarray(148, 156)) !== sum) throw new LayerFormatError('a layer is not a valid tar archive (bad header checksum)');
      const type = String.fromCharCode(header[156] || 0x30);
      let size = parseNumber(header.subarray(124, 136));
      const padding = (BLOCK - (size % BLOCK)) % BLOCK;
      if (type === 'x' || type === 'g' || type === 'L' || type === 'K') {
        if (size > META_MAX) throw new LayerFormatError('a layer has an oversized pax or long-name header');
        if (type === 'g' || type === 'K' || type === 'L') this.skip = size + padding;
        else this.meta = { kind: type, need: size, chunks: [], got: 0, padding };
        if (size === 0) this.meta = null;
        continue;
      }
      if (this.nextSize !== null) {
        size = this.nextSize;
        this.nextSize = null;
      }
      this.entries++;
      // Only regular files (and old-style '\0' files, contiguous '7', GNU sparse 'S') carry data.
      const hasData = type === '0' || type === '7' || type === 'S';
      this.bytes += BLOCK + (hasData ? size : 0);
      if (this.bytes > this.limit) throw new LayerTooBigError(`more than ${this.limit} bytes`);
      this.skip = size + (BLOCK - (size % BLOCK)) % BLOCK;
    }
  }

  override _flush(done: TransformCallback): void {
    done();
  }
}

export interface LayerSize {
  bytes: number;
  entries: number;
}

/**
 * What the layer blob `file` unpacks to, at most `limit` bytes (LayerTooBigError beyond it).
 * Gzip is recognised by its magic bytes; anything else is read as a plain tar.
 */
export async function measureLayer(file: string, limit: number, signal?: AbortSignal): Promise<LayerSize> {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  const magic = Buffer.alloc(4);
  let gzip: boolean;
  try {
    const n = fs.readSync(fd, magic, 0, 4, 0);
    gzip = n >= 2 && magic[0] === 0x1f && magic[1] === 0x8b;
    if (n >= 4 && magic.readUInt32BE(0) === 0x28b52ffd) throw new LayerFormatError('zstd-compressed layers are not supported (umoci 0.4 reads gzip and plain tar)');
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
  const counter = new TarCounter(limit);
  const source = fs.createReadStream('', { fd, autoClose: true });
  const sink = new Transform({ transform: (_c, _e, cb) => cb() });
  sink.resume();
  try {
    if (gzip) await pipeline(source, zlib.createGunzip(), counter, sink, { signal });
    else await pipeline(source, counter, sink, { signal });
  } catch (err) {
    if (err instanceof LayerTooBigError || err instanceof LayerFormatError) throw err;
    if ((err as { code?: string }).code === 'Z_DATA_ERROR' || (err as { code?: string }).code === 'Z_BUF_ERROR') throw new LayerFormatError(`a layer is not valid gzip: ${(err as Error).message}`);
    throw err;
  }
  return { bytes: counter.bytes, entries: counter.entries };
}
