import { PassThrough, type Readable } from 'node:stream';

/**
 * A streaming multipart/form-data reader (RFC 7578) for uploads that must never be held in
 * memory whole (job artifacts). Ordinary fields are collected as strings (small); each file
 * part is handed to `onFile` as a stream while the request is still arriving, and the next
 * part is read only when `onFile` has finished with it.
 */
export class MultipartError extends Error {}

export interface FilePart {
  field: string;
  filename: string;
  contentType: string | null;
  stream: Readable;
}

const MAX_HEADER_BYTES = 16 * 1024;
const MAX_FIELD_BYTES = 64 * 1024;
const MAX_PARTS = 100;

/** The boundary of a multipart/form-data Content-Type, or null. */
export function multipartBoundary(contentType: string | undefined): string | null {
  if (!contentType || !/^multipart\/form-data\s*;/i.test(contentType)) return null;
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType);
  return m ? (m[1] ?? m[2]) : null;
}

function parseHeaders(block: string): { field: string; filename: string | null; contentType: string | null } {
  let field: string | null = null;
  let filename: string | null = null;
  let contentType: string | null = null;
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'content-type') contentType = value;
    if (name !== 'content-disposition') continue;
    if (!/^form-data\b/i.test(value)) throw new MultipartError('part is not form-data');
    const nameMatch = /;\s*name="((?:[^"\\]|\\.)*)"/i.exec(value) ?? /;\s*name=([^;\s]+)/i.exec(value);
    if (nameMatch) field = nameMatch[1].replace(/\\(.)/g, '$1');
    const fileMatch = /;\s*filename="((?:[^"\\]|\\.)*)"/i.exec(value) ?? /;\s*filename=([^;\s]+)/i.exec(value);
    if (fileMatch) filename = fileMatch[1].replace(/\\(.)/g, '$1');
  }
  if (field === null) throw new MultipartError('part without a name');
  return { field, filename, contentType };
}

/**
 * Reads the whole body. Returns the ordinary fields; file parts go to onFile, which must read
 * its stream to the end (or throw, which aborts the parse).
 */
export async function readMultipart(
  source: AsyncIterable<Buffer | string>,
  boundary: string,
  onFile: (part: FilePart) => Promise<void>,
): Promise<Record<string, string>> {
  const fields: Record<string, string> = {};
  const dashBoundary = Buffer.from(`--${boundary}`);
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let buf: Buffer = Buffer.alloc(0);
  let state: 'preamble' | 'afterBoundary' | 'headers' | 'body' | 'done' = 'preamble';
  let parts = 0;
  // The part being read.
  let file: PassThrough | null = null;
  let consumer: Promise<void> | null = null;
  let consumerError: unknown = null;
  let fieldName = '';
  let fieldChunks: Buffer[] = [];
  let fieldSize = 0;

  const emit = async (data: Buffer) => {
    if (!data.length) return;
    if (file) {
      if (consumerError) throw consumerError;
      if (!file.write(data)) {
        const stream = file;
        let onDrain!: () => void;
        await Promise.race([new Promise<void>((r) => stream.once('drain', (onDrain = r))), consumer]);
        stream.off('drain', onDrain);
      }
      if (consumerError) throw consumerError;
    } else {
      fieldSize += data.length;
      if (fieldSize > MAX_FIELD_BYTES) throw new MultipartError(`field ${fieldName} is too large`);
      fieldChunks.push(data);
    }
  };
  const endPart = async () => {
    if (file) {
      file.end();
      await consumer;
      if (consumerError) throw consumerError;
      file = null;
      consumer = null;
    } else {
      fields[fieldName] = Buffer.concat(fieldChunks).toString('utf8');
    }
  };

  try {
    for await (const raw of source) {
      const chunk = typeof raw === 'string' ? Buffer.from(raw) : raw;
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      for (;;) {
        if (state === 'preamble') {
          // The first delimiter may open the body directly or follow a preamble line.
          const at = buf.indexOf(dashBoundary);
          if (at < 0) {
            buf = buf.subarray(Math.max(0, buf.length - dashBoundary.length));
            break;
          }
          buf = buf.subarray(at + dashBoundary.length);
          state = 'afterBoundary';
        }
        if (state === 'afterBoundary') {
          if (buf.length < 2) break;
          if (buf[0] === 0x2d && buf[1] === 0x2d) {
            state = 'done';
            break;
          }
          // Transport padding, then CRLF.
          const eol = buf.indexOf('\r\n');
          if (eol < 0) {
            if (buf.length > 256) throw new MultipartError('malformed boundary line');
            break;
          }
          buf = buf.subarray(eol + 2);
          state = 'headers';
        }
        if (state === 'headers') {
          const end = buf.indexOf('\r\n\r\n');
          if (end < 0) {
            if (buf.length > MAX_HEADER_BYTES) throw new MultipartError('part headers too large');
            break;
          }
          if (++parts > MAX_PARTS) throw new MultipartError('too many parts');
          const h = parseHeaders(buf.subarray(0, end).toString('utf8'));
          buf = buf.subarray(end + 4);
          if (h.filename !== null) {
            const stream = new PassThrough({ highWaterMark: 256 * 1024 });
            file = stream;
            consumer = onFile({ field: h.field, filename: h.filename, contentType: h.contentType, stream }).then(
              () => {
                // The consumer may stop early; what is left of the part is drained.
                stream.resume();
              },
              (err) => {
                consumerError = err;
                stream.resume();
              },
            );
          } else {
            fieldName = h.field;
            fieldChunks = [];
            fieldSize = 0;
          }
          state = 'body';
        }
        if (state === 'body') {
          const at = buf.indexOf(delimiter);
          if (at < 0) {
            // Keep what could be the start of a delimiter.
            const keep = delimiter.length - 1;
            if (buf.length > keep) {
              const out = buf.subarray(0, buf.length - keep);
              buf = buf.subarray(buf.length - keep);
              await emit(out);
            }
            break;
          }
          await emit(buf.subarray(0, at));
          buf = buf.subarray(at + delimiter.length);
          await endPart();
          state = 'afterBoundary';
          continue;
        }
        break;
      }
      if (state === 'done') break;
    }
    if (state !== 'done') throw new MultipartError('unexpected end of multipart body');
  } catch (err) {
    if (file) {
      (file as PassThrough).destroy();
      await (consumer as Promise<void> | null)?.catch(() => {});
    }
    throw err;
  }
  return fields;
}
