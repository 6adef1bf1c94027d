import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AddressInfo } from 'node:net';
import type { Project } from '../../src/db/schema/core.js';
import { packObjectsCacheDir } from '../../src/git/http.js';
import { createTestContext, ROOT_TOKEN, type TestContext } from '../helpers/app.js';
import { generateHistory } from '../helpers/repo.js';

const env = (home: string) => ({ PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' });

function git(args: string[], cwd: string, home: string): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile('git', args, { cwd, env: env(home), maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
      err ? reject(new Error(`git ${args.join(' ')}: ${stderr}`)) : resolve(String(stdout).trim())));
}

/** Every file of the cache, by kind. */
function cacheFiles(dir: string) {
  const subs = fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }) : [];
  const loose = subs.filter((e) => !e.isDirectory()).map((e) => e.name);
  assert.deepEqual(loose, [], 'no request input is left behind');
  const all = subs.flatMap((sub) => fs.readdirSync(path.join(dir, sub.name)).map((f) => path.join(dir, sub.name, f)));
  return { packs: all.filter((f) => f.endsWith('.pack')), locks: all.filter((f) => f.endsWith('.lock')), temps: all.filter((f) => f.endsWith('.tmp')) };
}

describe('the pack-objects cache (identical fetches share one pack)', () => {
  let t: TestContext;
  let work: string;
  let url: string;
  let cache: string;
  let tip: string;
  let project: Project;

  before(async () => {
    t = await createTestContext();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-packcache-'));
    project = await t.createProject();
    const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', project.namespace_id).executeTakeFirstOrThrow();
    url = `http://oauth2:${ROOT_TOKEN}@127.0.0.1:${(t.app.server.address() as AddressInfo).port}/${ns.full_path}/${project.path}.git`;
    const source = path.join(work, 'source.git');
    tip = generateHistory(source, { commits: 2000, files: 300 });
    await git(['push', '-q', url, 'main'], source, work);
    cache = packObjectsCacheDir(t.app.cairn.config.dataDir);
  });
  after(async () => {
    await t.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('8 clones of one commit at once: one pack generated, every clone whole', async () => {
    const dirs = Array.from({ length: 8 }, (_, i) => path.join(work, `storm-${i}`));
    await Promise.all(dirs.map((d) => git(['clone', '-q', '--bare', url, d], work, work)));
    for (const d of dirs) {
      assert.equal(await git(['rev-parse', 'main'], d, work), tip);
      assert.equal(await git(['rev-list', '--count', 'main'], d, work), '2000');
    }
    await git(['fsck', '--no-progress', '--no-dangling'], dirs[7], work);
    const files = cacheFiles(cache);
    assert.equal(files.packs.length, 1, 'the eight identical requests made one pack');
    assert.deepEqual([files.locks.length, files.temps.length], [0, 0]);

    // A ninth clone later is served from that pack (it is not rewritten).
    const before = fs.statSync(files.packs[0]);
    const ninth = path.join(work, 'ninth');
    await git(['clone', '-q', '--bare', url, ninth], work, work);
    assert.equal(await git(['rev-parse', 'main'], ninth, work), tip);
    const after = fs.statSync(files.packs[0]);
    assert.equal(after.ino, before.ino);
    assert.equal(after.mtimeMs, before.mtimeMs);
  });

  it('a writer that died leaves a lock and half a pack: the next clone writes a whole one', async () => {
    const { packs } = cacheFiles(cache);
    assert.equal(packs.length, 1);
    const base = packs[0].replace(/\.pack$/, '');
    fs.rmSync(packs[0]);
    // A pid no process has (above the kernel's pid_max limit of 2^22).
    fs.mkdirSync(`${base}.lock`);
    fs.writeFileSync(`${base}.lock/pid`, String(2 ** 22 + 12345));
    fs.writeFileSync(`${base}.tmp`, 'PACK\0\0\0\x02garbage');
    const d = path.join(work, 'after-crash');
    await git(['clone', '-q', '--bare', url, d], work, work);
    assert.equal(await git(['rev-list', '--count', 'main'], d, work), '2000');
    await git(['fsck', '--no-progress', '--no-dangling'], d, work);
    const files = cacheFiles(cache);
    assert.equal(files.packs.length, 1);
    assert.deepEqual([files.locks.length, files.temps.length], [0, 0]);
  });

  it('fetches with haves, shallow and partial clones: each its own entry, each correct', async () => {
    const shallow = path.join(work, 'shallow');
    await git(['clone', '-q', '--depth', '5', url, shallow], work, work);
    assert.equal(await git(['rev-list', '--count', 'HEAD'], shallow, work), '5');
    await git(['fetch', '-q', '--deepen', '20'], shallow, work);
    assert.equal(await git(['rev-list', '--count', 'HEAD'], shallow, work), '25');
    const partial = path.join(work, 'partial');
    await git(['clone', '-q', '--filter=blob:none', '--no-checkout', url, partial], work, work);
    assert.match(await git(['show', 'HEAD~1500:src/dir0/file0.ts'], partial, work), /export const value0 = /);
    // Another push, then a fetch that has the old tip: only the new commits come.
    const source = path.join(work, 'source.git');
    const newTip = generateHistory(source, { commits: 10, files: 300, branch: 'more' });
    await git(['push', '-q', url, 'more'], source, work);
    const full = path.join(work, 'storm-0');
    await git(['fetch', '-q', 'origin', 'more:more'], full, work).catch(() => git(['fetch', '-q', url, 'more:more'], full, work));
    assert.equal(await git(['rev-parse', 'more'], full, work), newTip);
    assert.ok(cacheFiles(cache).packs.length >= 4, String(cacheFiles(cache).packs.length));
  });

  it('CAIRN_PACK_OBJECTS_CACHE_MAX_AGE=0 turns it off', async () => {
    const off = await createTestContext({ packObjectsCacheMaxAge: 0 });
    try {
      await off.app.listen({ port: 0, host: '127.0.0.1' });
      const p = await off.createProject();
      const ns = await off.db.selectFrom('namespaces').select('full_path').where('id', '=', p.namespace_id).executeTakeFirstOrThrow();
      const u = `http://oauth2:${ROOT_TOKEN}@127.0.0.1:${(off.app.server.address() as AddressInfo).port}/${ns.full_path}/${p.path}.git`;
      await git(['push', '-q', u, 'main'], path.join(work, 'source.git'), work);
      await git(['clone', '-q', '--bare', u, path.join(work, 'off-clone')], work, work);
      assert.equal(fs.existsSync(packObjectsCacheDir(off.app.cairn.config.dataDir)), false);
    } finally {
      await off.close();
    }
  });
});
