// Push benchmark: a push of BENCH_PUSH_MB megabytes of incompressible files (default 300) over
// git smart HTTP with default git settings, while the server's resident memory is sampled.
// The pack is streamed into receive-pack, so the server's memory must not grow with the pack:
// target, growth of the server's peak RSS over its RSS before the push < 64 MB.
// Run: `node --import tsx bench/push.ts` (on PostgreSQL when DATABASE_URL is set).
import { execFile, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { api, BENCH_TOKEN, startServer } from './lib.js';

const MEGABYTES = Number(process.env.BENCH_PUSH_MB || 300);
const TARGET_GROWTH_MB = 64;

export interface PushBenchResult {
  packMb: number;
  seconds: number;
  rssBeforeMb: number;
  rssPeakMb: number;
}

/** Resident memory of a process and of its children (the git spawner), in MB. */
function rssMb(pid: number): number {
  let kb = 0;
  const visit = (p: number) => {
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
      const children = fs.readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim();
      // git processes are not the server: count only node children (the spawner helper).
      for (const c of children ? children.split(' ').map(Number) : []) {
        if (fs.readFileSync(`/proc/${c}/comm`, 'utf8').trim() === 'node') visit(c);
      }
    } catch {}
  };
  visit(pid);
  return kb / 1024;
}

export async function runPushBench(): Promise<PushBenchResult> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-bench-push-'));
  const env = { PATH: process.env.PATH, HOME: tmp, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' };
  const server = await startServer();
  try {
    const project = await api(server, 'POST', '/projects', { name: 'bench-push', visibility: 'private' });
    const work = path.join(tmp, 'work');
    execFileSync('git', ['init', '-q', '-b', 'main', work], { env });
    for (let i = 0; i < Math.ceil(MEGABYTES / 10); i++) fs.writeFileSync(path.join(work, `blob-${i}.bin`), crypto.randomBytes(10 * 1024 * 1024));
    const gitEnv = { ...env, GIT_AUTHOR_NAME: 'Bench', GIT_AUTHOR_EMAIL: 'bench@example.com', GIT_COMMITTER_NAME: 'Bench', GIT_COMMITTER_EMAIL: 'bench@example.com' };
    execFileSync('git', ['-C', work, 'add', '.'], { env: gitEnv });
    execFileSync('git', ['-C', work, 'commit', '-q', '-m', 'large files'], { env: gitEnv });
    // Random data does not compress: store it, so the push measures the server and not zlib.
    execFileSync('git', ['-C', work, 'config', 'pack.compression', '0'], { env: gitEnv });
    const url = new URL(`${server.url}/${project.path_with_namespace}.git`);
    url.username = 'oauth2';
    url.password = BENCH_TOKEN;

    const rssBeforeMb = rssMb(server.pid);
    let rssPeakMb = rssBeforeMb;
    const sampler = setInterval(() => (rssPeakMb = Math.max(rssPeakMb, rssMb(server.pid))), 50);
    const start = performance.now();
    await new Promise<void>((resolve, reject) =>
      execFile('git', ['-C', work, 'push', '-q', url.toString(), 'main'], { env: gitEnv }, (err, _o, stderr) => (err ? reject(new Error(stderr)) : resolve())),
    );
    const seconds = (performance.now() - start) / 1000;
    clearInterval(sampler);
    const branches = await api(server, 'GET', `/projects/${project.id}/repository/branches`);
    if (!branches.some((b: { name: string }) => b.name === 'main')) throw new Error('the pushed branch is missing');
    return { packMb: MEGABYTES, seconds, rssBeforeMb, rssPeakMb };
  } finally {
    await server.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

export function printPushResult(r: PushBenchResult) {
  const growth = r.rssPeakMb - r.rssBeforeMb;
  console.log(`push of ${r.packMb} MB: ${r.seconds.toFixed(1)} s (${(r.packMb / r.seconds).toFixed(0)} MB/s)`);
  console.log(
    `server RSS before ${r.rssBeforeMb.toFixed(0)} MB, peak ${r.rssPeakMb.toFixed(0)} MB, growth ${growth.toFixed(0)} MB (target < ${TARGET_GROWTH_MB} MB) ${growth < TARGET_GROWTH_MB ? '✓' : '✗'}`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}`);
  printPushResult(await runPushBench());
}
