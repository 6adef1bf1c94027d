// The backup archive's container: a POSIX tar (ustar headers, a pax header for names ustar cannot
// hold), optionally gzipped. Written and read as streams: an entry's bytes pass through once and
// are never held whole. The reader is for restore, where the archive is untrusted input: it
// hands out names and types as they are written and parses sizes strictly; deciding what an entry
// may be is the caller's (src/backup/restore.ts accepts regular files under known names only).
import crypto from 'node:crypto';
import fs from 'node:fs';
import { once } from 'node:events';
import { Readable, type Writable } from 'node:stream';
import { createGunzip } from 'node:zlib';

const BLOCK = 512;

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name: string, size: number, typeflag: string, mtime: number): Buffer {
  const h = Buffer.alloc(BLOCK);
  h.write(name, 0, 100, 'utf8');
  h.write(octal(typeflag === '5' ? 0o700 : 0o600, 8), 100, 8, 'ascii');
  h.write(octal(0, 8), 108, 8, 'ascii');
  h.write(octal(0, 8), 116, 8, 'ascii');
  h.write(octal(size, 12), 124, 12, 'ascii');
  h.write(octal(mtime, 12), 136, 12, 'ascii');
  h.write('        ', 148, 8, 'ascii');
  h.write(typeflag, 156, 1, 'ascii');
  h.write('ustar\0', 257, 6, 'ascii');
  h.write('00', 263, 2, 'ascii');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(octal(sum, 7) + ' ', 148, 8, 'ascii');
  return h;
}

/** A pax record "LEN key=value\n", LEN counting itself. */
function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body) + 1;
  while (String(len).length + Buffer.byteLength(body) !== len) len = String(len).length + Buffer.byteLength(body);
  return Buffer.from(`${len}${body}`, 'utf8');
}

const padding = (size: number) => Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK);

export interface WrittenEntry {
  name: string;
  size: number;
  sha256: string;
}

/** Writes tar entries to `sink`, with backpressure; each entry's SHA-256 is computed on the way. */
export class TarWriter {
  private readonly mtime = Math.floor(Date.now() / 1000);
  constructor(private readonly sink: Writable) {}

  private async write(chunk: Buffer): Promise<void> {
    if (!this.sink.write(chunk)) await once(this.sink, 'drain');
  }

  private async head(name: string, size: number): Promise<void> {
    const ascii = /^[\x20-\x7e]*$/.test(name);
    if (Buffer.byteLength(name) > 99 || !ascii || size > 0o77777777777) {
      const pax = Buffer.concat([paxRecord('path', name), ...(size > 0o77777777777 ? [paxRecord('size', String(size))] : [])]);
      await this.write(header('PaxHeader', pax.length, 'x', this.mtime));
      await this.write(pax);
      await this.write(padding(pax.length));
    }
    await this.write(header(ascii ? name.slice(0, 99) : 'entry', size > 0o77777777777 ? 0 : size, '0', this.mtime));
  }

  async addBuffer(name: string, content: Buffer): Promise<WrittenEntry> {
    await this.head(name, content.length);
    await this.write(content);
    await this.write(padding(content.length));
    return { name, size: content.length, sha256: crypto.createHash('sha256').update(content).digest('hex') };
  }

  /** A file's bytes as they are when opened (its size from the open file, so a later rename cannot change it). */
  async addFile(name: string, file: string): Promise<WrittenEntry> {
    const handle = await fs.promises.open(file, 'r');
    try {
      const { size } = await handle.stat();
      await this.head(name, size);
      const hash = crypto.createHash('sha256');
      const buf = Buffer.alloc(1 << 20);
      let left = size;
      while (left > 0) {
        const { bytesRead } = await handle.read(buf, 0, Math.min(buf.length, left), size - left);
        if (bytesRead === 0) throw new Error(`${file} shrank while it was archived`);
        const chunk = Buffer.from(buf.subarray(0, bytesRead));
        hash.update(chunk);
        await this.write(chunk);
        left -= bytesRead;
      }
      await this.write(padding(size));
      return { name, size, sha256: hash.digest('hex') };
    } finally {
      await handle.close();
    }
  }

  /** The end-of-archive marker (two zero blocks); the caller ends the sink. */
  async finish(): Promise<void> {
    await this.write(Buffer.alloc(BLOCK * 2));
  }
}

/** Exactly-n-bytes reads over a stream of chunks. */
class ByteReader {
  private buffered: Buffer[] = [];
  private length = 0;
  private readonly it: AsyncIterator<Buffer>;
  private done = false;
  constructor(source: AsyncIterable<Buffer>) {
    this.it = source[Symbol.asyncIterator]();
  }

  private async fill(n: number): Promise<void> {
    while (this.length < n && !this.done) {
      const r = await this.it.next();
      if (r.done) this.done = true;
      else {
        this.buffered.push(r.value);
        this.length += r.value.length;
      }
    }
  }

  /** Up to n bytes (fewer only at the end of the stream). */
  async read(n: number): Promise<Buffer> {
    await this.fill(n);
    const all = Buffer.concat(this.buffered);
    const out = all.subarray(0, n);
    const rest = all.subarray(out.length);
    this.buffered = rest.length ? [rest] : [];
    this.length = rest.length;
    return out;
  }

  /** The next n bytes as chunks of at most 1 MiB; throws when the stream ends first. */
  async *chunks(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (!this.length) await this.fill(1);
      if (!this.length) throw new TarError('the archive ends inside an entry (truncated)');
      const head = this.buffered[0];
      const take = Math.min(left, head.length, 1 << 20);
      const chunk = head.subarray(0, take);
      if (take === head.length) this.buffered.shift();
      else this.buffered[0] = head.subarray(take);
      this.length -= take;
      left -= take;
      yield chunk;
    }
  }

  async skip(n: number): Promise<void> {
    for await (const _ of this.chunks(n));
  }
}

/** The archive is not a tar this reader accepts. */
export class TarError extends Error {}

export interface TarEntry {
  name: string;
  /** The typeflag as written ('0' a regular file, '2' a symlink, '5' a directory...). */
  type: string;
  size: number;
  linkname: string;
  /** The entry's bytes; must be consumed (or left: the reader skips what is left) before the next entry. */
  body: AsyncGenerator<Buffer>;
}

function parseOctal(field: Buffer, what: string): number {
  const text = field.toString('latin1').replace(/\0.*$/s, '').trim();
  if (!/^[0-7]{1,12}$/.test(text)) throw new TarError(`bad ${what} field in a tar header`);
  return parseInt(text, 8);
}

function cString(field: Buffer): string {
  const end = field.indexOf(0);
  return field.subarray(0, end < 0 ? field.length : end).toString('utf8');
}

function parsePax(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let pos = 0;
  while (pos < data.length) {
    const sp = data.indexOf(0x20, pos);
    if (sp < 0) throw new TarError('bad pax header');
    const len = Number(data.subarray(pos, sp).toString('ascii'));
    if (!Number.isInteger(len) || len <= sp - pos || pos + len > data.length) throw new TarError('bad pax header');
    const record = data.subarray(sp + 1, pos + len - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq < 0) throw new TarError('bad pax header');
    out[record.slice(0, eq)] = record.slice(eq + 1);
    pos += len;
  }
  return out;
}

const MAX_PAX = 1 << 20;

/**
 * The entries of a tar stream (gunzipped by the caller). Pax headers ('x') apply to the entry
 * after them; global ones ('g') are read and ignored. Sizes are checked to be plain numbers.
 */
export async function* readTar(source: AsyncIterable<Buffer>): AsyncGenerator<TarEntry> {
  const reader = new ByteReader(source);
  let pax: Record<string, string> = {};
  for (;;) {
    const block = await reader.read(BLOCK);
    if (block.length === 0) return; // no end marker: accepted, as tar does
    if (block.length < BLOCK) throw new TarError('the archive ends inside a header (truncated)');
    if (block.every((b) => b === 0)) return;
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i];
    if (parseOctal(block.subarray(148, 156), 'checksum') !== sum) throw new TarError('a tar header fails its checksum (not a tar archive, or damaged)');
    const type = String.fromCharCode(block[156] || 0x30);
    let size = parseOctal(block.subarray(124, 136), 'size');
    if (type === 'x' || type === 'g') {
      if (size > MAX_PAX) throw new TarError('a pax header is too large');
      const data = Buffer.concat(await arrayOf(reader.chunks(size)));
      await reader.skip((BLOCK - (size % BLOCK)) % BLOCK);
      if (type === 'x') pax = parsePax(data);
      continue;
    }
    const prefix = block.subarray(257, 263).toString('latin1').startsWith('ustar') ? cString(block.subarray(345, 500)) : '';
    let name = cString(block.subarray(0, 100));
    if (prefix) name = `${prefix}/${name}`;
    if (pax.path !== undefined) name = pax.path;
    if (pax.size !== undefined) {
      if (!/^\d{1,15}$/.test(pax.size)) throw new TarError('bad size in a pax header');
      size = Number(pax.size);
    }
    const linkname = pax.linkpath ?? cString(block.subarray(157, 257));
    pax = {};
    const chunks = reader.chunks(size);
    // Not `yield*`: a consumer that stops early must not end `chunks`, whose rest is skipped below.
    const body = (async function* () {
      for (;;) {
        const r = await chunks.next();
        if (r.done) return;
        yield r.value;
      }
    })();
    yield { name, type, size, linkname, body };
    for await (const _ of chunks); // whatever the consumer left
    await reader.skip((BLOCK - (size % BLOCK)) % BLOCK);
  }
}

async function arrayOf<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** The archive's bytes, gunzipped when they start with gzip's magic number. */
export async function* archiveBytes(stream: Readable): AsyncGenerator<Buffer> {
  const it = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const first = await it.next();
  if (first.done) return;
  const rest = (async function* () {
    yield first.value as Buffer;
    for (;;) {
      const r = await it.next();
      if (r.done) return;
      yield r.value as Buffer;
    }
  })();
  const head = first.value as Buffer;
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) {
    const gunzip = createGunzip();
    const src = Readable.from(rest);
    src.on('error', (err) => gunzip.destroy(err));
    yield* src.pipe(gunzip) as AsyncIterable<Buffer>;
  } else {
    yield* rest;
  }
}
