import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Project } from '../../src/db/schema/core.js';
import { projectRepoPath } from '../../src/services/projects.js';
import type { TestContext } from './app.js';

/** A work tree whose commits are pushed straight into a project's bare repository. */
export class WorkTree {
  private tick = 0;
  constructor(readonly dir: string, readonly bare: string) {}

  git(args: string[], env: Record<string, string> = {}): string {
    return execFileSync('git', args, {
      cwd: this.dir,
      env: {
        ...process.env,
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_AUTHOR_NAME: 'Ann Author',
        GIT_AUTHOR_EMAIL: 'ann@example.com',
        GIT_COMMITTER_NAME: 'Carl Committer',
        GIT_COMMITTER_EMAIL: 'carl@example.com',
        ...env,
      },
      maxBuffer: 64 * 1024 * 1024,
    })
      .toString('utf8')
      .trim();
  }

  write(file: string, content: string | Buffer) {
    const full = path.join(this.dir, file);
    fs.mkdirSync(path.dirname(full), { recursive: true });
    fs.writeFileSync(full, content);
  }

  remove(file: string) {
    fs.rmSync(path.join(this.dir, file), { recursive: true, force: true });
  }

  /** Commits everything; dates advance one minute per commit (+0200 offset). */
  commit(message: string, opts: { author?: [string, string] } = {}): string {
    const date = `${1700000000 + 60 * ++this.tick} +0200`;
    const env: Record<string, string> = { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date };
    if (opts.author) Object.assign(env, { GIT_AUTHOR_NAME: opts.author[0], GIT_AUTHOR_EMAIL: opts.author[1] });
    this.git(['add', '-A']);
    this.git(['commit', '-q', '--allow-empty', '-m', message], env);
    return this.git(['rev-parse', 'HEAD']);
  }

  push(...refspecs: string[]) {
    this.git(['push', '-q', '-f', this.bare, ...(refspecs.length ? refspecs : ['--all'])]);
  }
}

export function workTree(t: TestContext, project: Project): WorkTree {
  const dir = fs.mkdtempSync(path.join(t.tmpDir, 'work-'));
  const w = new WorkTree(dir, projectRepoPath(t.app.cairn, project));
  w.git(['init', '-q', '-b', project.default_branch ?? 'main']);
  return w;
}

/**
 * Writes a generated history into the repository at `gitDir` (created if needed) with
 * `git fast-import`: `commits` commits on `branch`, over `files` files spread across folders,
 * each commit changing one file. Content is varied enough that the pack is several MB at
 * 10,000 commits. Returns the tip commit id.
 */
export function generateHistory(gitDir: string, opts: { commits: number; files?: number; branch?: string }): string {
  const files = opts.files ?? 600;
  const branch = opts.branch ?? 'main';
  const parts: string[] = [];
  let mark = 0;
  const blob = (content: string) => {
    parts.push(`blob\nmark :${++mark}\ndata ${Buffer.byteLength(content)}\n${content}\n`);
    return mark;
  };
  const fileName = (i: number) => `src/dir${i % 20}/file${Math.floor(i / 20)}.ts`;
  for (let c = 0; c < opts.commits; c++) {
    const changes: [string, number][] = [];
    if (c === 0) for (let f = 0; f < files; f++) changes.push([fileName(f), blob(`export const value${f} = ${f};\n`)]);
    const f = (c * 7919) % files;
    changes.push([fileName(f), blob(`export const value${f} = ${c}; // revision ${c} of file ${f}\n`.repeat(1 + (c % 5)))]);
    const time = 1_600_000_000 + c * 60;
    const message = `Change ${c} to ${fileName(f)}\n`;
    parts.push(
      `commit refs/heads/${branch}\nmark :${++mark}\n` +
        `author Gen Author <author${c % 7}@example.com> ${time} +0000\ncommitter Gen Committer <committer@example.com> ${time} +0000\n` +
        `data ${Buffer.byteLength(message)}\n${message}` +
        changes.map(([p, m]) => `M 100644 :${m} ${p}\n`).join('') +
        '\n',
    );
  }
  const env = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' };
  if (!fs.existsSync(gitDir)) execFileSync('git', ['init', '-q', '--bare', gitDir], { env });
  execFileSync('git', ['--git-dir', gitDir, 'fast-import', '--quiet'], { input: parts.join(''), env, maxBuffer: 1 << 30 });
  return execFileSync('git', ['--git-dir', gitDir, 'rev-parse', `refs/heads/${branch}`], { env }).toString().trim();
}
