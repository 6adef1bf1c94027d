import crypto from 'node:crypto';
import { Transform } from 'node:stream';

/** What a put must find in the bytes before it stores them (content-addressed objects: Git LFS). */
export interface PutOptions {
  /** Exactly this many bytes (the put fails as soon as there are more), whose sha256 is this. */
  expect?: { size: number; sha256: string };
}

/** The bytes of a put did not match its `expect`: nothing was stored. */
export class ContentMismatchError extends Error {
  constructor(readonly reason: 'too_large' | 'size' | 'sha256', message: string) {
    super(message);
  }
}

/**
 * A pass-through that counts and hashes the bytes, and (with `expect`) fails the stream as soon as
 * there are too many and, at its end, unless the size and sha256 match: the store then discards
 * what it wrote. One hash per put, whether checked or not.
 */
export function countingStream(expect?: PutOptions['expect']): { stream: Transform; result: () => { size: number; sha256: string } } {
  const hash = crypto.createHash('sha256');
  let size = 0;
  let digest: string | undefined;
  const stream = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      if (expect && size > expect.size) return cb(new ContentMismatchError('too_large', `more than the expected ${expect.size} bytes`));
      hash.update(chunk);
      cb(null, chunk);
    },
    flush(cb) {
      digest = hash.digest('hex');
      if (expect && size !== expect.size) return cb(new ContentMismatchError('size', `${size} bytes, not the expected ${expect.size}`));
      if (expect && digest !== expect.sha256) return cb(new ContentMismatchError('sha256', 'the sha256 of the bytes is not the expected one'));
      cb();
    },
  });
  return { stream, result: () => ({ size, sha256: digest ?? hash.digest('hex') }) };
}
