import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { Cairn } from '../../context.js';
import type { CiJobArtifact } from '../../db/schema/ci.js';
import { notFound } from '../../plugins/errors.js';
import { artifactStore } from '../../storage/index.js';

/** RFC 6266: an ASCII fallback and the UTF-8 name. */
export function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/**
 * Streams a job's archive from the object store as a download (never rendered by a browser):
 * the Jobs API and the runner protocol (a job fetching its dependencies' artifacts) both send it
 * this way. 404 when there is none, or its object is gone.
 */
export async function sendArchive(cairn: Pick<Cairn, 'config'>, reply: FastifyReply, artifact: CiJobArtifact | null | undefined) {
  if (!artifact) throw notFound();
  const stream = await artifactStore(cairn.config).get(artifact.store_key);
  if (!stream) throw notFound();
  return reply
    .code(200)
    .type('application/zip')
    .header('Content-Length', String(artifact.size))
    .header('Content-Disposition', contentDisposition(artifact.file_name))
    .header('X-Content-Type-Options', 'nosniff')
    .send(stream);
}

/**
 * Does an Accept-Encoding header take gzip (RFC 9110 §12.5.3: gzip or x-gzip, or `*` when
 * gzip is not named, with a q above 0)?
 */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  if (!header) return false;
  let star = false;
  for (const part of (Array.isArray(header) ? header.join(',') : header).split(',')) {
    const [name, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    const takes = Number.isFinite(weight) && weight > 0;
    if (name === 'gzip' || name === 'x-gzip') return takes;
    if (name === '*') star = takes;
  }
  return star;
}

const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
const GZIP_TRAILER = 8;

/**
 * A zip entry's deflate data as a gzip member (RFC 1952), without inflating it: gzip is a header,
 * the same raw deflate stream, then the CRC-32 and the size modulo 2^32 that the zip's central
 * directory already states. So a client that takes gzip gets the file for the cost of copying
 * its compressed bytes.
 */
export function gzipMember(deflated: Readable, crc32: number, size: number): { stream: Readable } {
  const trailer = Buffer.alloc(GZIP_TRAILER);
  trailer.writeUInt32LE(crc32 >>> 0, 0);
  trailer.writeUInt32LE(size % 2 ** 32, 4);
  const stream = Readable.from(
    (async function* () {
      yield GZIP_HEADER;
      for await (const chunk of deflated) yield chunk as Buffer;
      yield trailer;
    })(),
    { objectMode: false },
  );
  stream.once('close', () => deflated.destroy());
  return { stream };
}

/** The length of gzipMember's stream for this many bytes of deflate data. */
export const gzipLength = (compressedSize: number) => GZIP_HEADER.length + compressedSize + GZIP_TRAILER;
