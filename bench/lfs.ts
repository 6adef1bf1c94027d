// Git LFS benchmark (issue #31): one large object (BENCH_LFS_MB, 200 MB) uploaded and downloaded
// through the LFS batch API's basic transfer, against a `cairn serve` process, beside a plain `cp`
// of the same file on the same disk (the floor the issue names: the server's upload writes the bytes
// once, its download reads them once). Ratio = cp seconds over these seconds (target >= 0.5).
// `cp` copies inside the kernel's page cache (copy_file_range), so a second floor is printed too: a
// plain node:http process doing the same transfers (GET streams the file, PUT streams into a file
// through sha256), which is what any Node server pays for HTTP on this machine.
//
// Upload: POST .../info/lfs/objects/batch (operation upload), then the PUT of the file to the
// action's href (curl -T, as git-lfs's basic adapter does); the server hashes and counts the bytes
// as they stream into the object store. Download: the batch (operation download), then the GET of
// the href into a file (curl). Also `git push` / a checkout with the smudge filter through Debian's
// git-lfs client when it is installed (BENCH_LFS_CLIENT=0 skips them). On local disk, then on S3
// (an s3rver started here) when BENCH_LFS_S3=1. BENCH_LFS_ROUNDS (3) rounds; the best is printed.
//
// Run: `node --import tsx bench/lfs.ts` or `BENCH_ONLY=lfs npm run bench`.
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { api, BENCH_TOKEN, startServer, type BenchServer } from './lib.js';

const MB = Number(process.env.BENCH_LFS_MB || 200);
const ROUNDS = Number(process.env.BENCH_LFS_ROUNDS || 3);
const LFS_TYPE = 'application/vnd.git-lfs+json';

export interface LfsRow {
  name: string;
  seconds: number;
  mbPerSecond: number;
  /** floor seconds / these seconds */
  ratio?: number;
}

const auth = 'Basic ' + Buffer.from(`oauth2:${BENCH_TOKEN}`).toString('base64');

async function makeFile(file: string): Promise<string> {
  const hash = crypto.createHash('sha256');
  const chunk = crypto.randomBytes(1024 * 1024);
  const out = fs.createWriteStream(file);
  for (let i = 0; i < MB; i++) {
    // Each MiB differs (its index in front), so nothing repeats.
    const c = Buffer.from(chunk);
    c.writeUInt32BE(i, 0);
    hash.update(c);
    if (!out.write(c)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return hash.digest('hex');
}

async function batch(server: BenchServer, fullPath: string, operation: 'upload' | 'download', oid: string, size: number) {
  const res = await fetch(`${server.url}/${fullPath}.git/info/lfs/objects/batch`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': LFS_TYPE, accept: LFS_TYPE },
    body: JSON.stringify({ operation, transfers: ['basic'], objects: [{ oid, size }] }),
  });
  const body = (await res.json()) as any;
  if (res.status !== 200) throw new Error(`batch ${operation}: ${res.status} ${JSON.stringify(body)}`);
  return body.objects[0];
}

async function timed(fn: () => Promise<void> | void): Promise<number> {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

// The transfers are made by curl (a C client, as git-lfs's is a Go one): a Node client's socket
// reads would cost more than the server being measured (120 against 350 MB/s here for the same GET).
function curl(args: string[], output = '/dev/null'): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['-s', '-o', output, '-w', '%{http_code}', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    child.on('error', reject);
    child.on('exit', () => resolve(Number(out.trim())));
  });
}

const headerArgs = (headers: Record<string, string>) => Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);

function putFile(href: string, headers: Record<string, string>, file: string, _size: number): Promise<number> {
  return curl(['-X', 'PUT', '-T', file, ...headerArgs(headers), href]);
}

async function getToFile(href: string, headers: Record<string, string>, file: string): Promise<number> {
  return curl([...headerArgs(headers), href], file);
}

const PLAIN_SERVER = `
const http = require('node:http'), fs = require('node:fs'), crypto = require('node:crypto');
const [src, dst] = process.argv.slice(1);
const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-length': fs.statSync(src).size });
    return fs.createReadStream(src, { highWaterMark: 1 << 20 }).pipe(res);
  }
  const hash = crypto.createHash('sha256');
  req.on('data', (c) => hash.update(c));
  req.pipe(fs.createWriteStream(dst, { highWaterMark: 1 << 20 })).on('finish', () => { hash.digest('hex'); res.end('{}'); });
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

async function plainNodeServer(src: string, dst: string): Promise<{ url: string; stop: () => void }> {
  const child = spawn(process.execPath, ['-e', PLAIN_SERVER, src, dst], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<string>((resolve) => child.stdout!.once('data', (b: Buffer) => resolve(b.toString().trim())));
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill() };
}

function dropCopy(file: string) {
  fs.rmSync(file, { force: true });
}

async function measure(server: BenchServer, label: string, src: string, oid: string, work: string): Promise<LfsRow[]> {
  const size = fs.statSync(src).size;
  const group = await api(server, 'POST', '/groups', { name: `lfs-bench-${label.replace(/\W+/g, '-')}`, path: `lfs-bench-${crypto.randomBytes(4).toString('hex')}` });
  const rows: LfsRow[] = [];
  const best = (name: string, times: number[]) => {
    const seconds = Math.min(...times);
    rows.push({ name: `${label}: ${name}`, seconds, mbPerSecond: size / 1024 / 1024 / seconds });
  };
  const uploads: number[] = [];
  const downloads: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // A new project each round: the object is uploaded anew (it is not linked there yet).
    const project = await api(server, 'POST', '/projects', { name: `lfs-${round}`, namespace_id: group.id });
    const fullPath = project.path_with_namespace as string;
    uploads.push(
      await timed(async () => {
        const obj = await batch(server, fullPath, 'upload', oid, size);
        const up = obj.actions.upload;
        const status = await putFile(up.href, up.header, src, size);
        if (status !== 200) throw new Error(`upload: ${status}`);
      }),
    );
    const out = path.join(work, 'download.bin');
    downloads.push(
      await timed(async () => {
        const obj = await batch(server, fullPath, 'download', oid, size);
        const status = await getToFile(obj.actions.download.href, obj.actions.download.header, out);
        if (status !== 200) throw new Error(`download: ${status}`);
      }),
    );
    if (fs.statSync(out).size !== size) throw new Error('download: wrong size');
    dropCopy(out);
  }
  best('upload (batch + PUT)', uploads);
  best('download (batch + GET)', downloads);

  if (process.env.BENCH_LFS_CLIENT !== '0' && fs.existsSync('/usr/bin/git-lfs')) {
    const home = path.join(work, 'home');
    fs.mkdirSync(home, { recursive: true });
    const env = { ...process.env, HOME: home, GIT_CONFIG_GLOBAL: path.join(home, '.gitconfig'), GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0' };
    fs.writeFileSync(env.GIT_CONFIG_GLOBAL, '');
    // Asynchronous: the S3 server (s3rver) runs in this process and must keep answering.
    const git = (cwd: string, ...args: string[]) =>
      new Promise<void>((resolve, reject) => {
        const child = spawn('git', ['-c', 'user.name=Bench', '-c', 'user.email=bench@example.com', '-c', 'init.defaultBranch=main', ...args], { cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });
        let stderr = '';
        child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
        child.on('error', reject);
        child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`git ${args.join(' ')}: ${stderr}`))));
      });
    const project = await api(server, 'POST', '/projects', { name: 'lfs-client', namespace_id: group.id });
    const remote = `${server.url.replace('://', `://oauth2:${BENCH_TOKEN}@`)}/${project.path_with_namespace}.git`;
    const repo = path.join(work, 'client');
    fs.mkdirSync(repo);
    await git(repo, 'init', '-q');
    await git(repo, 'lfs', 'install', '--local');
    await git(repo, 'remote', 'add', 'origin', remote);
    await git(repo, 'lfs', 'track', '*.bin');
    fs.copyFileSync(src, path.join(repo, 'big.bin'));
    await git(repo, 'add', '.');
    await git(repo, 'commit', '-q', '-m', 'big');
    const push = await timed(() => git(repo, 'push', '-q', 'origin', 'main'));
    rows.push({ name: `${label}: git push (git-lfs client)`, seconds: push, mbPerSecond: size / 1024 / 1024 / push });
    const clone = path.join(work, 'clone');
    fs.mkdirSync(clone);
    await git(clone, 'init', '-q');
    await git(clone, 'lfs', 'install', '--local');
    await git(clone, 'remote', 'add', 'origin', remote);
    await git(clone, 'fetch', '-q', 'origin');
    const pull = await timed(() => git(clone, 'checkout', '-q', '-b', 'main', 'origin/main'));
    rows.push({ name: `${label}: checkout with smudge (git-lfs client)`, seconds: pull, mbPerSecond: size / 1024 / 1024 / pull });
    if (fs.statSync(path.join(clone, 'big.bin')).size !== size) throw new Error('clone: wrong size');
    fs.rmSync(repo, { recursive: true, force: true });
    fs.rmSync(clone, { recursive: true, force: true });
  }
  return rows;
}

export async function runLfsBench(): Promise<LfsRow[]> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-bench-lfs-'));
  const rows: LfsRow[] = [];
  try {
    const src = path.join(work, 'object.bin');
    const oid = await makeFile(src);
    const size = fs.statSync(src).size;
    // The floor: the same bytes copied on this disk, page cache warm as for the server.
    const copies: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const dst = path.join(work, 'copy.bin');
      copies.push(
        await timed(() => {
          const r = spawnSync('cp', ['--', src, dst], { stdio: 'inherit' });
          if (r.status !== 0) throw new Error('cp failed');
        }),
      );
      dropCopy(dst);
    }
    const floor = Math.min(...copies);
    rows.push({ name: 'floor: cp of the same file', seconds: floor, mbPerSecond: size / 1024 / 1024 / floor });
    // The second floor: the least a Node server does for the same transfers (a plain node:http
    // process that streams the file out, and streams a PUT to a file through sha256), so that
    // what Cairn adds can be told from what Node's HTTP costs on this machine.
    const plain = await plainNodeServer(src, path.join(work, 'plain-put.bin'));
    try {
      const ups: number[] = [];
      const downs: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        ups.push(await timed(async () => void (await putFile(`${plain.url}/put`, {}, src, size))));
        downs.push(await timed(async () => void (await getToFile(`${plain.url}/get`, {}, path.join(work, 'plain-get.bin')))));
        dropCopy(path.join(work, 'plain-get.bin'));
      }
      rows.push({ name: 'floor: plain node:http PUT (sha256) to a file', seconds: Math.min(...ups), mbPerSecond: size / 1024 / 1024 / Math.min(...ups) });
      rows.push({ name: 'floor: plain node:http GET of the file', seconds: Math.min(...downs), mbPerSecond: size / 1024 / 1024 / Math.min(...downs) });
    } finally {
      plain.stop();
    }
    const local = await startServer();
    try {
      rows.push(...(await measure(local, 'local disk', src, oid, work)));
    } finally {
      await local.stop();
    }
    if (process.env.BENCH_LFS_S3 === '1') {
      const { startS3 } = await import('../test/helpers/s3.js');
      const s3 = await startS3();
      const server = await startServer({ CAIRN_OBJECT_STORE_URL: s3.url });
      try {
        rows.push(...(await measure(server, 'S3 (s3rver)', src, oid, work)));
      } finally {
        await server.stop();
        await s3.close();
      }
    }
    for (const r of rows) if (r.name !== 'floor: cp of the same file') r.ratio = floor / r.seconds;
    return rows;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

export function printLfsResult(rows: LfsRow[]): boolean {
  console.log(`${'what'.padEnd(52)} ${'s'.padStart(7)} ${'MB/s'.padStart(8)} ${'ratio'.padStart(6)}`);
  for (const r of rows) {
    console.log(`${r.name.padEnd(52)} ${r.seconds.toFixed(2).padStart(7)} ${r.mbPerSecond.toFixed(1).padStart(8)} ${(r.ratio === undefined ? '' : r.ratio.toFixed(2)).padStart(6)}`);
  }
  // The target is on the API transfers (the git-lfs client's own work is not the server's).
  return rows.some((r) => r.ratio !== undefined && /\(batch \+ (PUT|GET)\)/.test(r.name) && r.ratio < 0.5);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`## Git LFS: one ${MB} MB object, upload and download through the batch API's basic transfer, beside cp (ratio = cp seconds / seconds, target >= 0.5)`);
  printLfsResult(await runLfsBench());
}
