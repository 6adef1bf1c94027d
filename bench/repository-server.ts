// Child process of bench/repository.ts: a Cairn app (PostgreSQL when DATABASE_URL is set, else
// embedded) with one project whose repository has 10,000 commits made by git fast-import,
// listening on port 0. Sends the URLs to read to its parent.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { insertProject, projectRepoPath } from '../src/services/projects.js';
import { personalNamespaceOf } from '../src/services/users.js';

const COMMITS = Number(process.env.BENCH_COMMITS || 10_000);
const TOKEN = 'bench-root-token-0123456789';

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

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-bench-repo-'));
const config = loadConfig({ ...process.env, CAIRN_DATA_DIR: dataDir, CAIRN_ROOT_TOKEN: TOKEN, CAIRN_ROOT_PASSWORD: 'bench-password-123', CAIRN_LOG_LEVEL: 'warn' });
const app = await buildApp({ config, logger: false });
const root = await app.cairn.db.selectFrom('users').select('id').where('username', '=', 'root').executeTakeFirstOrThrow();
const namespace = (await personalNamespaceOf(app.cairn.db, root.id))!;
const project = await insertProject(app.cairn, { name: `bench-${Date.now()}`, path: `bench-${Date.now()}`, namespace_id: namespace.id, creator_id: root.id, visibility_level: 0, default_branch: 'main' });
const gitDir = projectRepoPath(app.cairn, project);
const started = Date.now();
execFileSync('git', ['--git-dir', gitDir, 'fast-import', '--quiet'], { input: fastImportStream(COMMITS), env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' } });
execFileSync('git', ['--git-dir', gitDir, 'repack', '-adq']);
const importMs = Date.now() - started;
const readme = execFileSync('git', ['--git-dir', gitDir, 'rev-parse', 'main:README.md']).toString().trim();
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address() as { port: number };
const base = `http://127.0.0.1:${address.port}/api/v4/projects/${project.id}/repository`;
const hasCommits = app.hasRoute({ method: 'GET', url: '/api/v4/projects/:id/repository/commits' });
process.send!({ base, readme, token: TOKEN, importMs, commits: COMMITS, hasCommits });
process.on('message', async (m) => {
  if (m === 'stop') {
    await app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    process.exit(0);
  }
});
