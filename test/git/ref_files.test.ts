import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { readPackedRefs, readRefs } from '../../src/git/ref_files.js';
import { replaceRefsState } from '../../src/git/history_memo.js';

describe('ref files read in-process', () => {
  let dir: string;
  let bare: string;
  let first: string;
  let second: string;
  const git = (...args: string[]) =>
    execFileSync('git', ['--git-dir', bare, '-c', 'user.name=T', '-c', 'user.email=t@example.com', ...args], {
      env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
    })
      .toString()
      .trim();
  /** What git itself lists: the reference every case is checked against. */
  const forEachRef = (prefix: string) =>
    git('for-each-ref', '--format=%(objectname) %(refname)', prefix)
      .split('\n')
      .filter(Boolean)
      .map((line) => ({ ref: line.slice(41), oid: line.slice(0, 40) }));
  const sameAsGit = async (prefix: string) => assert.deepEqual(await readRefs(bare, prefix), forEachRef(prefix));

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ref-files-'));
    bare = path.join(dir, 'repo.git');
    execFileSync('git', ['init', '-q', '--bare', bare], { env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' } });
    const tree = git('hash-object', '-t', 'tree', '-w', '/dev/null');
    first = git('commit-tree', tree, '-m', 'first');
    second = git('commit-tree', tree, '-p', first, '-m', 'second');
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('lists loose and packed refs as for-each-ref does: a loose ref overrides its packed value', async () => {
    for (const name of ['main', 'feature/a/b', 'feature/z', 'Zeta', 'äpfel', 'b-\u{1F600}', 'b-\uFFFD', 'x.y']) git('update-ref', `refs/heads/${name}`, first);
    git('tag', 'v1', first);
    git('tag', '-a', '-m', 'annotated', 'v2', second);
    await sameAsGit('refs/heads/');
    await sameAsGit('refs/tags/');
    git('pack-refs', '--all');
    assert.equal(fs.existsSync(path.join(bare, 'refs/heads/main')), false, 'packed');
    await sameAsGit('refs/heads/');
    // Updated after packing: a loose file again, which wins over the packed line.
    git('update-ref', 'refs/heads/main', second);
    git('update-ref', 'refs/heads/new', second);
    assert.equal((await readRefs(bare, 'refs/heads/'))!.find((r) => r.ref === 'refs/heads/main')?.oid, second);
    await sameAsGit('refs/heads/');
    git('update-ref', '-d', 'refs/heads/feature/z');
    git('update-ref', '-d', 'refs/tags/v1');
    await sameAsGit('refs/heads/');
    await sameAsGit('refs/tags/');
  });

  it('follows symbolic refs and leaves out broken refs, lock files and invalid names, as git does', async () => {
    git('symbolic-ref', 'refs/heads/alias', 'refs/heads/main');
    git('symbolic-ref', 'refs/heads/dangling', 'refs/heads/nowhere');
    fs.writeFileSync(path.join(bare, 'refs/heads/broken'), 'not an object id\n');
    fs.writeFileSync(path.join(bare, 'refs/heads/main.lock'), `${first}\n`);
    fs.writeFileSync(path.join(bare, 'refs/heads/.hidden'), `${first}\n`);
    try {
      const refs = (await readRefs(bare, 'refs/heads/'))!;
      assert.equal(refs.find((r) => r.ref === 'refs/heads/alias')?.oid, second);
      for (const left of ['dangling', 'broken', 'main.lock', '.hidden']) assert.ok(!refs.some((r) => r.ref === `refs/heads/${left}`), left);
      assert.deepEqual(
        refs.filter((r) => r.ref !== 'refs/heads/alias').map((r) => r.ref),
        forEachRef('refs/heads/').map((r) => r.ref).filter((r) => r !== 'refs/heads/alias'),
      );
    } finally {
      for (const f of ['alias', 'dangling', 'broken', 'main.lock', '.hidden']) fs.rmSync(path.join(bare, 'refs/heads', f), { force: true });
    }
    await sameAsGit('refs/heads/');
  });

  it('sees packed-refs rewritten at once, also within the same second and at the same size', async () => {
    git('pack-refs', '--all');
    const before = await readPackedRefs(bare);
    assert.equal(before!.refs.get('refs/heads/main'), second);
    // Same length, same second: only the content differs.
    git('update-ref', 'refs/heads/main', first);
    git('pack-refs', '--all');
    assert.equal((await readPackedRefs(bare))!.refs.get('refs/heads/main'), first);
    assert.equal((await readRefs(bare, 'refs/heads/'))!.find((r) => r.ref === 'refs/heads/main')?.oid, first);
  });

  it('replace refs, loose or packed, make the replace-ref state unknown at once', async () => {
    const clean = await replaceRefsState(bare);
    assert.ok(clean);
    git('replace', second, first);
    assert.equal(await replaceRefsState(bare), null);
    git('pack-refs', '--all');
    fs.rmSync(path.join(bare, 'refs/replace'), { recursive: true, force: true });
    assert.equal(await replaceRefsState(bare), null, 'packed');
    git('update-ref', '-d', `refs/replace/${second}`);
    // Deleting leaves the refs/replace directory behind (git locks the ref there), which still counts.
    assert.equal(await replaceRefsState(bare), null);
    fs.rmSync(path.join(bare, 'refs/replace'), { recursive: true, force: true });
    assert.ok(await replaceRefsState(bare));
  });
});
