import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { workTree, type WorkTree } from '../helpers/repo.js';

describe('tags API', () => {
  let t: TestContext;
  let project: Project;
  let w: WorkTree;
  let c1: string;
  let c2: string;
  let reporter: TestUser;
  let developer: TestUser;
  const api = (rest: string, p: Project = project) => `/api/v4/projects/${p.id}/repository/${rest}`;

  before(async () => {
    t = await createTestContext();
    project = await t.createProject({ visibility: 20 });
    reporter = await t.createUser();
    developer = await t.createUser();
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    w = workTree(t, project);
    c1 = w.commit('one');
    w.git(['tag', 'v1.9.0']);
    w.git(['tag', '-a', '-m', 'Release 1.10\n\nNotes', 'v1.10.0'], { GIT_COMMITTER_DATE: '1700000000 +0100' });
    c2 = w.commit('two');
    w.git(['tag', 'v2.0.0-rc1']);
    w.push('--all');
    w.push('--tags');
  });
  after(async () => {
    await t.close();
  });

  it('lists lightweight and annotated tags, newest commit first by default', async () => {
    const res = await t.get(api('tags'), { token: null });
    assert.equal(res.status, 200);
    assert.equal(res.body[0].name, 'v2.0.0-rc1');
    const annotated = res.body.find((x: any) => x.name === 'v1.10.0');
    assert.deepEqual(Object.keys(annotated).sort(), ['commit', 'created_at', 'message', 'name', 'protected', 'release', 'target']);
    assert.equal(annotated.message, 'Release 1.10\n\nNotes');
    assert.notEqual(annotated.target, c1);
    assert.equal(annotated.commit.id, c1);
    assert.equal(annotated.release, null);
    assert.equal(annotated.protected, false);
    assert.equal(annotated.created_at, '2023-11-14T23:13:20.000+01:00');
    const light = res.body.find((x: any) => x.name === 'v1.9.0');
    assert.equal(light.target, c1);
    assert.equal(light.message, '');
    assert.equal(light.created_at, null);
    assert.equal(res.body.find((x: any) => x.name === 'v2.0.0-rc1').commit.id, c2);
  });

  it('order_by name/version, sort and search', async () => {
    const names = async (q: string) => (await t.get(api(`tags?${q}`))).body.map((x: any) => x.name);
    assert.deepEqual(await names('order_by=name&sort=asc'), ['v1.10.0', 'v1.9.0', 'v2.0.0-rc1']);
    assert.deepEqual(await names('order_by=version&sort=asc'), ['v1.9.0', 'v1.10.0', 'v2.0.0-rc1']);
    assert.deepEqual(await names('order_by=version'), ['v2.0.0-rc1', 'v1.10.0', 'v1.9.0']);
    assert.deepEqual(await names('search=%5Ev1&order_by=name&sort=asc'), ['v1.10.0', 'v1.9.0']);
    assert.deepEqual(await names('search=rc1%24'), ['v2.0.0-rc1']);
    assert.equal((await t.get(api('tags?order_by=size'))).status, 400);
    assert.equal((await t.get(api('tags?per_page=1'))).headers['x-total'], '3');
  });

  it('reads one tag; unknown is 404 Tag Not Found', async () => {
    const res = await t.get(api('tags/v1.10.0'));
    assert.equal(res.status, 200);
    assert.equal(res.body.commit.id, c1);
    assert.deepEqual((await t.get(api('tags/nope'))).body, { message: '404 Tag Not Found' });
    assert.equal((await t.get(api('tags/v1.9.0~1'))).status, 404);
  });

  it('creates lightweight and annotated tags (the caller is the tagger)', async () => {
    const light = await t.post(api('tags'), { tag_name: 'light', ref: 'main' }, { token: developer.token });
    assert.equal(light.status, 201);
    assert.equal(light.body.target, c2);
    assert.equal(light.body.message, '');
    const annotated = await t.post(api('tags'), { tag_name: 'release/1', ref: c1, message: 'First release' }, { token: developer.token });
    assert.equal(annotated.status, 201);
    assert.equal(annotated.body.message, 'First release');
    assert.equal(annotated.body.commit.id, c1);
    assert.notEqual(annotated.body.target, c1);
    const raw = execFileSync('git', ['--git-dir', w.bare, 'cat-file', '-p', annotated.body.target]).toString();
    assert.match(raw, new RegExp(`tagger ${developer.user.name} <${developer.user.email}>`));
    assert.deepEqual((await t.post(api('tags'), { tag_name: 'light', ref: 'main' })).body, { message: 'Tag light already exists' });
    assert.deepEqual((await t.post(api('tags'), { tag_name: 'bad..name', ref: 'main' })).body, { message: 'Tag name invalid' });
    assert.deepEqual((await t.post(api('tags'), { tag_name: '-x', ref: 'main' })).body, { message: 'Tag name invalid' });
    assert.deepEqual((await t.post(api('tags'), { tag_name: 'x', ref: 'nope' })).body, { message: 'Target nope is invalid' });
    assert.deepEqual((await t.post(api('tags'), { ref: 'main' })).body, { error: 'tag_name is missing' });
    assert.equal((await t.post(api('tags'), { tag_name: 'r', ref: 'main' }, { token: reporter.token })).status, 403);
    assert.equal((await t.post(api('tags'), { tag_name: 'r', ref: 'main' }, { token: null })).status, 401);
  });

  it('deletes tags (developer+)', async () => {
    assert.equal((await t.delete(api('tags/light'), { token: reporter.token })).status, 403);
    assert.equal((await t.delete(api('tags/light'), { token: developer.token })).status, 204);
    assert.equal((await t.get(api('tags/light'))).status, 404);
    assert.equal((await t.delete(api('tags/light'))).status, 404);
    assert.equal((await t.delete(api('tags/release%2F1'))).status, 204);
  });

  it('private projects hide tags from anonymous callers and guests', async () => {
    const priv = await t.createProject();
    const guest = await t.createUser();
    await t.addMember(priv, guest.user, 10);
    assert.equal((await t.get(api('tags', priv), { token: null })).status, 404);
    assert.equal((await t.get(api('tags', priv), { token: guest.token })).status, 403);
    assert.deepEqual((await t.get(api('tags', priv))).body, []);
  });
});
