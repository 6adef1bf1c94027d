// Artifacts benchmark (issue #11): a single file downloaded out of a 100 MB artifact archive, its
// throughput and the server's RSS during the download (it must stay flat: the entry is found
// through ranged reads of the zip's central directory and streamed, never buffered).
//
// Setup, over HTTP against a `cairn serve` process: a project whose pushed .gitlab-ci.yml makes one
// job; a runner (plain fetch client) registered with the project's runners_token takes it, uploads
// a zip through POST /jobs/:id/artifacts (multipart, streamed from disk) and finishes it. The zip:
// one 100 MiB stored entry (big.bin) and 500 small ones. Then GET
// /projects/:id/jobs/:job_id/artifacts/big.bin, BENCH_ARTIFACTS_ROUNDS (3) times; the server's RSS
// (/proc/<pid>/status) is sampled every 20 ms. Also the small-file latency (an entry at the end of
// the central directory). On local disk, then on S3 (an s3rver started here) unless
// BENCH_ARTIFACTS_S3=0.
//
// Run: `node --import tsx bench/artifacts.ts` or `BENCH_ONLY=artifacts npm run bench`.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yazl from 'yazl';
import { api, startServer, type BenchServer } from './lib.js';
import { startS3 } from '../test/helpers/s3.js';

const BIG_MB = Number(process.env.BENCH_ARTIFACTS_MB || 100);
const ROUNDS = Number(process.env.BENCH_ARTIFACTS_ROUNDS || 3);
const SMALL_FILES = 500;

export interface ArtifactsRow {
  store: string;
  archiveMB: number;
  round: number;
  seconds: number;
  mbPerSecond: number;
  rssBeforeMB: number;
  rssPeakMB: number;
  smallFileMs: number;
}

function rssMB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return Math.round((kb / 1024) * 10) / 10;
}

async function makeZip(file: string) {
  const zip = new yazl.ZipFile();
  const piped = pipeline(zip.outputStream, fs.createWriteStream(file));
  // Random bytes, stored: the archive is BIG_MB on disk and the download is the bytes themselves.
  const chunk = crypto.randomBytes(1024 * 1024);
  let left = BIG_MB;
  const big = new Readable({
    read() {
      if (left-- > 0) this.push(chunk);
      else this.push(null);
    },
  });
  zip.addReadStream(big, 'big.bin', { compress: false, size: BIG_MB * 1024 * 1024 });
  for (let i = 0; i < SMALL_FILES; i++) zip.addBuffer(Buffer.from(`small file ${i}\n`.repeat(20)), `docs/page-${i}.txt`);
  zip.end();
  await piped;
}

async function uploadArtifact(server: BenchServer, jobId: number, token: string, file: string) {
  const boundary = `----cairnbench${crypto.randomBytes(8).toString('hex')}`;
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="artifacts.zip"\r\nContent-Type: application/zip\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const size = fs.statSync(file).size;
  async function* body() {
    yield head;
    for await (const c of fs.createReadStream(file)) yield c as Buffer;
    yield tail;
  }
  const res = await fetch(`${server.url}/api/v4/jobs/${jobId}/artifacts?artifact_type=archive&artifact_format=zip&expire_in=never`, {
    method: 'POST',
    headers: { 'job-token': token, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(head.length + size + tail.length) },
    body: Readable.toWeb(Readable.from(body())) as any,
    duplex: 'half',
  } as RequestInit);
  const text = await res.text();
  if (res.status !== 201) throw new Error(`upload: ${res.status} ${text}`);
}

async function prepare(server: BenchServer, zipFile: string): Promise<{ projectId: number; jobId: number }> {
  const project = await api(server, 'POST', '/projects', { name: `artifacts-bench-${Date.now()}`, initialize_with_readme: true });
  await api(server, 'POST', `/projects/${project.id}/repository/commits`, {
    branch: 'main',
    commit_message: 'ci',
    actions: [{ action: 'create', file_path: '.gitlab-ci.yml', content: 'build:\n  script: [echo]\n  artifacts:\n    paths: [out/]\n' }],
  });
  const registration = (await api(server, 'GET', `/projects/${project.id}`)).runners_token as string;
  const reg = await fetch(`${server.url}/api/v4/runners`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: registration, description: 'bench', run_untagged: true }) });
  const { token: runnerToken } = (await reg.json()) as { token: string };
  let job: { id: number; token: string } | null = null;
  for (let i = 0; i < 100 && !job; i++) {
    const res = await fetch(`${server.url}/api/v4/jobs/request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: runnerToken, info: { name: 'gitlab-runner', version: '17.5.0', features: {} } }),
    });
    if (res.status === 201) job = (await res.json()) as { id: number; token: string };
    else await res.arrayBuffer();
  }
  if (!job) throw new Error('no job to take');
  await uploadArtifact(server, job.id, job.token, zipFile);
  const done = await fetch(`${server.url}/api/v4/jobs/${job.id}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', 'job-token': job.token },
    body: JSON.stringify({ token: job.token, state: 'success', exit_code: 0 }),
  });
  await done.arrayBuffer();
  return { projectId: project.id, jobId: job.id };
}

async function measure(server: BenchServer, store: string, zipFile: string): Promise<ArtifactsRow[]> {
  const { projectId, jobId } = await prepare(server, zipFile);
  const headers = { 'private-token': (await import('./lib.js')).BENCH_TOKEN };
  const base = `${server.url}/api/v4/projects/${projectId}/jobs/${jobId}/artifacts`;
  const rows: ArtifactsRow[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    await new Promise((r) => setTimeout(r, 300));
    const before = rssMB(server.pid);
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssMB(server.pid));
    }, 20);
    const t0 = performance.now();
    const res = await fetch(`${base}/big.bin`, { headers });
    if (res.status !== 200) throw new Error(`download: ${res.status} ${await res.text()}`);
    let bytes = 0;
    for await (const c of res.body as unknown as AsyncIterable<Uint8Array>) bytes += c.length;
    const seconds = (performance.now() - t0) / 1000;
    clearInterval(sampler);
    peak = Math.max(peak, rssMB(server.pid));
    if (bytes !== BIG_MB * 1024 * 1024) throw new Error(`downloaded ${bytes} bytes`);
    const s0 = performance.now();
    const small = await fetch(`${base}/docs/page-${SMALL_FILES - 1}.txt`, { headers });
    await small.text();
    const smallFileMs = Math.round((performance.now() - s0) * 10) / 10;
    rows.push({ store, archiveMB: BIG_MB, round, seconds: Math.round(seconds * 100) / 100, mbPerSecond: Math.round((bytes / 1024 / 1024 / seconds) * 10) / 10, rssBeforeMB: before, rssPeakMB: peak, smallFileMs });
  }
  return rows;
}

export async function runArtifactsBench(): Promise<ArtifactsRow[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-bench-artifacts-'));
  const zipFile = path.join(dir, 'artifacts.zip');
  const rows: ArtifactsRow[] = [];
  try {
    await makeZip(zipFile);
    const env = { CAIRN_MAX_ARTIFACTS_SIZE: String((BIG_MB + 50) * 1024 * 1024) };
    const local = await startServer(env);
    try {
      rows.push(...(await measure(local, 'local disk', zipFile)));
    } finally {
      await local.stop();
    }
    if (process.env.BENCH_ARTIFACTS_S3 !== '0') {
      const s3 = await startS3();
      const server = await startServer({ ...env, CAIRN_OBJECT_STORE_URL: s3.url });
      try {
        rows.push(...(await measure(server, 'S3 (s3rver)', zipFile)));
      } finally {
        await server.stop();
        await s3.close();
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

export function printArtifactsResult(rows: ArtifactsRow[]) {
  console.log(`${'store'.padEnd(12)} ${'round'.padStart(5)} ${'MB'.padStart(5)} ${'s'.padStart(6)} ${'MB/s'.padStart(7)} ${'RSS before'.padStart(10)} ${'RSS peak'.padStart(9)} ${'growth'.padStart(7)} ${'small file ms'.padStart(13)}`);
  for (const r of rows) {
    console.log(
      `${r.store.padEnd(12)} ${String(r.round).padStart(5)} ${String(r.archiveMB).padStart(5)} ${r.seconds.toFixed(2).padStart(6)} ${r.mbPerSecond.toFixed(1).padStart(7)} ${r.rssBeforeMB.toFixed(1).padStart(10)} ${r.rssPeakMB.toFixed(1).padStart(9)} ${(r.rssPeakMB - r.rssBeforeMB).toFixed(1).padStart(7)} ${String(r.smallFileMs).padStart(13)}`,
    );
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  printArtifactsResult(await runArtifactsBench());
}
