// Memory of `cairn serve` (BENCH_ONLY=memory): its resident set size (RSS, /proc/PID/status
// VmRSS) idle after start, and loaded: during and after a burst of API reads and writes.
// Defaults otherwise (the built-in runner and the background worker on). The targets: idle under
// 350 MB on the embedded database, under 120 MB on PostgreSQL.
import fs from 'node:fs';
import { api, BENCH_TOKEN, load, startServer } from './lib.js';

export const IDLE_TARGET_MB = { pglite: 350, postgres: 120 };

export interface MemoryResult {
  database: 'pglite' | 'postgres';
  /** Idle after start (the server has settled: 8 s after it answered its readiness check). */
  idleMB: number;
  /** Highest RSS during the burst (sampled every 100 ms). */
  loadedPeakMB: number;
  /** Idle again, 10 s after the burst. */
  afterLoadMB: number;
  /** Requests the burst made, and its rate. */
  requests: number;
  rps: number;
}

function rssMB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runMemoryBench(): Promise<MemoryResult> {
  const server = await startServer({ CAIRN_BUILTIN_RUNNER: '1', CAIRN_RUNNER_ALLOW_UNISOLATED: '1' });
  try {
    await sleep(8000);
    const idleMB = rssMB(server.pid);
    // The burst: a project with a README, issues and their list, the project read and the lists.
    const project = await api(server, 'POST', '/projects', { name: 'mem-project', visibility: 'private', initialize_with_readme: true });
    for (let i = 0; i < 50; i++) await api(server, 'POST', `/projects/${project.id}/issues`, { title: `issue ${i}`, description: `body ${i}` });
    let peak = rssMB(server.pid);
    const sampler = setInterval(() => (peak = Math.max(peak, rssMB(server.pid))), 100);
    const seconds = Number(process.env.BENCH_SECONDS || 8);
    const headers = { 'private-token': BENCH_TOKEN };
    const paths = [`/api/v4/projects/${project.id}`, `/api/v4/projects/${project.id}/issues?per_page=50`, '/api/v4/projects?per_page=20', `/api/v4/projects/${project.id}/repository/tree`];
    let requests = 0;
    let rps = 0;
    for (const p of paths) {
      const r = await load(`memory ${p}`, server.url + p, { headers, seconds: Math.max(1, Math.round(seconds / paths.length)) });
      requests += r.requests;
      rps += r.rps / paths.length;
    }
    clearInterval(sampler);
    peak = Math.max(peak, rssMB(server.pid));
    await sleep(10_000);
    const afterLoadMB = rssMB(server.pid);
    return { database: process.env.DATABASE_URL ? 'postgres' : 'pglite', idleMB, loadedPeakMB: peak, afterLoadMB, requests, rps: Math.round(rps) };
  } finally {
    await server.stop();
  }
}

/** Prints the result; true when idle RSS misses its target. */
export function printMemoryResult(r: MemoryResult): boolean {
  const target = IDLE_TARGET_MB[r.database];
  console.log(`${'database'.padEnd(10)} ${'idle MB'.padStart(8)} ${'target'.padStart(7)} ${'loaded peak MB'.padStart(15)} ${'after load MB'.padStart(14)} ${'burst req'.padStart(10)} ${'req/s'.padStart(6)}`);
  console.log(`${r.database.padEnd(10)} ${String(r.idleMB).padStart(8)} ${`< ${target}`.padStart(7)} ${String(r.loadedPeakMB).padStart(15)} ${String(r.afterLoadMB).padStart(14)} ${String(r.requests).padStart(10)} ${String(r.rps).padStart(6)}`);
  return r.idleMB >= target;
}
