// One file out of a job's archive when the file inflates to far more than it stores: a zip bomb
// entry (1 GiB of zeros in ~1 MiB) must cost the server next to nothing per request, on local
// disk and on S3 (s3rver), whatever the client sends as Accept-Encoding.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import zlib from 'node:zlib';
import type { Project } from '../../src/db/schema/core.js';
import { artifactStore } from '../../src/storage/index.js';
import type { S3ObjectStore } from '../../src/storage/s3.js';
import { acceptsGzip } from '../../src/api/job_artifacts/send.js';
import { createTestContext, ROOT_TOKEN, type TestContext } from '../helpers/app.js';
import { startS3 } from '../helpers/s3.js';

const MiB = 1024 * 1024;
const BOMB_SIZE = 1024 * MiB;
/** CRC-32 of 2^30 zero bytes (zlib.crc32 over them; computing it here would cost half a second). */
const BOMB_CRC = 0x5b64c2b0;
/** Small enough that the 4 MiB entry is sent inflated to any client, the bomb only as gzip. */
const LIMIT = 8 * MiB;

interface ZipEntrySpec {
  name: string;
  method: 0 | 8;
  data: Buffer[];
  crc: number;
  size: number;
}

/**
 * A zip of already-encoded entries. The bomb's deflate stream is one 1 MiB block of zeros
 * deflated and ended with a full flush (which resets the compressor, so the same bytes follow
 * any such block) repeated 1024 times, then an empty final block: built in milliseconds.
 */
function zipOf(entries: ZipEntrySpec[]): Buffer[] {
  const out: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name);
    const compressed = e.data.reduce((n, b) => n + b.length, 0);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(e.method, 8);
    local.writeUInt16LE(0x21, 12);
    local.writeUInt32LE(e.crc >>> 0, 14);
    local.writeUInt32LE(compressed, 18);
    local.writeUInt32LE(e.size, 22);
    local.writeUInt16LE(name.length, 26);
    const cd = Buffer.alloc(46);
    cd.writeUInt32LE(0x02014b50, 0);
    cd.writeUInt16LE(0x031e, 4);
    cd.writeUInt16LE(20, 6);
    cd.writeUInt16LE(e.method, 10);
    cd.writeUInt16LE(0x21, 14);
    cd.writeUInt32LE(e.crc >>> 0, 16);
    cd.writeUInt32LE(compressed, 20);
    cd.writeUInt32LE(e.size, 24);
    cd.writeUInt16LE(name.length, 28);
    cd.writeUInt32LE((0o100644 << 16) >>> 0, 38);
    cd.writeUInt32LE(offset, 42);
    central.push(cd, name);
    out.push(local, name, ...e.data);
    offset += local.length + name.length + compressed;
  }
  const cdSize = central.reduce((n, b) => n + b.length, 0);
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(entries.length, 8);
  eocd.writeUInt16LE(entries.length, 10);
  eocd.writeUInt32LE(cdSize, 12);
  eocd.writeUInt32LE(offset, 16);
  return [...out, ...central, eocd];
}

function deflated(name: string, content: Buffer): ZipEntrySpec {
  return { name, method: 8, data: [zlib.deflateRawSync(content)], crc: zlib.crc32(content), size: content.length };
}

function bombEntry(name: string): ZipEntrySpec {
  const block = zlib.deflateRawSync(Buffer.alloc(MiB), { level: 9, finishFlush: zlib.constants.Z_FULL_FLUSH });
  return { name, method: 8, data: [...Array(BOMB_SIZE / MiB).fill(block), zlib.deflateRawSync(Buffer.alloc(0))], crc: BOMB_CRC, size: BOMB_SIZE };
}

const TEXT = Buffer.from('hello from the archive\n'.repeat(100));
const FOUR_MIB_ZEROS = Buffer.alloc(4 * MiB);

async function setUp(t: TestContext): Promise<Project> {
  const project = await t.createProject();
  const zip = zipOf([deflated('small.txt', TEXT), { name: 'stored.txt', method: 0, data: [TEXT], crc: zlib.crc32(TEXT), size: TEXT.length }, deflated('zeros.bin', FOUR_MIB_ZEROS), bombEntry('bomb.txt'), { ...bombEntry('liar.txt'), size: 100 }]);
  const key = `test/${t.unique('bomb')}.zip`;
  const { size } = await artifactStore(t.config).put(key, Readable.from(zip));
  const pipeline = await t.db
    .insertInto('ci_pipelines')
    .values({ iid: 1, project_id: project.id, ref: 'main', sha: 'a'.repeat(40), before_sha: '0'.repeat(40), source: 'push', status: 'success', created_at: new Date(), updated_at: new Date() } as any)
    .returning('id')
    .executeTakeFirstOrThrow();
  const build = await t.db
    .insertInto('ci_builds')
    .values({ pipeline_id: pipeline.id, project_id: project.id, stage: 'build', stage_idx: 0, name: 'build', status: 'success', ref: 'main', sha: 'a'.repeat(40), options: '{}', created_at: new Date(), updated_at: new Date() } as any)
    .returning('id')
    .executeTakeFirstOrThrow();
  await t.db
    .insertInto('ci_job_artifacts')
    .values({ job_id: build.id, project_id: project.id, file_type: 'archive', file_format: 'zip', file_name: 'artifacts.zip', size, file_sha256: 'x', store_key: key, expire_at: null, created_at: new Date() } as any)
    .execute();
  (project as any).buildId = build.id;
  return project;
}

/** The request's answer and what it cost this process (the server runs in it): CPU and wall time. */
async function timed(t: TestContext, url: string, headers: Record<string, string>) {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const res = await t.app.inject({ method: 'GET', url, headers });
  const used = process.cpuUsage(cpu);
  return { res, wallMs: performance.now() - started, cpuMs: (used.user + used.system) / 1000 };
}

function checks(name: string, opts: { objectStore?: () => Promise<{ url: string; close: () => Promise<void> }> }) {
  describe(name, () => {
    let t: TestContext;
    let project: Project;
    let s3: { url: string; close: () => Promise<void> } | undefined;
    before(async () => {
      s3 = await opts.objectStore?.();
      t = await createTestContext({ maxArtifactsSize: LIMIT, ...(s3 ? { objectStoreUrl: s3.url } : {}) });
      project = await setUp(t);
      // The route's first answer compiles its validators: not the cost of a request.
      assert.equal((await get(`/api/v4/projects/${project.id}/jobs/${(project as any).buildId}/artifacts/small.txt`)).res.statusCode, 200);
    });
    after(async () => {
      if (s3 && t) (artifactStore(t.config) as S3ObjectStore).destroy();
      await t?.close();
      await s3?.close();
    });
    const urls = () => [
      `/api/v4/projects/${project.id}/jobs/${(project as any).buildId}/artifacts/bomb.txt`,
      `/api/v4/projects/${project.id}/jobs/artifacts/main/raw/bomb.txt?job=build`,
    ];
    const get = (url: string, headers: Record<string, string> = {}) => timed(t, url, { 'private-token': ROOT_TOKEN, ...headers });

    test('a client that takes gzip gets the stored deflate data as gzip, for the cost of copying ~1 MiB', async () => {
      for (const url of urls()) {
        const { res, wallMs, cpuMs } = await get(url, { 'accept-encoding': 'gzip, deflate, br' });
        assert.equal(res.statusCode, 200, res.body.slice(0, 300));
        assert.equal(res.headers['content-encoding'], 'gzip');
        assert.equal(res.headers['vary'], 'Accept-Encoding');
        assert.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
        assert.equal(Number(res.headers['content-length']), res.rawPayload.length);
        assert.ok(res.rawPayload.length < 2 * MiB, `${res.rawPayload.length} bytes sent`);
        assert.ok(wallMs < 1000 && cpuMs < 1000, `the server worked ${wallMs.toFixed(0)} ms (${cpuMs.toFixed(0)} ms CPU)`);
        // A valid gzip member: its trailer says 1 GiB with the right CRC, and its start inflates to zeros.
        const body = res.rawPayload;
        assert.deepEqual([...body.subarray(0, 3)], [0x1f, 0x8b, 8]);
        assert.equal(body.readUInt32LE(body.length - 8), BOMB_CRC);
        assert.equal(body.readUInt32LE(body.length - 4), BOMB_SIZE % 2 ** 32);
        const head = zlib.gunzipSync(body.subarray(0, 4096), { finishFlush: zlib.constants.Z_SYNC_FLUSH });
        assert.ok(head.length > 0 && head.every((b) => b === 0));
      }
    });

    test('a client that does not take gzip (curl without --compressed) gets a clear 406, quickly', async () => {
      for (const url of urls()) {
        for (const headers of [{}, { 'accept-encoding': 'identity' }, { 'accept-encoding': 'gzip;q=0, deflate' }] as Record<string, string>[]) {
          const { res, wallMs, cpuMs } = await get(url, headers);
          assert.equal(res.statusCode, 406, JSON.stringify(headers));
          assert.match(JSON.parse(res.body).message, /^406 Not Acceptable - bomb\.txt is 1073741824 bytes inflated, more than the 8388608 sent uncompressed: ask for it with Accept-Encoding: gzip/);
          assert.ok(wallMs < 1000 && cpuMs < 1000, `the server worked ${wallMs.toFixed(0)} ms (${cpuMs.toFixed(0)} ms CPU)`);
        }
      }
    });

    test('files within the limit: inflated for a plain client, gzip-wrapped for one that takes it; stored files as they are', async () => {
      const base = `/api/v4/projects/${project.id}/jobs/${(project as any).buildId}/artifacts`;
      const plain = await get(`${base}/small.txt`);
      assert.equal(plain.res.statusCode, 200);
      assert.equal(plain.res.headers['content-encoding'], undefined);
      assert.deepEqual(plain.res.rawPayload, TEXT);
      const zipped = await get(`${base}/small.txt`, { 'accept-encoding': 'gzip' });
      assert.equal(zipped.res.headers['content-encoding'], 'gzip');
      assert.deepEqual(zlib.gunzipSync(zipped.res.rawPayload), TEXT, 'a whole gzip member, CRC and size checked');
      const zeros = await get(`${base}/zeros.bin`);
      assert.equal(zeros.res.statusCode, 200);
      assert.equal(Number(zeros.res.headers['content-length']), FOUR_MIB_ZEROS.length);
      assert.deepEqual(zeros.res.rawPayload, FOUR_MIB_ZEROS);
      for (const headers of [{}, { 'accept-encoding': 'gzip' }] as Record<string, string>[]) {
        const stored = await get(`${base}/stored.txt`, headers);
        assert.equal(stored.res.headers['content-encoding'], undefined, 'a stored entry is not compressed on the way');
        assert.deepEqual(stored.res.rawPayload, TEXT);
      }
    });

    test('an entry that lies about its inflated size fails at its first bytes: a 404 (a damaged file), not a 500 or 1 GiB of work', async () => {
      const { res, wallMs, cpuMs } = await get(`/api/v4/projects/${project.id}/jobs/${(project as any).buildId}/artifacts/liar.txt`);
      assert.ok(wallMs < 1000 && cpuMs < 1000, `the server worked ${wallMs.toFixed(0)} ms (${cpuMs.toFixed(0)} ms CPU)`);
      assert.equal(res.statusCode, 404, res.body.slice(0, 300));
      assert.match(String(res.headers['content-type']), /^application\/json/);
      assert.equal(res.headers['content-disposition'], undefined);
    });
  });
}

checks('artifact entries on local disk', {});
checks('artifact entries on S3 (s3rver)', { objectStore: startS3 });

describe('Accept-Encoding: gzip', () => {
  test('as RFC 9110 reads it', () => {
    for (const yes of ['gzip', 'gzip, deflate, br', 'GZIP', 'x-gzip', 'deflate, gzip;q=0.5', '*', 'br, *;q=0.1', ['br', 'gzip']]) assert.equal(acceptsGzip(yes), true, String(yes));
    for (const no of [undefined, '', 'identity', 'deflate', 'br', 'gzip;q=0', 'gzip;q=0, *', '*;q=0', 'gzip;q=abc']) assert.equal(acceptsGzip(no), false, String(no));
  });
});
