// The two object stores behind one interface: local disk and S3 (a real S3-speaking server,
// s3rver, on a free port). Same cases for both: streamed put and get, ranges, replace, atomic
// puts (a failing source leaves nothing visible), delete, size, keys that could climb refused,
// and a single zip entry read through ranged reads.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import yazl from 'yazl';
import { ContentMismatchError, LocalObjectStore, type ObjectStore } from '../../src/storage/index.js';
import { parseObjectStoreUrl, S3ObjectStore } from '../../src/storage/s3.js';
import { openZipEntry, validArtifactPath } from '../../src/storage/zip.js';
import { startS3 } from '../helpers/s3.js';

async function readAll(s: Readable | null): Promise<Buffer> {
  assert.ok(s, 'a stream');
  const chunks: Buffer[] = [];
  for await (const c of s) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** A zip built in memory: entries name -> content (a symlink when content is {link}). */
async function makeZip(entries: Record<string, Buffer | string | { link: string }>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const [name, content] of Object.entries(entries)) {
    if (name.endsWith('/')) zip.addEmptyDirectory(name);
    else if (typeof content === 'object' && 'link' in content) zip.addBuffer(Buffer.from(content.link), name, { mode: 0o120777 });
    else zip.addBuffer(Buffer.from(content), name);
  }
  zip.end();
  return readAll(zip.outputStream as unknown as Readable);
}

function failingSource(after: number): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= after) {
        this.destroy(new Error('source broke'));
        return;
      }
      sent += 64 * 1024;
      this.push(Buffer.alloc(64 * 1024, 7));
    },
  });
}

function storeCases(name: string, make: () => ObjectStore) {
  describe(name, () => {
    test('put streams in, get streams out, with sha256 and size', async () => {
      const store = make();
      const data = crypto.randomBytes(3 * 1024 * 1024 + 17);
      const put = await store.put('p/1/archive', Readable.from([data.subarray(0, 1000), data.subarray(1000)]));
      assert.equal(put.size, data.length);
      assert.equal(put.sha256, crypto.createHash('sha256').update(data).digest('hex'));
      assert.deepEqual(await readAll(await store.get('p/1/archive')), data);
      assert.equal(await store.size('p/1/archive'), data.length);
      assert.deepEqual(await readAll(await store.get('p/1/archive', { start: 10, end: 20 })), data.subarray(10, 20));
      assert.deepEqual(await readAll(await store.get('p/1/archive', { start: data.length - 5, end: data.length })), data.subarray(data.length - 5));
      assert.equal((await readAll(await store.get('p/1/archive', { start: 5, end: 5 }))).length, 0);
    });

    test('a put replaces; a missing key is null; delete is idempotent', async () => {
      const store = make();
      await store.put('p/2/x', Readable.from([Buffer.from('one')]));
      await store.put('p/2/x', Readable.from([Buffer.from('two!')]));
      assert.equal((await readAll(await store.get('p/2/x'))).toString(), 'two!');
      assert.equal(await store.get('p/2/nothing'), null);
      assert.equal(await store.size('p/2/nothing'), null);
      await store.delete('p/2/x');
      await store.delete('p/2/x');
      assert.equal(await store.get('p/2/x'), null);
    });

    test('a put whose source fails leaves no object (old bytes stay)', async () => {
      const store = make();
      await assert.rejects(store.put('p/3/new', failingSource(20 * 1024 * 1024)), /source broke/);
      assert.equal(await store.size('p/3/new'), null);
      await store.put('p/3/old', Readable.from([Buffer.from('old bytes')]));
      await assert.rejects(store.put('p/3/old', failingSource(256 * 1024)), /source broke/);
      assert.equal((await readAll(await store.get('p/3/old'))).toString(), 'old bytes');
    });

    test('keys lists every stored object (what a backup copies), and none that is gone', async () => {
      const store = make();
      await store.put('p/5/a', Readable.from([Buffer.from('a')]));
      await store.put('p/5/deep/b', Readable.from([Buffer.from('b')]));
      await store.put('p/5/gone', Readable.from([Buffer.from('c')]));
      await store.delete('p/5/gone');
      const keys: string[] = [];
      for await (const k of store.keys()) keys.push(k);
      assert.deepEqual(keys.filter((k) => k.startsWith('p/5/')).sort(), ['p/5/a', 'p/5/deep/b']);
    });

    test('a put with expect stores only the expected bytes (size and sha256); a mismatch leaves the old object', async () => {
      const store = make();
      const good = crypto.randomBytes(3 * 1024 * 1024 + 7);
      const sha256 = crypto.createHash('sha256').update(good).digest('hex');
      const expect = { size: good.length, sha256 };
      await store.put('p/4/old', Readable.from([Buffer.from('old bytes')]));
      const wrong = Buffer.from(good);
      wrong[12345] ^= 1;
      await assert.rejects(store.put('p/4/old', Readable.from([wrong]), { expect }), (e: any) => e instanceof ContentMismatchError && e.reason === 'sha256');
      await assert.rejects(store.put('p/4/old', Readable.from([good, Buffer.from('x')]), { expect }), (e: any) => e instanceof ContentMismatchError && e.reason === 'too_large');
      await assert.rejects(store.put('p/4/old', Readable.from([good.subarray(1)]), { expect }), (e: any) => e instanceof ContentMismatchError && e.reason === 'size');
      assert.equal((await readAll(await store.get('p/4/old'))).toString(), 'old bytes');
      assert.equal(await store.size('p/4/new'), null);
      assert.deepEqual(await store.put('p/4/new', Readable.from([good]), { expect }), { size: good.length, sha256 });
      assert.ok((await readAll(await store.get('p/4/new'))).equals(good));
    });

    test('keys that could climb out are refused', async () => {
      const store = make();
      for (const key of ['../x', 'a/../../b', '/abs', 'a//b', 'a/./b', 'nul\0', '']) {
        await assert.rejects(store.put(key, Readable.from([Buffer.from('x')])), /invalid object key/, key);
        await assert.rejects(store.get(key), /invalid object key/, key);
      }
    });

    test('one zip entry through ranged reads: inflated, missing ones null, links and directories are not files', async () => {
      const store = make();
      const big = crypto.randomBytes(1024 * 1024);
      const entries: Record<string, Buffer | string | { link: string }> = { 'dir/': '', 'dir/a.txt': 'alpha\n', 'big.bin': big, 'link': { link: 'dir/a.txt' } };
      for (let i = 0; i < 2000; i++) entries[`many/f${i}.txt`] = `file ${i}\n`;
      const zip = await makeZip(entries);
      await store.put('p/4/archive', Readable.from([zip]));
      const open = (p: string) => openZipEntry(store, 'p/4/archive', zip.length, p);
      const a = await open('dir/a.txt');
      assert.equal(a?.size, 6);
      assert.equal((await readAll(a!.stream)).toString(), 'alpha\n');
      const b = await open('big.bin');
      assert.deepEqual(await readAll(b!.stream), big);
      assert.equal((await readAll((await open('many/f1999.txt'))!.stream)).toString(), 'file 1999\n');
      assert.equal(await open('dir/missing'), null);
      assert.equal(await open('dir'), null);
      assert.equal(await open('link'), null);
      await store.put('p/4/notzip', Readable.from([Buffer.from('not a zip at all')]));
      await assert.rejects(openZipEntry(store, 'p/4/notzip', 16, 'x'));
    });
  });
}

test('artifact paths: traversal, absolute, NUL and empty are invalid', () => {
  assert.equal(validArtifactPath('dir/a.txt'), 'dir/a.txt');
  assert.equal(validArtifactPath('./dir/./a.txt'), 'dir/a.txt');
  for (const bad of ['../etc/passwd', 'a/../../b', 'a/..', '/etc/passwd', 'a\0b', '', '.', 'C:/x', 'a\\..\\b']) assert.equal(validArtifactPath(bad), null, bad);
});

test('CAIRN_OBJECT_STORE_URL is parsed', () => {
  const s = parseObjectStoreUrl('s3://AK%2FX:SE%40CRET@minio.local:9000/bucket/some/prefix?region=eu-west-1&path_style=true&tls=false');
  assert.deepEqual(s, {
    endpoint: 'http://minio.local:9000', region: 'eu-west-1', bucket: 'bucket', prefix: 'some/prefix/',
    credentials: { accessKeyId: 'AK/X', secretAccessKey: 'SE@CRET' }, forcePathStyle: true,
  });
  const aws = parseObjectStoreUrl('s3:///my-bucket?region=us-east-2');
  assert.equal(aws.endpoint, null);
  assert.equal(aws.credentials, null);
  assert.equal(aws.forcePathStyle, false);
  assert.throws(() => parseObjectStoreUrl('http://host/bucket'), /s3:\/\//);
  assert.throws(() => parseObjectStoreUrl('s3://host/'), /no bucket/);
});

const localRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-store-'));
after(() => fs.rmSync(localRoot, { recursive: true, force: true }));
storeCases('local disk', () => new LocalObjectStore(localRoot));

let s3: Awaited<ReturnType<typeof startS3>>;
let s3Store: S3ObjectStore;
before(async () => {
  s3 = await startS3();
  s3Store = S3ObjectStore.fromUrl(s3.url);
});
after(async () => {
  s3Store?.destroy();
  await s3?.close();
});
storeCases('S3 (s3rver)', () => s3Store);
