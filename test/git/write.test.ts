import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CatFilePool } from '../../src/git/catfile.js';
import { diffLines } from '../../src/git/commits.js';
import { readRef } from '../../src/git/refs.js';
import { initBareRepository } from '../../src/git/repository.js';
import { buildCommit, compareAndSwapRef, mergeTrees, TreeActionError } from '../../src/git/write.js';

describe('git write plumbing', () => {
  let dir: string;
  let repo: string;
  const who = { name: 'T', email: 't@example.com', time: 1700000000, tz: '+0200' };
  const git = (...args: string[]) => execFileSync('git', ['--git-dir', repo, ...args], { encoding: 'utf8' }).trim();
  const pool = new CatFilePool();

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'write-'));
    repo = path.join(dir, 'r.git');
    await initBareRepository(repo);
  });
  after(async () => {
    await pool.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('builds commits from actions with a temporary index and exact identities', async () => {
    const first = await buildCommit(repo, {
      parent: null,
      message: 'first',
      author: who,
      committer: { ...who, name: 'C' },
      actions: [
        { action: 'create', path: 'a/b.txt', content: Buffer.from('b\n') },
        { action: 'create', path: 'run.sh', content: Buffer.from('#!/bin/sh\n'), executable: true },
      ],
    });
    assert.equal(git('cat-file', '-p', `${first.commit}`).includes('author T <t@example.com> 1700000000 +0200'), true);
    assert.equal(git('cat-file', '-p', `${first.commit}`).includes('committer C <t@example.com>'), true);
    assert.match(git('ls-tree', first.commit, 'run.sh'), /^100755/);
    await assert.rejects(
      buildCommit(repo, { parent: first.commit, message: 'x', author: who, committer: who, actions: [{ action: 'create', path: 'a', content: Buffer.from('') }] }),
      (e: Error) => e instanceof TreeActionError && e.message === 'A directory with this name already exists',
    );
    await assert.rejects(
      buildCommit(repo, { parent: first.commit, message: 'x', author: who, committer: who, actions: [{ action: 'create', path: 'run.sh/x', content: Buffer.from('') }] }),
      (e: Error) => e instanceof TreeActionError && e.message === 'A file with this name already exists',
    );
    // delete a file, then reuse its name as a directory in the same commit
    const reuse = await buildCommit(repo, {
      parent: first.commit,
      message: 'reuse',
      author: who,
      committer: who,
      actions: [
        { action: 'delete', path: 'run.sh' },
        { action: 'create', path: 'run.sh/inner', content: Buffer.from('i') },
      ],
    });
    assert.equal(git('show', `${reuse.commit}:run.sh/inner`), 'i');
  });

  it('compare-and-swap: creation needs absence, updates need the expected old value, one racer wins', async () => {
    const c1 = await buildCommit(repo, { parent: null, message: '1', author: who, committer: who, actions: [{ action: 'create', path: 'x', content: Buffer.from('1') }] });
    const c2 = await buildCommit(repo, { parent: c1.commit, message: '2', author: who, committer: who, actions: [{ action: 'update', path: 'x', content: Buffer.from('2') }] });
    assert.equal(await compareAndSwapRef(repo, 'refs/heads/cas', c1.commit, null), true);
    assert.equal(await compareAndSwapRef(repo, 'refs/heads/cas', c2.commit, null), false);
    assert.equal(await compareAndSwapRef(repo, 'refs/heads/cas', c2.commit, c2.commit), false);
    const results = await Promise.all(Array.from({ length: 20 }, () => compareAndSwapRef(repo, 'refs/heads/cas', c2.commit, c1.commit)));
    assert.equal(results.filter(Boolean).length, 1);
    assert.equal(await readRef(pool, repo, 'refs/heads/cas'), c2.commit);
  });

  it('three-way merges over an explicit base: clean, empty and conflicting', async () => {
    const tree = (files: Record<string, string>) => {
      const lines = Object.entries(files).map(([name, content]) => {
        const blob = execFileSync('git', ['--git-dir', repo, 'hash-object', '-w', '--stdin'], { input: content, encoding: 'utf8' }).trim();
        return `100644 blob ${blob}\t${name}`;
      });
      return execFileSync('git', ['--git-dir', repo, 'mktree'], { input: lines.join('\n') + '\n', encoding: 'utf8' }).trim();
    };
    const base = tree({ a: '1\n2\n3\n', b: 'b\n' });
    const ours = tree({ a: '1\n2\n3\n', b: 'b changed\n' });
    const theirs = tree({ a: 'one\n2\n3\n', b: 'b\n' });
    const clean = await mergeTrees(repo, base, ours, theirs);
    assert.equal(clean.status, 'ok');
    assert.equal(git('show', `${clean.tree}:a`), 'one\n2\n3');
    assert.equal((await mergeTrees(repo, base, ours, base)).status, 'empty');
    const conflicting = tree({ a: 'uno\n2\n3\n', b: 'b\n' });
    assert.equal((await mergeTrees(repo, base, conflicting, theirs)).status, 'conflict');
  });

  it('numbers diff lines', () => {
    const lines = diffLines('@@ -1,2 +1,2 @@\n-old\n+new\n same\n');
    assert.deepEqual(lines, [
      { type: 'old', oldLine: 1, newLine: 1 },
      { type: 'new', oldLine: 2, newLine: 1 },
      { type: null, oldLine: 2, newLine: 2 },
    ]);
  });
});
