import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CatFilePool, parseCommit, parseTree, signatureDate } from '../../src/git/catfile.js';

describe('cat-file pool', () => {
  let dir: string;
  let bare: string;
  const pool = new CatFilePool({ perRepository: 2 });
  const run = (args: string[], cwd: string) =>
    execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.com', ...args], {
      cwd,
      env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_AUTHOR_DATE: '1700000000 +0200', GIT_COMMITTER_DATE: '1700000000 +0200' },
    }).toString().trim();

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catfile-'));
    const work = path.join(dir, 'work');
    fs.mkdirSync(work);
    run(['init', '-q', '-b', 'main'], work);
    fs.writeFileSync(path.join(work, 'a.txt'), 'hello\n');
    fs.mkdirSync(path.join(work, 'dir'));
    fs.writeFileSync(path.join(work, 'dir', 'b.bin'), Buffer.from([0, 1, 2, 10, 255]));
    run(['add', '.'], work);
    run(['commit', '-q', '-m', 'first\n\nbody line'], work);
    bare = path.join(dir, 'bare.git');
    run(['clone', '-q', '--bare', work, bare], dir);
  });
  after(async () => {
    await pool.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads commits, trees and blobs, and reports missing objects', async () => {
    const commit = await pool.read(bare, 'main');
    assert.equal(commit?.type, 'commit');
    const parsed = parseCommit(commit!.oid, commit!.data);
    assert.equal(parsed.message, 'first\n\nbody line\n');
    assert.equal(parsed.author.email, 't@example.com');
    assert.equal(signatureDate(parsed.author), '2023-11-15T00:13:20.000+02:00');
    const tree = await pool.read(bare, parsed.tree);
    const entries = parseTree(tree!.data);
    assert.deepEqual(entries.map((e) => [e.name, e.type, e.mode]), [['a.txt', 'blob', '100644'], ['dir', 'tree', '040000']]);
    const blob = await pool.read(bare, 'main:dir/b.bin');
    assert.deepEqual([...blob!.data], [0, 1, 2, 10, 255]);
    assert.equal(await pool.read(bare, 'nope'), null);
    assert.equal((await pool.info(bare, 'main:a.txt'))?.size, 6);
  });

  it('serves many concurrent reads correctly and refuses option-like names', async () => {
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => pool.read(bare, i % 2 ? 'main:a.txt' : 'main:dir/b.bin')));
    results.forEach((r, i) => assert.equal(r!.size, i % 2 ? 6 : 5));
    await assert.rejects(() => pool.read(bare, '--help'));
    await assert.rejects(() => pool.read(bare, 'main\nmain'));
  });

  it('recovers when the repository process dies', async () => {
    await pool.read(bare, 'main');
    pool.forgetRepository(bare);
    assert.equal((await pool.read(bare, 'main:a.txt'))?.data.toString(), 'hello\n');
  });
});
