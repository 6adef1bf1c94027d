import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { setDefaultBranch } from '../../src/services/branches.js';
import { findProject } from '../../src/finders/projects.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { workTree, type WorkTree } from '../helpers/repo.js';
import { recordStatements } from '../helpers/statements.js';

describe('branches API', () => {
  let t: TestContext;
  let project: Project;
  let w: WorkTree;
  let first: string;
  let head: string;
  let guest: TestUser;
  let reporter: TestUser;
  let developer: TestUser;
  let maintainer: TestUser;
  let readApi: TestUser;
  const api = (rest: string, p: Project = project) => `/api/v4/projects/${p.id}/repository/${rest}`;
  const refs = () => execFileSync('git', ['--git-dir', w.bare, 'for-each-ref', '--format=%(refname:short)', 'refs/heads']).toString().split('\n').filter(Boolean);

  before(async () => {
    t = await createTestContext();
    project = await t.createProject();
    [guest, reporter, developer, maintainer] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    readApi = await t.createUser({ scopes: ['read_api'] });
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, readApi.user, 40);
    w = workTree(t, project);
    w.write('a.txt', 'a\n');
    first = w.commit('first');
    w.write('b.txt', 'b\n');
    head = w.commit('second');
    w.git(['branch', 'merged-one', first]);
    w.git(['checkout', '-q', '-b', 'feature/x']);
    w.write('c.txt', 'c\n');
    w.commit('feature work');
    w.git(['checkout', '-q', 'main']);
    w.git(['branch', 'Fix-Bug', first]);
    w.push('--all');
  });
  after(async () => {
    await t.close();
  });

  it('lists branches by name with GitLab fields', async () => {
    const res = await t.get(api('branches'));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.map((b: any) => b.name), ['Fix-Bug', 'feature/x', 'main', 'merged-one']);
    const main = res.body.find((b: any) => b.name === 'main');
    assert.deepEqual(Object.keys(main).sort(), ['can_push', 'commit', 'default', 'developers_can_merge', 'developers_can_push', 'merged', 'name', 'protected', 'web_url']);
    assert.equal(main.default, true);
    assert.equal(main.merged, false);
    assert.equal(main.protected, false);
    assert.equal(main.can_push, true);
    assert.equal(main.commit.id, head);
    assert.equal(main.commit.title, 'second');
    assert.equal(main.web_url, `${t.config.externalUrl}/root/${project.path}/-/tree/main`);
    assert.equal(res.body.find((b: any) => b.name === 'merged-one').merged, true);
    assert.equal(res.body.find((b: any) => b.name === 'feature/x').merged, false);
    assert.equal(res.headers['x-total'], '4');
  });

  it('search with ^prefix, suffix$ and substrings, case-insensitive; sort; pages', async () => {
    const names = async (q: string) => (await t.get(api(`branches?${q}`))).body.map((b: any) => b.name);
    assert.deepEqual(await names('search=fix'), ['Fix-Bug']);
    assert.deepEqual(await names('search=%5Efea'), ['feature/x']);
    assert.deepEqual(await names('search=one%24'), ['merged-one']);
    assert.deepEqual(await names('search=%5Emain%24'), ['main']);
    assert.deepEqual(await names('search=zzz'), []);
    const updated = await names('sort=updated_desc');
    assert.equal(updated[0], 'feature/x');
    const p2 = await t.get(api('branches?per_page=3&page=2'));
    assert.deepEqual(p2.body.map((b: any) => b.name), ['merged-one']);
    const keyset = await t.get(api('branches?pagination=keyset&per_page=2'));
    assert.match(keyset.headers.link, /page_token=feature%2Fx/);
  });

  it('reads one branch, with slashes URL-encoded; unknown and bad names are 404', async () => {
    const res = await t.get(api('branches/feature%2Fx'));
    assert.equal(res.status, 200);
    assert.equal(res.body.name, 'feature/x');
    assert.deepEqual((await t.get(api('branches/nope'))).body, { message: '404 Branch Not Found' });
    assert.equal((await t.get(api('branches/main~1'))).status, 404);
    assert.equal((await t.get(api('branches/-main'))).status, 404);
    assert.equal((await t.get(api('branches/main%00'))).status, 404);
  });

  it('permissions for reading', async () => {
    assert.equal((await t.get(api('branches'), { token: null })).status, 404);
    assert.equal((await t.get(api('branches'), { token: guest.token })).status, 403);
    const asReporter = await t.get(api('branches'), { token: reporter.token });
    assert.equal(asReporter.status, 200);
    assert.equal(asReporter.body[0].can_push, false);
    const pub = await t.createProject({ visibility: 20 });
    const pw = workTree(t, pub);
    pw.commit('x');
    pw.push();
    const anon = await t.get(api('branches', pub), { token: null });
    assert.equal(anon.status, 200);
    assert.equal(anon.body[0].can_push, false);
  });

  it('creates branches from a ref (developer+), with GitLab errors', async () => {
    const res = await t.post(api('branches'), { branch: 'new/one', ref: 'main' }, { token: developer.token });
    assert.equal(res.status, 201);
    assert.equal(res.body.name, 'new/one');
    assert.equal(res.body.commit.id, head);
    assert.ok(refs().includes('new/one'));
    const fromSha = await t.post(api(`branches?branch=from-sha&ref=${first}`), undefined, { token: developer.token });
    assert.equal(fromSha.status, 201);
    assert.equal(fromSha.body.commit.id, first);
    assert.deepEqual((await t.post(api('branches'), { branch: 'new/one', ref: 'main' })).body, { message: 'Branch already exists' });
    for (const bad of ['bad..name', 'has space', '-x', 'x.lock', 'a~b', 'HEAD', 'x/', 'a\u0001b', 'a'.repeat(40).replace(/a/g, 'f')]) {
      const r = await t.post(api('branches'), { branch: bad, ref: 'main' });
      assert.equal(r.status, 400, bad);
      assert.deepEqual(r.body, { message: 'Branch name is invalid' }, bad);
    }
    assert.deepEqual((await t.post(api('branches'), { branch: 'ok', ref: 'nope' })).body, { message: 'Invalid reference name: nope' });
    assert.deepEqual((await t.post(api('branches'), { ref: 'main' })).body, { error: 'branch is missing' });
    assert.deepEqual((await t.post(api('branches'), { branch: 'x' })).body, { error: 'ref is missing' });
    assert.equal((await t.post(api('branches'), { branch: 'r', ref: 'main' }, { token: reporter.token })).status, 403);
    assert.equal((await t.post(api('branches'), { branch: 'r', ref: 'main' }, { token: null })).status, 401);
    assert.equal((await t.post(api('branches'), { branch: 'r', ref: 'main' }, { token: readApi.token })).status, 403);
  });

  it('a protected branch pattern stops developers creating matching branches', async () => {
    await t.post(`/api/v4/projects/${project.id}/protected_branches`, { name: 'release/*' });
    const res = await t.post(api('branches'), { branch: 'release/1', ref: 'main' }, { token: developer.token });
    assert.equal(res.status, 403);
    const ok = await t.post(api('branches'), { branch: 'release/1', ref: 'main' }, { token: maintainer.token });
    assert.equal(ok.status, 201);
    assert.equal(ok.body.protected, true);
    assert.equal(ok.body.developers_can_push, false);
    assert.equal(ok.body.can_push, true);
    const seenByDev = await t.get(api('branches/release%2F1'), { token: developer.token });
    assert.equal(seenByDev.body.can_push, false);
  });

  it('read-only repositories refuse writes', async () => {
    await t.db.updateTable('projects').set({ repository_read_only: true }).where('id', '=', project.id).execute();
    const res = await t.post(api('branches'), { branch: 'ro', ref: 'main' });
    assert.equal(res.status, 403);
    assert.match(res.body.message, /read-only/);
    await t.db.updateTable('projects').set({ repository_read_only: false }).where('id', '=', project.id).execute();
  });

  it('deletes branches; not the default one, protected ones only by maintainers', async () => {
    assert.equal((await t.delete(api('branches/from-sha'), { token: reporter.token })).status, 403);
    assert.equal((await t.delete(api('branches/from-sha'), { token: developer.token })).status, 204);
    assert.ok(!refs().includes('from-sha'));
    assert.deepEqual((await t.delete(api('branches/from-sha'))).body, { message: '404 Branch Not Found' });
    const def = await t.delete(api('branches/main'));
    assert.equal(def.status, 405);
    assert.ok(refs().includes('main'));
    assert.equal((await t.delete(api('branches/release%2F1'), { token: developer.token })).status, 403);
    assert.equal((await t.delete(api('branches/release%2F1'), { token: maintainer.token })).status, 204);
  });

  it('DELETE merged_branches removes merged, unprotected, non-default branches', async () => {
    await t.post(api('branches'), { branch: 'merged-two', ref: first });
    await t.post(api('branches'), { branch: 'release/2', ref: first });
    assert.equal((await t.delete(api('merged_branches'), { token: reporter.token })).status, 403);
    const res = await t.delete(api('merged_branches'), { token: developer.token });
    assert.equal(res.status, 202);
    const left = refs();
    assert.ok(!left.includes('merged-one'));
    assert.ok(!left.includes('merged-two'));
    assert.ok(!left.includes('Fix-Bug'));
    assert.ok(left.includes('main'));
    assert.ok(left.includes('release/2'));
    assert.ok(left.includes('feature/x'));
  });

  it('setDefaultBranch moves HEAD and the project row', async () => {
    const loaded = (await findProject(t.db, project.id))!;
    await setDefaultBranch(t.app.cairn, loaded, 'feature/x');
    const head = execFileSync('git', ['--git-dir', w.bare, 'symbolic-ref', 'HEAD']).toString().trim();
    assert.equal(head, 'refs/heads/feature/x');
    const res = await t.get(api('branches/feature%2Fx'));
    assert.equal(res.body.default, true);
    await assert.rejects(setDefaultBranch(t.app.cairn, loaded, 'nope'));
    await setDefaultBranch(t.app.cairn, loaded, 'main');
  });

  it('one branch-name rule: the branches API, the commits API and a default branch refuse and accept the same names', async () => {
    const commitOn = (branch: string) =>
      t.post(`/api/v4/projects/${project.id}/repository/commits`, { branch, start_branch: 'main', commit_message: 'c', actions: [{ action: 'create', file_path: `${t.unique('f')}.txt`, content: 'c' }] });
    for (const bad of ['f'.repeat(40), 'A'.repeat(40), 'HEAD', 'bad..name', '-x', 'refs/heads/x', 'x.lock', 'a:b']) {
      const branch = await t.post(api('branches'), { branch: bad, ref: 'main' });
      assert.equal(branch.status, 400, `branches ${bad}`);
      assert.deepEqual(branch.body, { message: 'Branch name is invalid' }, `branches ${bad}`);
      const commit = await commitOn(bad);
      assert.equal(commit.status, 400, `commits ${bad}: ${commit.text}`);
      assert.match(commit.body.message, /Branch name is invalid/, `commits ${bad}`);
      const project_ = await t.put(`/api/v4/projects/${project.id}`, { default_branch: bad });
      assert.equal(project_.status, 400, `default_branch ${bad}: ${project_.text}`);
      assert.deepEqual(project_.body.message?.default_branch, ['is invalid'], `default_branch ${bad}`);
    }
    for (const good of ['a'.repeat(39), 'g'.repeat(40), 'refs/tags/not-a-tag', 'at@sign']) {
      assert.equal((await t.post(api('branches'), { branch: good, ref: 'main' })).status, 201, `branches ${good}`);
      const commit = await commitOn(`${good}-c`);
      assert.equal(commit.status, 201, `commits ${good}-c: ${commit.text}`);
      const moved = await t.put(`/api/v4/projects/${project.id}`, { default_branch: good });
      assert.equal(moved.status, 200, `default_branch ${good}: ${moved.text}`);
      assert.equal(moved.body.default_branch, good);
    }
    assert.equal((await t.put(`/api/v4/projects/${project.id}`, { default_branch: 'main' })).status, 200);
  });

  it('a list checks group push grants in one statement, however many branches it has', async (ctx) => {
    // Every branch is protected by a rule that admits Maintainers and two groups the developer is
    // not in: each branch's can_push asks about both groups.
    const g1 = await t.createGroup();
    const g2 = await t.createGroup();
    const withBranches = async (count: number) => {
      const p = await t.createProject();
      const pw = workTree(t, p);
      pw.write('a.txt', 'a\n');
      pw.commit('first');
      for (let i = 1; i < count; i++) pw.git(['branch', `topic-${i}`]);
      pw.push('--all');
      await t.addMember(p, developer.user, 30);
      const rule = await t.db.insertInto('protected_branches').values({ project_id: p.id, name: '*' }).returning('id').executeTakeFirstOrThrow();
      await t.db.insertInto('protected_branch_access_levels').values([
        { protected_branch_id: rule.id, kind: 'push', access_level: 40 },
        { protected_branch_id: rule.id, kind: 'push', group_id: g1.id },
        { protected_branch_id: rule.id, kind: 'push', group_id: g2.id },
      ]).execute();
      return p;
    };
    const one = await withBranches(1);
    const twenty = await withBranches(20);
    const list = (p: Project) => t.get(api('branches?per_page=100', p), { token: developer.token });
    await list(one);
    await list(twenty);
    const few = await recordStatements(t.db, () => list(one));
    const many = await recordStatements(t.db, () => list(twenty));
    assert.equal(many.result.body.length, 20);
    assert.ok(many.result.body.every((b: any) => b.protected && !b.can_push));
    ctx.diagnostic(`1 branch: ${few.statements.length} statements, 20 branches: ${many.statements.length}`);
    assert.equal(many.statements.length, few.statements.length, `1 branch: ${few.statements.length} statements, 20 branches: ${many.statements.length}`);
  });
});
