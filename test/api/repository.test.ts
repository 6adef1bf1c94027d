import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { workTree, type WorkTree } from '../helpers/repo.js';

describe('repository API: tree, blobs, archives, compare, contributors, merge_base', () => {
  let t: TestContext;
  let project: Project;
  let publicProject: Project;
  let w: WorkTree;
  let base: string;
  let head: string;
  let feature: string;
  let guest: TestUser;
  let reporter: TestUser;
  let outsider: TestUser;
  const url = (p: Project | number, rest: string) => `/api/v4/projects/${typeof p === 'number' ? p : p.id}/repository/${rest}`;

  before(async () => {
    t = await createTestContext({ archiveRateLimit: 0 });
    project = await t.createProject();
    publicProject = await t.createProject({ visibility: 20 });
    guest = await t.createUser();
    reporter = await t.createUser();
    outsider = await t.createUser();
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);

    w = workTree(t, project);
    w.write('README.md', '# Hello\n');
    w.write('src/app.js', 'console.log(1);\n');
    w.write('src/lib/util.js', 'export const x = 1;\n');
    w.write('same1.txt', 'same\n');
    w.write('same2.txt', 'same\n');
    w.write('bin/data.bin', Buffer.from([0, 1, 2, 3, 255, 0]));
    base = w.commit('Initial commit', { author: ['Ann Author', 'ann@example.com'] });
    w.write('src/app.js', 'console.log(2);\n');
    w.commit('Change app', { author: ['Bob Builder', 'bob@example.com'] });
    w.git(['checkout', '-q', '-b', 'feature']);
    w.write('feature.txt', 'feature\n');
    w.remove('same2.txt');
    feature = w.commit('Add feature\n\nWith a body.', { author: ['Bob B', 'bob@example.com'] });
    w.git(['checkout', '-q', 'main']);
    w.write('docs/guide.md', 'guide\n');
    head = w.commit('Add docs', { author: ['Ann Author', 'ann@example.com'] });
    w.git(['tag', 'v1.0', base]);
    w.push('--all');
    w.push('--tags');

    const pw = workTree(t, publicProject);
    pw.write('hello.txt', 'public\n');
    pw.commit('public commit');
    pw.push();
  });
  after(async () => {
    await t.close();
  });

  describe('tree', () => {
    it('lists the root of the default branch with GitLab fields', async () => {
      const res = await t.get(url(project, 'tree'));
      assert.equal(res.status, 200);
      const names = res.body.map((e: any) => e.name);
      assert.deepEqual(names, ['README.md', 'bin', 'docs', 'same1.txt', 'same2.txt', 'src']);
      const src = res.body.find((e: any) => e.name === 'src');
      assert.deepEqual(Object.keys(src).sort(), ['id', 'mode', 'name', 'path', 'type']);
      assert.equal(src.type, 'tree');
      assert.equal(src.mode, '040000');
      assert.equal(src.path, 'src');
      assert.match(src.id, /^[0-9a-f]{40}$/);
      const readme = res.body.find((e: any) => e.name === 'README.md');
      assert.equal(readme.type, 'blob');
      assert.equal(readme.mode, '100644');
      assert.equal(res.headers['x-total'], '6');
      assert.equal(res.headers['x-page'], '1');
    });

    it('path, ref and recursive', async () => {
      const sub = await t.get(url(project, 'tree?path=src'));
      assert.deepEqual(sub.body.map((e: any) => e.path), ['src/app.js', 'src/lib']);
      const trailing = await t.get(url(project, 'tree?path=src/'));
      assert.equal(trailing.status, 200);
      const atBase = await t.get(url(project, `tree?ref=${base}`));
      assert.ok(!atBase.body.some((e: any) => e.name === 'docs'));
      const onFeature = await t.get(url(project, 'tree?ref=feature'));
      assert.ok(onFeature.body.some((e: any) => e.name === 'feature.txt'));
      const rec = await t.get(url(project, 'tree?recursive=true&per_page=100'));
      assert.deepEqual(
        rec.body.map((e: any) => e.path),
        ['README.md', 'bin', 'bin/data.bin', 'docs', 'docs/guide.md', 'same1.txt', 'same2.txt', 'src', 'src/app.js', 'src/lib', 'src/lib/util.js'],
      );
      const none = await t.get(url(project, 'tree?recursive=true&pagination=none'));
      assert.equal(none.body.length, 11);
      assert.equal((await t.get(url(project, 'tree?pagination=none'))).status, 400);
    });

    it('numbered pages', async () => {
      const p2 = await t.get(url(project, 'tree?per_page=4&page=2'));
      assert.deepEqual(p2.body.map((e: any) => e.name), ['same2.txt', 'src']);
      assert.equal(p2.headers['x-total-pages'], '2');
      assert.equal(p2.headers['x-prev-page'], '1');
    });

    it('keyset pages follow the Link header to the end, also across entries with equal ids', async () => {
      const seen: string[] = [];
      let next: string | null = url(project, 'tree?recursive=true&pagination=keyset&per_page=2');
      let pages = 0;
      while (next && pages < 20) {
        const res = await t.get(next);
        assert.equal(res.status, 200);
        assert.equal(res.headers['x-total'], undefined);
        seen.push(...res.body.map((e: any) => e.path));
        const link = res.headers.link as string | undefined;
        const m = link ? /<([^>]+)>; rel="next"/.exec(link) : null;
        next = m ? m[1].replace(t.config.externalUrl, '') : null;
        if (m) assert.match(m[1], /page_token=/);
        pages++;
      }
      assert.equal(pages, 6);
      assert.equal(seen.length, 11);
      assert.equal(new Set(seen).size, 11);
      // GitLab's token is the id of the last entry of the previous page.
      const first = await t.get(url(project, 'tree?pagination=keyset&per_page=1'));
      const token = first.body[0].id;
      const second = await t.get(url(project, `tree?pagination=keyset&per_page=1&page_token=${token}`));
      assert.equal(second.body[0].name, 'bin');
    });

    it('unknown refs, paths and bad input are 4xx', async () => {
      assert.deepEqual((await t.get(url(project, 'tree?ref=nope'))).body, { message: '404 Tree Not Found' });
      assert.equal((await t.get(url(project, 'tree?path=nope'))).status, 404);
      assert.equal((await t.get(url(project, 'tree?path=README.md'))).status, 404);
      assert.equal((await t.get(url(project, 'tree?ref=--output=/tmp/x'))).status, 404);
      assert.equal((await t.get(url(project, 'tree?ref=main:src'))).status, 404);
      assert.equal((await t.get(url(project, 'tree?ref=main..feature'))).status, 404);
      assert.equal((await t.get(url(project, 'tree?path=../../etc'))).status, 400);
      assert.equal((await t.get(url(project, 'tree?path=/etc'))).status, 400);
      assert.equal((await t.get(url(project, 'tree?path=src%00x'))).status, 400);
      assert.equal((await t.get(url(project, 'tree?path=a%0Ab'))).status, 400);
      assert.equal((await t.get(url(project, 'tree?pagination=keyset&page_token=ffff'))).status, 404);
      const empty = await t.createProject();
      assert.equal((await t.get(url(empty, 'tree'))).status, 404);
    });

    it('permissions: anonymous reads public projects only; guests cannot read private code', async () => {
      assert.equal((await t.get(url(publicProject, 'tree'), { token: null })).status, 200);
      assert.equal((await t.get(url(project, 'tree'), { token: null })).status, 404);
      assert.equal((await t.get(url(project, 'tree'), { token: outsider.token })).status, 404);
      assert.equal((await t.get(url(project, 'tree'), { token: guest.token })).status, 403);
      assert.equal((await t.get(url(project, 'tree'), { token: reporter.token })).status, 200);
      assert.equal((await t.get(url(publicProject, 'tree'), { token: outsider.token })).status, 200);
    });
  });

  describe('blobs', () => {
    it('JSON form with base64 content, and raw bytes with GitLab headers', async () => {
      const tree = await t.get(url(project, 'tree'));
      const readme = tree.body.find((e: any) => e.name === 'README.md');
      const res = await t.get(url(project, `blobs/${readme.id}`));
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { size: 8, encoding: 'base64', content: Buffer.from('# Hello\n').toString('base64'), sha: readme.id });
      const raw = await t.get(url(project, `blobs/${readme.id}/raw`));
      assert.equal(raw.status, 200);
      assert.equal(raw.text, '# Hello\n');
      assert.equal(raw.headers['content-type'], 'text/plain; charset=utf-8');
      assert.equal(raw.headers['x-content-type-options'], 'nosniff');
      assert.match(String(raw.headers['content-disposition']), /^inline/);
      // abbreviated ids work too
      assert.equal((await t.get(url(project, `blobs/${readme.id.slice(0, 10)}/raw`))).text, '# Hello\n');
    });

    it('binary blobs are octet-stream and byte-exact', async () => {
      const bin = await t.get(url(project, 'tree?path=bin'));
      const res = await t.app.inject({ method: 'GET', url: url(project, `blobs/${bin.body[0].id}/raw`), headers: { 'private-token': 'root-test-token-0123456789' } });
      assert.equal(res.headers['content-type'], 'application/octet-stream');
      assert.deepEqual(res.rawPayload, Buffer.from([0, 1, 2, 3, 255, 0]));
    });

    it('unknown or non-blob ids are 404 Blob Not Found', async () => {
      assert.deepEqual((await t.get(url(project, `blobs/${'a'.repeat(40)}`))).body, { message: '404 Blob Not Found' });
      assert.equal((await t.get(url(project, `blobs/${head}`))).status, 404);
      assert.equal((await t.get(url(project, 'blobs/main'))).status, 404);
      assert.equal((await t.get(url(project, 'blobs/-x/raw'))).status, 404);
      assert.equal((await t.get(url(project, `blobs/${head}/raw`), { token: guest.token })).status, 403);
    });
  });

  describe('archives', () => {
    const download = async (suffix: string, query = '') => {
      const res = await t.app.inject({ method: 'GET', url: url(project, `archive${suffix}${query}`), headers: { 'private-token': 'root-test-token-0123456789' } });
      return res;
    };
    const list = (file: string, args: string[]) => execFileSync(args[0], [...args.slice(1), file]).toString('utf8').split('\n').filter(Boolean);

    for (const [suffix, ext, lister] of [
      ['', 'tar.gz', ['tar', '-tzf']],
      ['.tar.gz', 'tar.gz', ['tar', '-tzf']],
      ['.tar.bz2', 'tar.bz2', ['tar', '-tjf']],
      ['.tbz', 'tar.bz2', ['tar', '-tjf']],
      ['.tbz2', 'tar.bz2', ['tar', '-tjf']],
      ['.tb2', 'tar.bz2', ['tar', '-tjf']],
      ['.bz2', 'tar.bz2', ['tar', '-tjf']],
      ['.tar', 'tar', ['tar', '-tf']],
      ['.zip', 'zip', ['unzip', '-Z1']],
    ] as const) {
      it(`archive${suffix || ' (default)'} is a real ${ext}`, async () => {
        const res = await download(suffix);
        assert.equal(res.statusCode, 200);
        const name = `${project.path}-main-${head}`;
        assert.match(String(res.headers['content-disposition']), new RegExp(`attachment; filename="${name}\\.${ext.replace('.', '\\.')}"`));
        const file = path.join(t.tmpDir, `a-${Math.random()}.${ext}`);
        fs.writeFileSync(file, res.rawPayload);
        let entries: string[];
        try {
          entries = list(file, [...lister]);
        } catch (e) {
          if (ext === 'zip' && /ENOENT/.test(String(e))) {
            assert.equal(res.rawPayload.subarray(0, 2).toString('latin1'), 'PK');
            return;
          }
          throw e;
        }
        assert.ok(entries.includes(`${name}/README.md`), entries.join(','));
        assert.ok(entries.includes(`${name}/src/lib/util.js`));
      });
    }

    it('sha and path select what is archived and name the file', async () => {
      const res = await download('.tar', `?sha=v1.0&path=src`);
      assert.equal(res.statusCode, 200);
      const name = `${project.path}-v1.0-${base}-src`;
      assert.match(String(res.headers['content-disposition']), new RegExp(`filename="${name.replace(/\./g, '\\.')}\\.tar"`));
      const file = path.join(t.tmpDir, 'sub.tar');
      fs.writeFileSync(file, res.rawPayload);
      const entries = list(file, ['tar', '-tf']);
      assert.ok(entries.includes(`${name}/src/app.js`));
      assert.ok(!entries.some((e) => e.endsWith('README.md')));
    });

    it('unknown sha or path, and bad formats, are 404', async () => {
      assert.deepEqual(JSON.parse((await download('', '?sha=nope')).body), { message: '404 File Not Found' });
      assert.equal((await download('', '?path=nope')).statusCode, 404);
      assert.equal((await download('', '?path=../x')).statusCode, 400);
      assert.equal((await download('.rar')).statusCode, 404);
      assert.equal((await download('', '?sha=-x')).statusCode, 404);
    });

    it('anonymous downloads of public projects; private ones are hidden', async () => {
      const res = await t.app.inject({ method: 'GET', url: url(publicProject, 'archive.zip') });
      assert.equal(res.statusCode, 200);
      assert.equal(res.rawPayload.subarray(0, 2).toString('latin1'), 'PK');
      assert.equal((await t.get(url(project, 'archive'), { token: null })).status, 404);
      assert.equal((await t.get(url(project, 'archive'), { token: guest.token })).status, 403);
    });
  });

  describe('compare', () => {
    it('from...to uses the merge base', async () => {
      const res = await t.get(url(project, 'compare?from=main&to=feature'));
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.commits.map((c: any) => c.id), [feature]);
      assert.equal(res.body.commit.id, feature);
      assert.equal(res.body.commit.title, 'Add feature');
      assert.equal(res.body.commit.message, 'Add feature\n\nWith a body.\n');
      assert.equal(res.body.commit.authored_date, '2023-11-15T00:16:20.000+02:00');
      assert.equal(res.body.commit.created_at, res.body.commit.committed_date);
      assert.equal(res.body.compare_timeout, false);
      assert.equal(res.body.compare_same_ref, false);
      const paths = res.body.diffs.map((d: any) => [d.new_path, d.new_file, d.deleted_file]).sort();
      assert.deepEqual(paths, [['feature.txt', true, false], ['same2.txt', false, true]]);
      const added = res.body.diffs.find((d: any) => d.new_path === 'feature.txt');
      assert.equal(added.a_mode, '0');
      assert.equal(added.b_mode, '100644');
      assert.equal(added.renamed_file, false);
      assert.match(added.diff, /^@@ -0,0 \+1 @@\n\+feature\n/);
      assert.equal(res.body.web_url, `${t.config.externalUrl}/root/${project.path}/-/compare/main...feature`);
    });

    it('straight compares from..to directly', async () => {
      const res = await t.get(url(project, 'compare?from=main&to=feature&straight=true'));
      const paths = res.body.diffs.map((d: any) => d.new_path).sort();
      assert.deepEqual(paths, ['docs/guide.md', 'feature.txt', 'same2.txt']);
      assert.deepEqual(res.body.commits.map((c: any) => c.id), [feature]);
    });

    it('same refs, reversed refs, renames', async () => {
      const same = await t.get(url(project, 'compare?from=main&to=main'));
      assert.equal(same.body.compare_same_ref, true);
      assert.deepEqual(same.body.commits, []);
      assert.deepEqual(same.body.diffs, []);
      assert.equal(same.body.commit, null);
      const back = await t.get(url(project, `compare?from=main&to=${base}`));
      assert.equal(back.body.commits.length, 0);
      assert.equal(back.body.compare_same_ref, true);
    });

    it('commits are oldest first', async () => {
      const res = await t.get(url(project, `compare?from=${base}&to=main`));
      assert.deepEqual(res.body.commits.map((c: any) => c.title), ['Change app', 'Add docs']);
    });

    it('from_project_id reads the other project without changing either repository', async () => {
      const other = await t.createProject({ visibility: 20 });
      assert.equal((await t.post(`/api/v4/projects/${other.id}/fork/${project.id}`)).status, 201);
      const ow = workTree(t, other);
      ow.git(['fetch', '-q', w.bare, 'main']);
      ow.git(['checkout', '-q', '-b', 'main', 'FETCH_HEAD']);
      ow.write('fork.txt', 'fork\n');
      const forkCommit = ow.commit('Fork work');
      ow.push('main');
      const res = await t.get(url(project, `compare?from=${forkCommit}&to=main&straight=true&from_project_id=${other.id}`));
      assert.equal(res.status, 200);
      assert.ok(res.body.diffs.some((d: any) => d.old_path === 'fork.txt' && d.deleted_file));
      const refs = execFileSync('git', ['--git-dir', w.bare, 'for-each-ref', '--format=%(refname)']).toString();
      assert.ok(!refs.includes('tmp'));
      assert.equal((await t.get(url(project, `compare?from=main&to=main&from_project_id=999999`))).status, 400);
      const hidden = await t.createProject();
      assert.equal((await t.get(url(project, `compare?from=main&to=main&from_project_id=${hidden.id}`), { token: reporter.token })).status, 400);
    });

    it('missing and unknown refs', async () => {
      assert.deepEqual((await t.get(url(project, 'compare?from=main'))).body, { error: 'to is missing' });
      assert.deepEqual((await t.get(url(project, 'compare?to=main'))).body, { error: 'from is missing' });
      assert.deepEqual((await t.get(url(project, 'compare?from=main&to=nope'))).body, { message: '404 Ref Not Found' });
      assert.equal((await t.get(url(project, 'compare?from=-main&to=main'))).status, 404);
      assert.equal((await t.get(url(project, 'compare?from=main&to=feature'), { token: guest.token })).status, 403);
    });
  });

  describe('contributors', () => {
    it('groups non-merge commits by e-mail; default order commits asc', async () => {
      const res = await t.get(url(project, 'contributors'));
      assert.equal(res.status, 200);
      // main: Initial (ann), Change app (bob), Add docs (ann)
      assert.deepEqual(res.body, [
        { name: 'Bob Builder', email: 'bob@example.com', commits: 1, additions: 0, deletions: 0 },
        { name: 'Ann Author', email: 'ann@example.com', commits: 2, additions: 0, deletions: 0 },
      ]);
      const byName = await t.get(url(project, 'contributors?order_by=name&sort=desc'));
      assert.deepEqual(byName.body.map((c: any) => c.name), ['Bob Builder', 'Ann Author']);
      const onFeature = await t.get(url(project, 'contributors?ref=feature&order_by=email'));
      assert.deepEqual(onFeature.body.map((c: any) => [c.email, c.commits, c.name]), [
        ['ann@example.com', 1, 'Ann Author'],
        ['bob@example.com', 2, 'Bob B'],
      ]);
      assert.equal((await t.get(url(project, 'contributors?order_by=size'))).status, 400);
      assert.equal((await t.get(url(project, 'contributors?per_page=1'))).headers['x-total'], '2');
    });
  });

  describe('merge_base', () => {
    it('returns the common ancestor commit', async () => {
      const res = await t.get(url(project, 'merge_base?refs[]=main&refs[]=feature'));
      assert.equal(res.status, 200);
      assert.equal(res.body.title, 'Change app');
      assert.equal(res.body.parent_ids[0], base);
      assert.equal(res.body.web_url, `${t.config.externalUrl}/root/${project.path}/-/commit/${res.body.id}`);
      assert.deepEqual(res.body.trailers, {});
      // More than two refs: as `git merge-base A B C` (A against a merge of the others).
      assert.equal((await t.get(url(project, `merge_base?refs[]=main&refs[]=feature&refs[]=${base}`))).body.id, res.body.id);
      assert.equal((await t.get(url(project, `merge_base?refs=main,${base}`))).body.id, base);
    });

    it('fewer than two refs is 400, unknown refs 400 as GitLab words them', async () => {
      assert.deepEqual((await t.get(url(project, 'merge_base?refs[]=main'))).body, { message: 'Provide at least 2 refs' });
      assert.deepEqual((await t.get(url(project, 'merge_base'))).body, { error: 'refs is missing' });
      assert.deepEqual((await t.get(url(project, 'merge_base?refs[]=main&refs[]=nope'))).body, { message: 'Could not find ref: nope' });
      assert.deepEqual((await t.get(url(project, 'merge_base?refs[]=x&refs[]=nope'))).body, { message: 'Could not find refs: x, nope' });
    });

    it('unrelated histories have no merge base', async () => {
      w.git(['checkout', '-q', '--orphan', 'orphan']);
      w.commit('orphan root');
      w.push('orphan');
      w.git(['checkout', '-q', '-f', 'main']);
      assert.deepEqual((await t.get(url(project, 'merge_base?refs[]=main&refs[]=orphan'))).body, { message: '404 Merge Base Not Found' });
    });
  });

  describe('archive rate limit', () => {
    let limited: TestContext;
    before(async () => {
      limited = await createTestContext({ archiveRateLimit: 2 });
    });
    after(async () => {
      await limited.close();
    });

    it('counts per user in the database and answers 429 with Retry-After', async () => {
      const p = await limited.createProject({ visibility: 20 });
      const lw = workTree(limited, p);
      lw.write('a.txt', 'a\n');
      lw.commit('a');
      lw.push();
      const u = await limited.createUser();
      const get = (token: string | null) => limited.get(`/api/v4/projects/${p.id}/repository/archive.tar`, { token });
      assert.equal((await get(u.token)).status, 200);
      assert.equal((await get(u.token)).status, 200);
      const third = await get(u.token);
      assert.equal(third.status, 429);
      assert.deepEqual(third.body, { message: { error: 'This archive has been requested too many times. Try again later.' } });
      const retry = Number(third.headers['retry-after']);
      assert.ok(retry >= 1 && retry <= 60, String(retry));
      // another user has their own budget; anonymous callers count per address
      assert.equal((await get(null)).status, 200);
      const rows = await limited.db.selectFrom('rate_limit_counters').selectAll().where('key', '=', `archive:user:${u.user.id}`).execute();
      assert.equal(rows[0].count, 3);
    });
  });
});
