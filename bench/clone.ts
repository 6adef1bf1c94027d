// `node --import tsx bench/clone.ts [commits] [runs]`: clone time over Cairn's smart HTTP versus
// `git clone --no-local` of the same bare repository (git's own upload-pack over a pipe, the floor).
// PGlite by default; on PostgreSQL when DATABASE_URL is set (a fresh database, dropped afterwards).
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { AddressInfo } from 'node:net';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { insertProject, projectRepoPath } from '../src/services/projects.js';
import { insertPersonalAccessToken } from '../src/services/tokens.js';
import { insertUser, personalNamespaceOf } from '../src/services/users.js';
import { openTestDatabase } from '../test/helpers/database.js';

const COMMITS = Number(process.argv[2] ?? 10_000);
const RUNS = Number(process.argv[3] ?? 7);
const FILES = 200;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-bench-clone-'));
const clientEnv = {
  PATH: process.env.PATH,
  HOME: tmp,
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_TERMINAL_PROMPT: '0',
  LC_ALL: 'C',
};

function run(args: string[], cwd = tmp): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd, env: clientEnv, maxBuffer: 64 * 1024 * 1024 }, (err, _out, stderr) =>
      err ? reject(new Error(`git ${args.join(' ')}: ${stderr}`)) : resolve(),
    );
  });
}

/** Writes COMMITS small commits (each changes one of FILES files) with git fast-import. */
function fastImport(gitDir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', ['--git-dir', gitDir, 'fast-import', '--quiet'], { env: clientEnv, stdio: ['pipe', 'ignore', 'inherit'] });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`fast-import exited ${code}`))));
    const chunks: string[] = [];
    const t0 = 1_700_000_000;
    for (let i = 1; i <= COMMITS; i++) {
      const content = `line ${i}\n`.repeat(1 + (i % 7));
      const msg = `commit number ${i}\n`;
      chunks.push(
        `commit refs/heads/main\nmark :${i}\ncommitter Bench <bench@example.com> ${t0 + i * 60} +0000\n` +
          `data ${Buffer.byteLength(msg)}\n${msg}` +
          (i > 1 ? `from :${i - 1}\n` : '') +
          `M 100644 inline dir${i % 10}/file${i % FILES}.txt\ndata ${Buffer.byteLength(content)}\n${content}\n`,
      );
      if (chunks.length === 500) child.stdin.write(chunks.splice(0).join(''));
    }
    child.stdin.end(chunks.join(''));
  });
}

async function time(label: string, args: string[]): Promise<number> {
  const dest = path.join(tmp, `clone-${label}-${Math.random().toString(36).slice(2)}`);
  const start = performance.now();
  await run([...args, dest]);
  const ms = performance.now() - start;
  fs.rmSync(dest, { recursive: true, force: true });
  return ms;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function main() {
  const { database, databaseUrl, drop } = await openTestDatabase();
  const config = loadConfig({ CAIRN_DATA_DIR: path.join(tmp, 'data') }, { databaseUrl, logLevel: 'silent' });
  const app = await buildApp({ config, database, logger: false });
  console.log(`database: ${database.kind}; server process RSS ${(process.memoryUsage().rss / 1e6).toFixed(0)} MB`);
  // Requests and time spent answering them (first byte to last), to see where a clone's time goes.
  const served: { url: string; status: number; ms: number }[] = [];
  app.addHook('onResponse', async (request, reply) => {
    served.push({ url: request.url.replace(/\?.*/, '').split('/').slice(-1)[0], status: reply.statusCode, ms: reply.elapsedTime });
  });
  try {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as AddressInfo).port;
    const db = app.cairn.db;
    const user = await insertUser(db, { username: 'bench', name: 'Bench', email: 'bench@example.com', password: 'bench-password-1', confirmed_at: new Date() });
    const { token } = await insertPersonalAccessToken(db, { userId: user.id, name: 'bench', scopes: ['read_repository'], expiresAt: null });
    const ns = (await personalNamespaceOf(db, user.id))!;
    const project = await insertProject(app.cairn, { name: 'big', path: 'big', namespace_id: ns.id, creator_id: user.id, default_branch: 'main' });
    const gitDir = projectRepoPath(app.cairn, project);

    let t = performance.now();
    await fastImport(gitDir);
    console.log(`repository: ${COMMITS} commits over ${FILES} files, fast-import ${(performance.now() - t).toFixed(0)} ms`);

    const httpUrl = `http://oauth2:${token}@127.0.0.1:${port}/${ns.full_path}/big.git`;
    const cairnArgs = ['clone', '-q', httpUrl];
    const floorArgs = ['clone', '-q', '--no-local', gitDir];
    // Warm up both (page cache, first pack-objects run).
    await time('warm-cairn', cairnArgs);
    await time('warm-floor', floorArgs);

    const cairn: number[] = [];
    const floor: number[] = [];
    served.length = 0;
    for (let i = 0; i < RUNS; i++) {
      floor.push(await time('floor', floorArgs));
      cairn.push(await time('cairn', cairnArgs));
    }
    const fmt = (xs: number[]) => `median ${median(xs).toFixed(0)} ms, mean ${mean(xs).toFixed(0)} ms (runs: ${xs.map((x) => x.toFixed(0)).join(', ')})`;
    console.log(`git clone --no-local (floor): ${fmt(floor)}`);
    console.log(`git clone over Cairn HTTP:    ${fmt(cairn)}`);
    const perClone = served.length / RUNS;
    const byKind = new Map<string, number[]>();
    for (const r of served) byKind.set(`${r.url} ${r.status}`, [...(byKind.get(`${r.url} ${r.status}`) ?? []), r.ms]);
    console.log(`per clone: ${perClone} HTTP requests; server time by request: ${[...byKind].map(([k, v]) => `${k} ${median(v).toFixed(1)} ms`).join(', ')}`);
    const ratio = median(floor) / median(cairn);
    console.log(`speed ratio Cairn/floor (median): ${ratio.toFixed(2)} (target >= 0.80) ${ratio >= 0.8 ? 'OK' : 'BELOW TARGET'}`);
  } finally {
    await app.close();
    await drop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
