// Repository read benchmark: a 10,000-commit repository (git fast-import), then autocannon
// against GET .../repository/tree, GET .../repository/blobs/:sha/raw and, when that route
// exists, GET .../repository/commits?per_page=20. The server runs in a child process so the
// load generator does not share its event loop. Target: tree and raw blob >= 2,000 req/s.
import { fork } from 'node:child_process';
import path from 'node:path';
import { load, printTable, ROOT, type LoadResult } from './lib.js';

interface Ready {
  base: string;
  readme: string;
  token: string;
  importMs: number;
  commits: number;
  hasCommits: boolean;
}

export async function runRepositoryBench(): Promise<LoadResult[]> {
  const child = fork(path.join(ROOT, 'bench/repository-server.ts'), [], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  try {
    const ready = await new Promise<Ready>((resolve, reject) => {
      child.once('message', (m) => resolve(m as Ready));
      child.once('exit', (code) => reject(new Error(`bench server exited (${code})`)));
    });
    console.log(`repository: ${ready.commits} commits imported in ${ready.importMs} ms`);
    const headers = { 'private-token': ready.token };
    const rows: LoadResult[] = [];
    // Warm up (JIT, lazily compiled modules, database pool, cat-file processes) before measuring.
    for (const p of ['/tree', `/blobs/${ready.readme}/raw`]) await load('warm-up', ready.base + p, { headers, seconds: 2 });
    rows.push(await load('GET /repository/tree', `${ready.base}/tree`, { headers }));
    rows.push(await load('GET /repository/tree?recursive=true&per_page=100', `${ready.base}/tree?recursive=true&per_page=100`, { headers }));
    rows.push(await load('GET /repository/blobs/:sha/raw', `${ready.base}/blobs/${ready.readme}/raw`, { headers }));
    if (ready.hasCommits) rows.push(await load('GET /repository/commits?per_page=20', `${ready.base}/commits?per_page=20`, { headers }));
    else console.log('note: GET /repository/commits is not in this branch; skipped');
    return rows;
  } finally {
    child.send('stop');
    await new Promise((r) => child.once('exit', r));
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}`);
  const rows = await runRepositoryBench();
  printTable(rows);
  for (const r of rows.filter((x) => !x.name.includes('recursive') && !x.name.includes('commits'))) {
    console.log(`${r.name}: ${r.rps >= 2000 ? 'meets' : 'below'} the 2,000 req/s target`);
  }
}
