import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { commitPathChanges } from '../../src/git/compare.js';
import { initBareRepository } from '../../src/git/repository.js';
import { buildCommit } from '../../src/git/write.js';
import { generateHistory } from '../helpers/repo.js';

describe('commitPathChanges: what commits changed, in one git process', () => {
  let dir: string;
  let repo: string;
  const who = { name: 'T', email: 't@example.com', time: 1700000000, tz: '+0000' };
  /** Commits with their parents, as readCommits would give them. */
  const withParents = (gitDir: string, oids: string[]) =>
    oids.map((oid) => {
      const [, ...parents] = git(gitDir, 'rev-list', '--parents', '-n', '1', oid).split(' ');
      return { oid, parents };
    });
  const git = (gitDir: string, ...args: string[]) => execFileSync('git', ['--git-dir', gitDir, ...args], { encoding: 'utf8', maxBuffer: 1 << 28 }).trim();
  /** One commit on `parents` (the first parent's tree, changed by `files`: null deletes). */
  const commit = async (parents: string[], files: Record<string, string | null>, message = 'c') => {
    const parent = parents[0] ?? null;
    const { commit: oid } = await buildCommit(repo, {
      parent,
      message,
      author: who,
      committer: who,
      actions: Object.entries(files).map(([p, content]) =>
        content === null ? { action: 'delete' as const, path: p } : { action: (parent && git(repo, 'ls-tree', parent, '--', p) ? 'update' : 'create') as 'update' | 'create', path: p, content: Buffer.from(content) }),
    });
    if (parents.length < 2) return oid;
    // A merge: the same tree, with every parent.
    const tree = git(repo, 'rev-parse', `${oid}^{tree}`);
    return execFileSync('git', ['--git-dir', repo, 'commit-tree', tree, ...parents.flatMap((p) => ['-p', p]), '-m', 'merge'], {
      encoding: 'utf8',
      env: { ...process.env, GIT_AUTHOR_NAME: 'T', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 'T', GIT_COMMITTER_EMAIL: 't@example.com' },
    }).trim();
  };

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'compare-'));
    repo = path.join(dir, 'r.git');
    await initBareRepository(repo);
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('lists added, modified and removed paths per commit: a root, a rename, a merge, an empty commit, a name that looks like an id', async () => {
    const hexName = 'f'.repeat(40);
    const root = await commit([], { 'a.txt': 'a\n', 'b.txt': 'b\n', 'dir/c.txt': 'c\n' }, 'root');
    const second = await commit([root], { 'a.txt': 'a2\n', 'b.txt': null, [hexName]: 'looks like an id\n', 'with space.txt': 'spaced\n' });
    const renamed = await commit([second], { 'dir/c.txt': null, 'dir/moved.txt': 'c\n' });
    const side = await commit([root], { 'side.txt': 's\n' });
    const merge = await commit([renamed, side], { 'side.txt': 's\n' });
    const empty = git(repo, 'commit-tree', `${merge}^{tree}`, '-p', merge, '-m', 'empty');

    const changes = await commitPathChanges(repo, withParents(repo, [root, second, renamed, merge, empty]));
    assert.deepEqual(changes.get(root), { added: ['a.txt', 'b.txt', 'dir/c.txt'], modified: [], removed: [] });
    assert.deepEqual(changes.get(second), { added: [hexName, 'with space.txt'], modified: ['a.txt'], removed: ['b.txt'] });
    // Renames show as a remove and an add, as in GitLab's push payloads.
    assert.deepEqual(changes.get(renamed), { added: ['dir/moved.txt'], modified: [], removed: ['dir/c.txt'] });
    // A merge: against its first parent only.
    assert.deepEqual(changes.get(merge), { added: ['side.txt'], modified: [], removed: [] });
    assert.equal(changes.has(empty), false);
    assert.equal((await commitPathChanges(repo, [])).size, 0);
  });

  it('answers for a thousand commits of a generated history as git does one by one', async () => {
    const big = path.join(dir, 'big.git');
    generateHistory(big, { commits: 1000, files: 200 });
    const listed = git(big, 'rev-list', '--parents', 'main').split('\n').map((l) => l.split(' '));
    const oids = listed.map(([oid]) => oid);
    assert.equal(oids.length, 1000);
    const changes = await commitPathChanges(big, listed.map(([oid, ...parents]) => ({ oid, parents })));
    assert.equal(changes.size, 1000);
    // The root added every file; each later commit changed one (added the first time it is touched).
    assert.equal(changes.get(oids.at(-1)!)!.added.length, 200);
    for (const oid of oids.slice(0, 20)) {
      const one = git(big, 'diff-tree', '--no-commit-id', '--root', '-r', '--no-renames', '--name-status', '-m', '--first-parent', oid).split('\n');
      const c = changes.get(oid)!;
      assert.deepEqual([...c.added.map((p) => `A\t${p}`), ...c.modified.map((p) => `M\t${p}`), ...c.removed.map((p) => `D\t${p}`)].sort(), one.sort(), oid);
    }
  });
});
