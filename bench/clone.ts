// Clone benchmark: `git clone` over Cairn's smart HTTP versus `git clone --no-local` of the same
// bare repository (git's own upload-pack over a pipe: the floor). The repository is the
// 10,000-commit one of bench/repository.ts; the server runs in its own process (bench/lib.ts),
// on PostgreSQL when DATABASE_URL is set, else on a fresh embedded database.
// Target: Cairn >= 0.8 of the floor's speed. Run: `node --import tsx bench/clone.ts [runs]`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BENCH_TOKEN, formatTimings, median, startServer, timeClones } from './lib.js';
import { createBigRepository } from './repository.js';

export interface CloneBenchResult {
  floorMs: number[];
  cairnMs: number[];
  /** Speed of Cairn relative to the floor, from the medians (1.0 = as fast). */
  ratio: number;
}

export async function runCloneBench(runs = Number(process.env.BENCH_CLONE_RUNS || 7)): Promise<CloneBenchResult> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-bench-clone-'));
  const env = { PATH: process.env.PATH, HOME: tmp, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' };
  const server = await startServer();
  try {
    const { project, gitDir, importMs } = await createBigRepository(server, 'bench-clone');
    console.log(`repository: ${process.env.BENCH_COMMITS || 10_000} commits imported in ${importMs} ms`);
    const url = new URL(`${server.url}/${project.path_with_namespace}.git`);
    url.username = 'oauth2';
    url.password = BENCH_TOKEN;
    const cairnArgs = ['clone', '-q', url.toString()];
    const floorArgs = ['clone', '-q', '--no-local', gitDir];
    const { floorMs, cairnMs } = await timeClones(tmp, env, floorArgs, cairnArgs, runs);
    return { floorMs, cairnMs, ratio: median(floorMs) / median(cairnMs) };
  } finally {
    await server.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

export function printCloneResult(r: CloneBenchResult) {
  const fmt = formatTimings;
  console.log(`git clone --no-local (floor): ${fmt(r.floorMs)}`);
  console.log(`git clone over Cairn HTTP:    ${fmt(r.cairnMs)}`);
  console.log(`speed ratio Cairn/floor: ${r.ratio.toFixed(2)} (target >= 0.80) ${r.ratio >= 0.8 ? 'OK' : 'BELOW TARGET'}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}`);
  printCloneResult(await runCloneBench(process.argv[2] ? Number(process.argv[2]) : undefined));
}
