// Checks of rows of the contract (spec/api-v4.md) that the per-area test files do not prove on their own.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { workTree, type WorkTree } from '../helpers/repo.js';
import { bearer, tokenRequest } from '../oauth/support.js';

describe('contract conformance', () => {
  let t: TestContext;
  let project: Project;
  let url: string;
  let w: WorkTree;
  const c: Record<string, string> = {};

  before(async () => {
    t = await createTestContext();
    project = await t.createProject({ visibility: 20 });
    url = `/api/v4/projects/${project.id}`;
    // main: A - B - C - M (M merges side: S1 - S2, forked from A); dates interleave the two lines.
    w = workTree(t, project);
    w.write('a.txt', 'a\n');
    c.A = w.commit('A');
    w.git(['checkout', '-q', '-b', 'side']);
    w.write('s.txt', '1\n');
    c.S1 = w.commit('S1');
    w.git(['checkout', '-q', 'main']);
    w.write('b.txt', 'b\n');
    c.B = w.commit('B');
    w.git(['checkout', '-q', 'side']);
    w.write('s.txt', '2\n');
    c.S2 = w.commit('S2');
    w.git(['checkout', '-q', 'main']);
    w.write('c.txt', 'c\n');
    c.C = w.commit('C');
    const date = `${1700000000 + 60 * 10} +0200`;
    w.git(['merge', '-q', '--no-ff', '-m', 'M', 'side'], { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date });
    c.M = w.git(['rev-parse', 'HEAD']);
    w.push();
  });
  after(async () => {
    await t.close();
  });

  describe('commits list', () => {
    const titles = async (query: Record<string, unknown>) => {
      const res = await t.get(`${url}/repository/commits`, { query: { per_page: 100, ...query } });
      assert.equal(res.status, 200, res.text);
      return res.body.map((x: any) => x.title);
    };

    it('default order is reverse chronological; order=topo keeps each line of history together', async () => {
      assert.deepEqual(await titles({}), ['M', 'C', 'S2', 'B', 'S1', 'A']);
      const topo = await titles({ order: 'topo' });
      assert.equal(topo[0], 'M');
      assert.equal(topo.at(-1), 'A');
      // No interleaving: main's B, C and side's S1, S2 each appear as one run.
      const run = (a: string, b: string) => Math.abs(topo.indexOf(a) - topo.indexOf(b)) === 1;
      assert.ok(run('B', 'C') && run('S1', 'S2'), topo.join(','));
      assert.equal((await t.get(`${url}/repository/commits`, { query: { order: 'topo' } })).headers['x-total'], '6');
    });

    it('first_parent follows only the first parent of merges, and counts so', async () => {
      assert.deepEqual(await titles({ first_parent: true }), ['M', 'C', 'B', 'A']);
      const res = await t.get(`${url}/repository/commits`, { query: { first_parent: true, per_page: 2 } });
      assert.equal(res.headers['x-total'], '4');
    });

    it('since and until are inclusive to the second, and a fractional since does not reach back', async () => {
      const at = (n: number) => new Date((1700000000 + 60 * n) * 1000).toISOString().replace('.000Z', 'Z');
      // B is the third commit (tick 3), S2 the fourth.
      assert.deepEqual(await titles({ since: at(3), until: at(4) }), ['S2', 'B']);
      const fractional = new Date((1700000000 + 60 * 3) * 1000 + 500).toISOString();
      assert.deepEqual(await titles({ since: fractional, until: at(4) }), ['S2']);
    });

    it('trailers: only asked for, parsed from the last paragraph', async () => {
      const tw = workTree(t, project);
      tw.git(['fetch', '-q', w.bare, 'main']);
      tw.git(['checkout', '-q', '-b', 'trail', 'FETCH_HEAD']);
      tw.commit('Trailer commit\n\nBody: not a trailer paragraph\n\nReviewed-by: Rev <rev@example.com>\nCloses: #1');
      tw.push('trail');
      const res = await t.get(`${url}/repository/commits`, { query: { ref_name: 'trail', trailers: true, per_page: 1 } });
      assert.deepEqual(res.body[0].trailers, { 'Reviewed-by': 'Rev <rev@example.com>', Closes: '#1' });
      const without = await t.get(`${url}/repository/commits`, { query: { ref_name: 'trail', per_page: 1 } });
      assert.deepEqual(without.body[0].trailers, {});
    });
  });

  describe('repository', () => {
    it('the tree and other lists default to 20 per page', async () => {
      const many = workTree(t, project);
      many.git(['fetch', '-q', w.bare, 'main']);
      many.git(['checkout', '-q', '-b', 'many', 'FETCH_HEAD']);
      for (let i = 0; i < 25; i++) many.write(`f/${String(i).padStart(2, '0')}.txt`, `${i}\n`);
      many.commit('many files');
      many.push('many');
      const tree = await t.get(`${url}/repository/tree`, { query: { ref: 'many', path: 'f' } });
      assert.equal(tree.body.length, 20);
      assert.equal(tree.headers['x-per-page'], '20');
      const keyset = await t.get(`${url}/repository/tree`, { query: { ref: 'many', path: 'f', pagination: 'keyset' } });
      assert.equal(keyset.body.length, 20);
      assert.match(keyset.headers.link, /page_token=/);
      const commits = await t.get(`${url}/repository/commits`, { query: { ref_name: 'many' } });
      assert.equal(commits.headers['x-per-page'], '20');
    });

    it('archive downloads are limited to 5 per minute per caller by default (429 after)', async () => {
      const u = await t.createUser();
      for (let i = 0; i < 5; i++) assert.equal((await t.get(`${url}/repository/archive.zip`, { token: u.token })).status, 200);
      const over = await t.get(`${url}/repository/archive.tar.bz2`, { token: u.token });
      assert.equal(over.status, 429);
      assert.ok(Number(over.headers['retry-after']) >= 1);
    });
  });

  describe('members', () => {
    it('/members/all filters by state and shows membership_state (awaiting or active)', async () => {
      const group = await t.createGroup();
      const gp = await t.createProject({ group });
      const waiting = await t.createUser();
      const active = await t.createUser();
      await t.addMember(group, waiting.user, 30);
      await t.addMember(gp, active.user, 20);
      await t.db.updateTable('members').set({ state: 1 }).where('user_id', '=', waiting.user.id).execute();
      const all = await t.get(`/api/v4/projects/${gp.id}/members/all`, { query: { per_page: 100 } });
      const states = Object.fromEntries(all.body.map((m: any) => [m.id, m.membership_state]));
      assert.equal(states[waiting.user.id], 'awaiting');
      assert.equal(states[active.user.id], 'active');
      const awaiting = await t.get(`/api/v4/projects/${gp.id}/members/all`, { query: { state: 'awaiting' } });
      assert.deepEqual(awaiting.body.map((m: any) => m.id), [waiting.user.id]);
      const onlyActive = await t.get(`/api/v4/groups/${group.id}/members/all`, { query: { state: 'active', per_page: 100 } });
      assert.ok(!onlyActive.body.some((m: any) => m.id === waiting.user.id));
      assert.equal((await t.get(`/api/v4/groups/${group.id}/members/all`, { query: { state: 'bogus' } })).status, 400);
    });
  });

  describe('OAuth', () => {
    it('token info reads the token from the access_token query parameter too', async () => {
      const u = await t.createUser();
      const tok = await tokenRequest(t, { grant_type: 'password', username: u.user.username, password: u.password });
      assert.equal(tok.status, 200, tok.text);
      for (const key of ['access_token', 'token_type', 'expires_in']) assert.ok(key in tok.body, key);
      const viaQuery = await t.get(`/oauth/token/info?access_token=${tok.body.access_token}`, { token: null });
      assert.equal(viaQuery.status, 200);
      assert.equal(viaQuery.body.resource_owner_id, u.user.id);
      assert.deepEqual(viaQuery.body.scope, ['api']);
      assert.deepEqual(viaQuery.body.scopes, ['api']);
      assert.equal(viaQuery.body.expires_in_seconds, viaQuery.body.expires_in);
      const viaHeader = await t.get('/oauth/token/info', bearer(tok.body.access_token));
      assert.equal(viaHeader.body.created_at, viaQuery.body.created_at);
    });
  });
});
