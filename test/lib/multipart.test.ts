import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MultipartError, multipartBoundary, readMultipart } from '../../src/lib/multipart.js';

async function* chunks(buf: Buffer, size: number) {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

function body(boundary: string) {
  const file = Buffer.alloc(5000);
  for (let i = 0; i < file.length; i++) file[i] = i % 251;
  // Bytes that look like the start of a delimiter inside the file.
  file.write(`\r\n--${boundary.slice(0, -1)}`, 1000, 'latin1');
  const text = Buffer.concat([
    Buffer.from(`preamble\r\n--${boundary}\r\nContent-Disposition: form-data; name="expire_in"\r\n\r\n1 week\r\n`),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a b.zip"\r\nContent-Type: application/zip\r\n\r\n`),
    file,
    Buffer.from(`\r\n--${boundary}--\r\nepilogue`),
  ]);
  return { text, file };
}

describe('streaming multipart reader', () => {
  it('reads fields and streams files whatever the chunking', async () => {
    const boundary = '----X7abc';
    const { text, file } = body(boundary);
    for (const size of [1, 7, 64, 100000]) {
      const files: Array<{ field: string; filename: string; data: Buffer; type: string | null }> = [];
      const fields = await readMultipart(chunks(text, size), boundary, async (part) => {
        const parts: Buffer[] = [];
        for await (const c of part.stream) parts.push(c as Buffer);
        files.push({ field: part.field, filename: part.filename, data: Buffer.concat(parts), type: part.contentType });
      });
      assert.deepEqual(fields, { expire_in: '1 week' });
      assert.equal(files.length, 1);
      assert.equal(files[0].filename, 'a b.zip');
      assert.equal(files[0].type, 'application/zip');
      assert.deepEqual(files[0].data, file, `chunk size ${size}`);
    }
  });

  it('refuses a truncated body and passes a consumer error on', async () => {
    const { text } = body('b');
    await assert.rejects(readMultipart(chunks(text.subarray(0, 3000), 100), 'b', async (p) => void p.stream.resume()), MultipartError);
    await assert.rejects(
      readMultipart(chunks(text, 100), 'b', async () => {
        throw new Error('too large');
      }),
      /too large/,
    );
  });

  it('finds the boundary in a Content-Type', () => {
    assert.equal(multipartBoundary('multipart/form-data; boundary=abc'), 'abc');
    assert.equal(multipartBoundary('multipart/form-data; charset=utf-8; boundary="a b"'), 'a b');
    assert.equal(multipartBoundary('application/json'), null);
    assert.equal(multipartBoundary(undefined), null);
  });
});
