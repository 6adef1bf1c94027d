// Repository read benchmark: a 10,000-commit repository (git fast-import), then autocannon
// against every repository read: trees, blobs, the files API (raw, metadata, blame), commits,
// a single commit, branches, tags, compare and archives. The server runs in its own process
// (bench/lib.ts), on a fresh database. Target: each >= 2,000 req/s.
// BENCH_ONLY=<substring> measures only the rows whose name contains it.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { hashedDiskPath } from '../src/git/repository.js';
import { api, BENCH_TOKEN, load, printTable, startServer, type BenchServer, type LoadResult } from './lib.js';

const COMMITS = Number(process.env.BENCH_COMMITS || 10_000);

export function fastImportStream(commits: number): Buffer {
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
  const head = execFileSync('git', ['--git-dir', gitDir, 'rev-parse', 'main'], { env }).toString().trim();
  return { project, gitDir, readme, head, importMs: Date.now() - started };
}

export async function runRepositoryBench(): Promise<LoadResult[]> {
  const server = await startServer();
  try {
    const { project, gitDir, readme, head, importMs } = await createBigRepository(server, 'bench-repository');
    console.log(`repository: ${COMMITS} commits imported in ${importMs} ms`);
    const env = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' };
    for (let i = 1; i <= 5; i++) execFileSync('git', ['--git-dir', gitDir, 'tag', `v1.${i}`, `main~${i * 100}`], { env });
    const base = `${server.url}/api/v4/projects/${project.id}/repository`;
    const headers = { 'private-token': BENCH_TOKEN };
    const file = encodeURIComponent('src/dir3/file4.ts');
    const rows: [string, string][] = [
      ['GET /repository/tree', '/tree'],
      ['GET /repository/tree?path=src/dir3', '/tree?path=src/dir3'],
      ['GET /repository/tree?recursive=true&per_page=100', '/tree?recursive=true&per_page=100'],
      ['GET /repository/blobs/:sha/raw', `/blobs/${readme}/raw`],
      ['GET /repository/files/:path/raw?ref=main', `/files/${file}/raw?ref=main`],
      ['GET /repository/files/:path?ref=main', `/files/${file}?ref=main`],
      ['GET /repository/files/:path/blame?ref=main', `/files/${file}/blame?ref=main`],
      ['GET /repository/commits?per_page=20', '/commits?per_page=20'],
      ['GET /repository/commits/:sha', `/commits/${head}`],
      ['GET /repository/branches', '/branches'],
      ['GET /repository/tags', '/tags'],
      ['GET /repository/compare?from=main~5&to=main', '/compare?from=main~5&to=main'],
      ['GET /repository/archive.tar.gz?sha=main', '/archive.tar.gz?sha=main'],
    ];
    const only = process.env.BENCH_ONLY;
    const chosen = rows.filter(([name]) => !only || name.includes(only));
    // Warm up (JIT, database pool, cat-file processes) before measuring.
    for (const [, p] of chosen) await load('warm-up', base + p, { headers, seconds: 2 });
    const results: LoadResult[] = [];
    for (const [name, p] of chosen) results.push(await load(name, base + p, { headers }));
    return results;
  } finally {
    await server.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}`);
  printTable(await runRepositoryBench());
}
