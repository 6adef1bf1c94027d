// List pages (GET /users, /projects, /groups, members lists) are kept in the process cache per
// caller and URL, with their pagination headers (src/plugins/page_cache.ts). These tests drive
// the HTTP API: a kept page must answer exactly as a fresh one, and no write may leave one behind.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type CallResult, type TestContext } from '../helpers/app.js';

const PAGE_HEADERS = ['x-page', 'x-per-page', 'x-total', 'x-total-pages', 'x-next-page', 'x-prev-page', 'link'];

describe('cached list pages', () => {
  let t: TestContext;
  /** How many times a page was rendered rather than served from memory. */
  let renders = 0;

  before(async () => {
    t = await createTestContext();
    const cache = t.app.cairn.cache;
    const load = cache.load.bind(cache);
    cache.load = ((key: string, fn: () => Promise<unknown>, opts?: object) =>
      load(key, key.startsWith('page:') ? () => (renders++, fn()) : fn, opts)) as typeof cache.load;
    // On PostgreSQL the cache serves once its listener has heard its own first ping.
    for (let i = 0; i < 200 && !cache.serving; i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(cache.serving);
  });
  after(async () => {
    await t.close();
  });

  /** Two reads of `url`: the second must be served from memory and answer the same. */
  async function readTwice(url: string, token?: string): Promise<CallResult> {
    // A token's first use records it (a write, which drops every kept value), once in ten minutes.
    await t.get('/api/v4/user', { token });
    const first = await t.get(url, { token });
    assert.equal(first.status, 200, first.text);
    const before = renders;
    const second = await t.get(url, { token });
    assert.equal(renders, before, `${url} was served from memory`);
    assert.equal(second.status, 200);
    assert.equal(second.text, first.text);
    assert.equal(second.headers['content-type'], 'application/json');
    for (const h of PAGE_HEADERS) assert.equal(second.headers[h], first.headers[h], h);
    return second;
  }

  it('serves a repeated page from memory with its pagination headers', async () => {
    for (let i = 0; i < 4; i++) await t.createUser();
    const page = await readTwice('/api/v4/users?per_page=2&page=2');
    assert.equal(page.body.length, 2);
    assert.equal(page.headers['x-page'], '2');
    assert.equal(page.headers['x-prev-page'], '1');
    assert.ok(Number(page.headers['x-total']) >= 5);
    assert.match(page.headers.link, /rel="next"/);
    assert.notEqual((await t.get('/api/v4/users?per_page=2&page=1')).text, page.text, 'another query is another page');
  });

  it('drops kept pages when a write goes through the API', async () => {
    const before = await readTwice('/api/v4/users?per_page=100');
    const created = await t.post('/api/v4/users', { username: t.unique('fresh'), name: 'Fresh', email: `${t.unique('fresh')}@example.com`, password: 'fresh-password-1' });
    assert.equal(created.status, 201);
    const after = await t.get('/api/v4/users?per_page=100');
    assert.equal(Number(after.headers['x-total']), Number(before.headers['x-total']) + 1);
    assert.ok(after.body.some((u: { id: number }) => u.id === created.body.id));

    const project = await t.post('/api/v4/projects', { name: t.unique('listed'), visibility: 'public' });
    await readTwice('/api/v4/projects?per_page=100');
    assert.equal((await t.put(`/api/v4/projects/${project.body.id}`, { description: 'changed' })).status, 200);
    const projects = await t.get('/api/v4/projects?per_page=100');
    assert.equal(projects.body.find((p: { id: number }) => p.id === project.body.id).description, 'changed');

    const groupsBefore = await readTwice('/api/v4/groups');
    assert.equal((await t.post('/api/v4/groups', { name: 'Listed', path: t.unique('listed') })).status, 201);
    assert.equal(Number((await t.get('/api/v4/groups')).headers['x-total']), Number(groupsBefore.headers['x-total']) + 1);
  });

  it('drops kept members lists when members change', async () => {
    const group = await t.post('/api/v4/groups', { name: 'Members', path: t.unique('members') });
    const project = await t.post('/api/v4/projects', { name: t.unique('members'), namespace_id: group.body.id });
    const member = await t.createUser();
    const lists = [`/api/v4/projects/${project.body.id}/members`, `/api/v4/projects/${project.body.id}/members/all`, `/api/v4/groups/${group.body.id}/members`, `/api/v4/groups/${group.body.id}/members/all`];
    const totals = [];
    for (const url of lists) totals.push(Number((await readTwice(url)).headers['x-total']));
    assert.equal((await t.post(`/api/v4/groups/${group.body.id}/members`, { user_id: member.user.id, access_level: 30 })).status, 201);
    const added = [0, 1, 1, 1];
    for (const [i, url] of lists.entries()) assert.equal(Number((await t.get(url)).headers['x-total']), totals[i] + added[i], url);
    assert.equal((await t.put(`/api/v4/groups/${group.body.id}/members/${member.user.id}`, { access_level: 40 })).status, 200);
    const shown = (await t.get(`/api/v4/projects/${project.body.id}/members/all`)).body.find((m: { id: number }) => m.id === member.user.id);
    assert.equal(shown.access_level, 40);
  });

  it('a write keeps the pages that did not read what it changed (read tracking)', async () => {
    const project = await t.post('/api/v4/projects', { name: t.unique('tracked'), visibility: 'public' });
    const url = '/api/v4/projects?per_page=100';
    await readTwice(url);
    const entries = (t.app.cairn.cache as any).entries as Map<string, { reads: { all: boolean; tables: Set<string> } }>;
    const [key, entry] = [...entries].find(([k]) => k.startsWith('page:') && k.endsWith(url))!;
    assert.equal(entry.reads.all, false, 'the projects page reads no repository');
    assert.ok(entry.reads.tables.has('projects') && entry.reads.tables.has('namespaces'), [...entry.reads.tables].join(','));
    // Labels: a table the page does not read. The page stays; one that read it goes.
    assert.ok(!entry.reads.tables.has('labels'));
    const labels = `/api/v4/projects/${project.body.id}/labels`;
    await readTwice(labels);
    assert.equal((await t.post(labels, { name: t.unique('l'), color: '#ff0000' })).status, 201);
    assert.ok(entries.has(key), 'the projects page was kept');
    const before = renders;
    assert.equal((await t.get(url)).status, 200);
    assert.equal(renders, before, 'and served from memory');
    assert.equal((await t.get(labels)).body.length, 1, 'the labels page was dropped');
    // The project JSON was read from a row loaded before its value was computed: a rename drops it.
    const single = `/api/v4/projects/${project.body.id}`;
    await t.get(single);
    await t.get(single);
    assert.equal((await t.put(single, { name: 'Renamed' })).status, 200);
    assert.equal((await t.get(single)).body.name, 'Renamed');
  });

  it('keeps pages apart per caller: user, administrator, sudo and token scopes', async () => {
    const owner = await t.createUser();
    const outsider = await t.createUser();
    const readOnly = await t.createUser({ scopes: ['read_api'] });
    const project = await t.createProject({ owner: owner.user, visibility: 0 });
    const ids = (r: CallResult) => r.body.map((p: { id: number }) => p.id);
    assert.ok(ids(await readTwice('/api/v4/projects?per_page=100', owner.token)).includes(project.id));
    assert.ok(!ids(await readTwice('/api/v4/projects?per_page=100', outsider.token)).includes(project.id));
    assert.ok(!ids(await readTwice('/api/v4/projects?per_page=100', readOnly.token)).includes(project.id));
    assert.ok(ids(await readTwice('/api/v4/projects?per_page=100')).includes(project.id), 'the administrator sees it');
    const asOutsider = await t.get('/api/v4/projects?per_page=100', { headers: { sudo: outsider.user.username } });
    assert.ok(!ids(asOutsider).includes(project.id), 'root acting as the outsider sees what the outsider sees');

    const adminForm = await readTwice('/api/v4/users?per_page=5');
    const userForm = await readTwice('/api/v4/users?per_page=5', outsider.token);
    assert.ok('is_admin' in adminForm.body[0]);
    assert.ok(!('is_admin' in userForm.body[0]));
    assert.ok(!('is_admin' in (await t.get('/api/v4/users?per_page=5', { headers: { sudo: outsider.user.username } })).body[0]));
  });

  it('a caller who loses access is refused at once, though their page was kept', async () => {
    const member = await t.createUser();
    const group = await t.post('/api/v4/groups', { name: 'Private', path: t.unique('private'), visibility: 'private' });
    assert.equal((await t.post(`/api/v4/groups/${group.body.id}/members`, { user_id: member.user.id, access_level: 30 })).status, 201);
    await readTwice(`/api/v4/groups/${group.body.id}/members`, member.token);
    await readTwice('/api/v4/groups', member.token);
    assert.equal((await t.delete(`/api/v4/groups/${group.body.id}/members/${member.user.id}`)).status, 204);
    assert.equal((await t.get(`/api/v4/groups/${group.body.id}/members`, { token: member.token })).status, 404);
    assert.ok(!(await t.get('/api/v4/groups', { token: member.token })).body.some((g: { id: number }) => g.id === group.body.id));
  });

  it('a write that commits while a page renders does not leave that page behind', async () => {
    const project = await t.post('/api/v4/projects', { name: t.unique('racing'), visibility: 'public', description: 'before' });
    const url = '/api/v4/projects?per_page=100&order_by=id';
    const cache = t.app.cairn.cache;
    const load = cache.load.bind(cache);
    let racing = true;
    // The page has read its rows; another request's write commits and answers before the page is kept.
    cache.load = (async (key: string, fn: () => Promise<unknown>, opts?: object) => {
      if (!racing || !key.startsWith('page:')) return load(key, fn, opts);
      racing = false;
      return load(key, async () => {
        const page = await fn();
        assert.equal((await t.put(`/api/v4/projects/${project.body.id}`, { description: 'after' })).status, 200);
        return page;
      }, opts);
    }) as typeof cache.load;
    try {
      const stale = await t.get(url);
      assert.equal(stale.body.find((p: { id: number }) => p.id === project.body.id).description, 'before');
    } finally {
      cache.load = load;
    }
    assert.equal((await t.get(url)).body.find((p: { id: number }) => p.id === project.body.id).description, 'after');
  });
});
