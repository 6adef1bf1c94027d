// Repository read benchmark: a 10,000-commit repository (git fast-import), then autocannon
// against GET .../repository/tree, GET .../repository/blobs/:sha/raw and
// GET .../repository/commits?per_page=20. The server runs in its own process (bench/lib.ts),
// on a fresh database. Target: tree and raw blob >= 2,000 req/s.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { hashedDiskPath } from '../src/git/repository.js';
import { api, BENCH_TOKEN, load, printTable, startServer, type BenchServer, type LoadResult } from './lib.js';

const COMMITS = Number(process.env.BENCH_COMMITS || 10_000);

function fastImportStream(commits: number): Buffer {
  const parts: string[] = [];
  let mark = 0;
  const blob = (content: string) => {
    parts.push(`blob\nmark :${++mark}\ndata ${Buffer.byteLength(content)}\n${content}\n`);
    return mark;
  };
  for (let i = 0; i < commits; i++) {
    const files: [string, number][] = [];
    if (i === 0) {
      files.push(['README.md', blob('# Bench repository\n\n' + 'Lorem ipsum dolor sit amet. '.repeat(40) + '\n')]);
      for (let d = 0; d < 10; d++) for (let f = 0; f < 10; f++) files.push([`src/dir${d}/file${f}.ts`, blob(`export const v${d}${f} = ${d * f};\n`)]);
    }
    files.push([`src/dir${i % 10}/file${(i >> 4) % 10}.ts`, blob(`export const value = ${i};\n`)]);
    files.push([`log/${i % 50}.txt`, blob(`commit ${i}\n`)]);
    const time = 1600000000 + i * 60;
    const message = `Change number ${i}\n`;
    parts.push(
      `commit refs/heads/main\nmark :${++mark}\nauthor Bench Author <author${i % 7}@example.com> ${time} +0200\ncommitter Bench Committer <committer@example.com> ${time} +0200\n` +
        `data ${Buffer.byteLength(message)}\n${message}` +
        files.map(([p, m]) => `M 100644 :${m} ${p}\n`).join('') +
        '\n',
    );
  }
  return Buffer.from(parts.join(''));
}

export interface BigRepositoryOptions {
  /** A git fast-import stream; the default is this file's COMMITS-commit history. */
  stream?: Buffer;
  visibility?: 'private' | 'internal' | 'public';
  /**
   * Recompute deltas (`git repack -a -d -f`) before housekeeping, as a push from a client
   * would have delivered them: fast-import's own deltas are poor and its pack several times larger.
   */
  recomputeDeltas?: boolean;
}

/** A project whose repository holds the given history (COMMITS commits by default), written straight into its storage. */
export async function createBigRepository(server: BenchServer, name: string, opts: BigRepositoryOptions = {}) {
  const project = await api(server, 'POST', '/projects', { name, visibility: opts.visibility ?? 'private' });
  const gitDir = path.join(server.dataDir, 'repositories', hashedDiskPath('project', project.id));
  const started = Date.now();
  const env = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' };
  execFileSync('git', ['--git-dir', gitDir, 'fast-import', '--quiet'], { input: opts.stream ?? fastImportStream(COMMITS), env, maxBuffer: 1 << 30 });
  if (opts.recomputeDeltas) execFileSync('git', ['--git-dir', gitDir, 'repack', '-a', '-d', '-f', '-q'], { env });
  // What a deployment does after pushes: repack and write the commit-graph.
  await api(server, 'POST', `/projects/${project.id}/housekeeping`, { task: 'eager' });
  const readme = execFileSync('git', ['--git-dir', gitDir, 'rev-parse', 'main:README.md'], { env }).toString().trim();
  return { project, gitDir, readme, importMs: Date.now() - started };
}

export async function runRepositoryBench(): Promise<LoadResult[]> {
  const server = await startServer();
  try {
    const { project, readme, importMs } = await createBigRepository(server, 'bench-repository');
    console.log(`repository: ${COMMITS} commits imported in ${importMs} ms`);
    const base = `${server.url}/api/v4/projects/${project.id}/repository`;
    const headers = { 'private-token': BENCH_TOKEN };
    // Warm up (JIT, database pool, cat-file processes) before measuring.
    for (const p of ['/tree', `/blobs/${readme}/raw`, '/commits?per_page=20']) await load('warm-up', base + p, { headers, seconds: 2 });
    return [
      await load('GET /repository/tree', `${base}/tree`, { headers }),
      await load('GET /repository/tree?recursive=true&per_page=100', `${base}/tree?recursive=true&per_page=100`, { headers }),
      await load('GET /repository/blobs/:sha/raw', `${base}/blobs/${readme}/raw`, { headers }),
      await load('GET /repository/commits?per_page=20', `${base}/commits?per_page=20`, { headers }),
    ];
  } finally {
    await server.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}`);
  printTable(await runRepositoryBench());
}
