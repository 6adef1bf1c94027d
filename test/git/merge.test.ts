import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CatFilePool } from '../../src/git/catfile.js';
import { buildMerge, checkMerge, divergence, isAncestor, mergeBaseOf, publish, rebaseOnto } from '../../src/git/merge.js';
import { initBareRepository } from '../../src/git/repository.js';
import { buildCommit } from '../../src/git/write.js';

describe('merge request git operations', () => {
  let dir: string;
  let repo: string;
  const pool = new CatFilePool();
  const who = { name: 'T', email: 't@example.com', time: 1700000000, tz: '+0200' };
  const git = (...args: string[]) => execFileSync('git', ['--git-dir', repo, ...args], { encoding: 'utf8' }).trim();
  const commit = async (parent: string | null, files: Record<string, string | null>, message = 'c') =>
    (await buildCommit(repo, {
      parent,
      message,
      author: who,
      committer: who,
      actions: Object.entries(files).map(([p, content]) =>
        content === null ? { action: 'delete' as const, path: p } : { action: (parent && git('ls-tree', parent, p) ? 'update' : 'create') as 'update' | 'create', path: p, content: Buffer.from(content) }),
    })).commit;

  let base: string;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'merge-'));
    repo = path.join(dir, 'r.git');
    await initBareRepository(repo);
    base = await commit(null, { 'a.txt': 'one\ntwo\nthree\n', 'b.txt': 'b\n' }, 'base');
  });
  after(async () => {
    await pool.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('merges clean histories into a two-parent commit and publishes it only from the expected old value', async () => {
    const target = await commit(base, { 'b.txt': 'b changed on target\n' }, 'target change');
    const source = await commit(base, { 'c.txt': 'new\n' }, 'source change');
    git('update-ref', 'refs/heads/main', target);
    assert.deepEqual(await divergence(repo, target, source), { behind: 1, ahead: 1 });
    assert.equal(await mergeBaseOf(repo, target, source), base);
    const check = await checkMerge(repo, target, source);
    assert.equal(check.status, 'clean');
    const out = await buildMerge(repo, { targetOid: target, sourceOid: source, mergeMessage: 'Merge branch', committer: who });
    assert.equal(out.status, 'merged');
    if (out.status !== 'merged') return;
    assert.equal(git('rev-parse', `${out.head}^1`), target);
    assert.equal(git('rev-parse', `${out.head}^2`), source);
    assert.equal(git('show', `${out.head}:b.txt`), 'b changed on target');
    assert.equal(git('show', `${out.head}:c.txt`), 'new');
    // Two merges racing: the second compare-and-swap finds the branch moved and fails.
    const other = await buildMerge(repo, { targetOid: target, sourceOid: source, mergeMessage: 'Merge again', committer: who });
    assert.equal(await publish(repo, 'refs/heads/main', out.head, target), true);
    assert.equal(other.status === 'merged' && (await publish(repo, 'refs/heads/main', other.head, target)), false);
    assert.equal(git('rev-parse', 'refs/heads/main'), out.head);
    assert.equal((await buildMerge(repo, { targetOid: out.head, sourceOid: source, mergeMessage: 'x', committer: who })).status, 'empty');
  });

  it('reports conflicts with their paths and moves nothing', async () => {
    const target = await commit(base, { 'a.txt': 'one\nTWO on target\nthree\n' });
    const source = await commit(base, { 'a.txt': 'one\ntwo on source\nthree\n' });
    const check = await checkMerge(repo, target, source);
    assert.deepEqual(check, { status: 'conflict', paths: ['a.txt'] });
    assert.deepEqual(await buildMerge(repo, { targetOid: target, sourceOid: source, mergeMessage: 'm', committer: who }), { status: 'conflict', paths: ['a.txt'] });
  });

  it('squashes the source into one commit on the merge base, then merges it', async () => {
    const target = await commit(base, { 'b.txt': 'target\n' });
    const s1 = await commit(base, { 'd.txt': '1\n' }, 's1');
    const s2 = await commit(s1, { 'd.txt': '2\n', 'e.txt': 'e\n' }, 's2');
    const out = await buildMerge(repo, {
      targetOid: target, sourceOid: s2, mergeMessage: 'Merge squashed', committer: who,
      squash: { message: 'All of it', author: { name: 'A', email: 'a@example.com' } },
    });
    assert.equal(out.status, 'merged');
    if (out.status !== 'merged') return;
    assert.ok(out.squashCommit);
    assert.equal(git('rev-parse', `${out.squashCommit}^`), base);
    assert.equal(git('log', '-1', '--format=%an %s', out.squashCommit!), 'A All of it');
    assert.equal(git('rev-parse', `${out.head}^2`), out.squashCommit);
    assert.equal(git('show', `${out.head}:d.txt`), '2');
    // Fast-forward form: no merge commit, the squash commit itself.
    const ff = await buildMerge(repo, { targetOid: base, sourceOid: s2, mergeMessage: null, committer: who, squash: { message: 'sq', author: who } });
    assert.ok(ff.status === 'merged' && ff.mergeCommit === null && ff.head === ff.squashCommit);
  });

  it('rebases commit by commit, keeping authors, dropping changes already upstream, stopping at a conflict', async () => {
    const target = await commit(base, { 'b.txt': 'upstream\n', 'f.txt': 'same\n' }, 'upstream');
    const s1 = await commit(base, { 'g.txt': 'g\n' }, 'feature one');
    const s2 = await commit(s1, { 'f.txt': 'same\n' }, 'already upstream');
    const s3 = await commit(s2, { 'h.txt': 'h\n' }, 'feature two');
    const committer = { name: 'Rebaser', email: 'r@example.com' };
    const out = await rebaseOnto(pool, repo, target, s3, committer);
    assert.equal(out.status, 'rebased');
    if (out.status !== 'rebased') return;
    assert.equal(git('log', '--format=%s|%an|%cn', `${target}..${out.head}`), 'feature two|T|Rebaser\nfeature one|T|Rebaser');
    assert.ok(await isAncestor(repo, target, out.head));
    assert.equal(git('show', `${out.head}:h.txt`), 'h');
    assert.deepEqual(await rebaseOnto(pool, repo, target, out.head, committer), { status: 'up_to_date' });

    const clash = await commit(base, { 'b.txt': 'feature edit\n' }, 'clash');
    const res = await rebaseOnto(pool, repo, target, clash, committer);
    assert.deepEqual(res, { status: 'conflict', commit: clash });
  });
});
