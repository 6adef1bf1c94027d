import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import pg from 'pg';

export const ROOT = path.resolve(import.meta.dirname, '..');
export const BENCH_TOKEN = 'bench-root-token-0123456789';

export interface BenchServer {
  url: string;
  /** The `cairn serve` process. */
  pid: number;
  dataDir: string;
  env: NodeJS.ProcessEnv;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/**
 * Starts `cairn serve` in its own process (so the load generator does not share its event loop)
 * on PostgreSQL when DATABASE_URL is set, else on a fresh embedded database.
 */
async function adminQuery(databaseUrl: string, text: string) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/**
 * Starts `cairn serve` on a fresh database, or with `opts.sharing` a second process on that
 * server's database (it neither creates nor drops it).
 */
export async function startServer(extraEnv: Record<string, string> = {}, opts: { sharing?: BenchServer } = {}): Promise<BenchServer> {
  const port = await freePort();
  // A fresh database for every run, so runs never see each other's rows.
  let databaseUrl: string | undefined;
  let dbName: string | undefined;
  if (opts.sharing) {
    databaseUrl = opts.sharing.env.DATABASE_URL;
  } else if (process.env.DATABASE_URL) {
    dbName = `cairn_bench_${process.pid}_${port}`;
    await adminQuery(process.env.DATABASE_URL, `create database "${dbName}"`);
    const u = new URL(process.env.DATABASE_URL);
    u.pathname = `/${dbName}`;
    databaseUrl = u.toString();
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-bench-'));
  const env = {
    ...process.env,
    CAIRN_PORT: String(port),
    CAIRN_HOST: '127.0.0.1',
    CAIRN_DATA_DIR: dataDir,
    CAIRN_ROOT_TOKEN: BENCH_TOKEN,
    CAIRN_ROOT_PASSWORD: 'bench-password-123',
    CAIRN_LOG_LEVEL: 'warn',
    CAIRN_ARCHIVE_RATE_LIMIT: '0',
    CAIRN_BUILTIN_RUNNER: '0',
    CAIRN_SSH_PORT: '0',
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...extraEnv,
  };
  // BENCH_NODE_ARGS: options for the server's node (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof").
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, path.join(ROOT, 'bin/cairn.mjs'), 'serve'], { env, stdio: ['ignore', 'inherit', 'inherit'] });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error('cairn serve exited during start');
    try {
      const res = await fetch(`${url}/-/readiness`);
      if (res.ok) break;
    } catch {}
    if (i > 600) throw new Error('cairn serve did not become ready');
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    pid: child.pid!,
    dataDir,
    env,
    stop: async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (dbName && process.env.BENCH_KEEP_DB) console.log(`kept database ${dbName} (BENCH_KEEP_DB)`);
      else if (dbName) await adminQuery(process.env.DATABASE_URL!, `drop database if exists "${dbName}" with (force)`);
    },
  };
}

export async function api(server: BenchServer, method: string, p: string, body?: unknown): Promise<any> {
  const res = await fetch(`${server.url}/api/v4${p}`, {
    method,
    headers: { 'private-token': BENCH_TOKEN, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (res.status >= 400) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

export interface LoadResult {
  name: string;
  rps: number;
  p99: number;
  /** Socket errors, timeouts and non-2xx answers together. */
  errors: number;
  /** Answers with a status outside 2xx (part of errors). */
  non2xx: number;
  /** Requests completed in the whole run, and its length in seconds (for figures below 1 req/s). */
  requests: number;
  seconds: number;
  /** Mean response size, bytes (body and headers). */
  bytesPerRequest: number;
}

export async function load(name: string, url: string, opts: { headers?: Record<string, string>; seconds?: number; connections?: number } = {}): Promise<LoadResult> {
  const result = await autocannon({
    url,
    headers: opts.headers,
    connections: opts.connections ?? Number(process.env.BENCH_CONNECTIONS || 20),
    duration: opts.seconds ?? Number(process.env.BENCH_SECONDS || 8),
  });
  const errors = result.errors + result.non2xx + result.timeouts;
  const requests = result.requests.total;
  return {
    name,
    rps: Math.round(result.requests.average),
    p99: result.latency.p99,
    errors,
    non2xx: result.non2xx,
    requests,
    seconds: result.duration,
    bytesPerRequest: requests ? Math.round(result.throughput.total / requests) : 0,
  };
}

export function printTable(rows: (LoadResult & { ratio?: number })[]) {
  console.log(`${'endpoint'.padEnd(52)} ${'req/s'.padStart(8)} ${'p99 ms'.padStart(7)} ${'ratio'.padStart(6)} ${'errors'.padStart(6)}`);
  for (const r of rows) {
    console.log(`${r.name.padEnd(52)} ${String(r.rps).padStart(8)} ${String(r.p99).padStart(7)} ${(r.ratio === undefined ? '' : r.ratio.toFixed(2)).padStart(6)} ${String(r.errors).padStart(6)}`);
  }
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** `median … ms (runs: …)` for a list of timings. */
export const formatTimings = (xs: number[]) => `median ${median(xs).toFixed(0)} ms (runs: ${xs.map((x) => x.toFixed(0)).join(', ')})`;

function git(args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('git', args, { env, maxBuffer: 64 * 1024 * 1024 }, (err, _out, stderr) => (err ? reject(new Error(`git ${args.join(' ')}: ${stderr}`)) : resolve()));
  });
}

/**
 * Times `git <args> <dest>` clones of the floor and of Cairn, alternating, `runs` times each after
 * one warm-up of both (page cache, the server's JIT and connections); each clone is removed after.
 */
export async function timeClones(tmp: string, env: NodeJS.ProcessEnv, floorArgs: string[], cairnArgs: string[], runs: number): Promise<{ floorMs: number[]; cairnMs: number[] }> {
  let n = 0;
  const time = async (args: string[]) => {
    const dest = path.join(tmp, `clone-${++n}`);
    const start = performance.now();
    await git([...args, dest], env);
    const ms = performance.now() - start;
    fs.rmSync(dest, { recursive: true, force: true });
    return ms;
  };
  await time(cairnArgs);
  await time(floorArgs);
  const floorMs: number[] = [];
  const cairnMs: number[] = [];
  for (let i = 0; i < runs; i++) {
    floorMs.push(await time(floorArgs));
    cairnMs.push(await time(cairnArgs));
  }
  return { floorMs, cairnMs };
}
