import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { git, startGit } from '../../src/git/command.js';

describe('startGit (git through the spawner process)', () => {
  let dir: string;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-spawner-test-'));
    await git(['init', '--bare', '-q', dir], { cwd: dir });
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  const readAll = async (s: NodeJS.ReadableStream) => {
    const chunks: Buffer[] = [];
    for await (const c of s) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  };

  it('streams stdin to git and stdout back, with the exit code', async () => {
    const proc = await startGit(['hash-object', '-w', '--stdin'], { gitDir: dir });
    proc.stdin.end('hello\n');
    const [out, exit] = await Promise.all([readAll(proc.stdout), proc.exited]);
    assert.equal(out.toString().trim(), 'ce013625030ba8dba906f756967f9e9ca394464a');
    assert.deepEqual(exit, { code: 0, signal: null });
  });

  it('carries large outputs completely and reports stderr and failures', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 'x');
    const w = await startGit(['hash-object', '-w', '--stdin'], { gitDir: dir });
    w.stdin.end(big);
    const oid = (await readAll(w.stdout)).toString().trim();
    const r = await startGit(['cat-file', 'blob', oid], { gitDir: dir });
    r.stdin.end();
    const [content] = await Promise.all([readAll(r.stdout), r.exited]);
    assert.equal(content.length, big.length);
    assert.ok(content.equals(big));

    const bad = await startGit(['cat-file', 'blob', 'no-such-object'], { gitDir: dir });
    bad.stdin.end();
    const [, stderr, exit] = await Promise.all([readAll(bad.stdout), readAll(bad.stderr), bad.exited]);
    assert.equal(exit.code, 128);
    assert.match(stderr.toString(), /no-such-object/);
  });

  it('kills a running git, and many run at once', async () => {
    const proc = await startGit(['cat-file', '--batch'], { gitDir: dir });
    proc.stdout.resume();
    proc.kill();
    // Ends (killed, or on the EOF the closed socket gives it) instead of waiting for input.
    const exit = await proc.exited;
    assert.ok(exit.code === 0 || exit.code === null || exit.signal !== null);
    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const p = await startGit(['hash-object', '--stdin'], { gitDir: dir });
        p.stdin.end(`content ${i}\n`);
        return (await readAll(p.stdout)).toString().trim();
      }),
    );
    assert.equal(new Set(results).size, 20);
  });
});
