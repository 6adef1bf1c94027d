import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { nextInternalId } from '../../src/services/internal_ids.js';
import { createTestContext, ROOT_TOKEN, type TestContext, type TestUser } from '../helpers/app.js';

/**
 * Issue #25: list filters may not exhaust the server. Label filters are one aggregate whatever
 * their count (160 labels once took 11 s and a 500; 500 labels 277 s and the embedded database),
 * and every list parameter has a cap with a 400 beyond it.
 */
describe('list filter limits', () => {
  let t: TestContext;
  let project: Project;
  let developer: TestUser;
  const issues: Record<string, number> = {};
  const mrs: Record<string, number> = {};
  const labelNames = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `l${i + from}`);
  /** The server's time for one request, in ms, and its answer. */
  const timed = async (url: string, query: Record<string, unknown>, token: string | null = developer.token) => {
    const t0 = performance.now();
    const res = await t.get(url, { token, query: query as any });
    return { res, ms: performance.now() - t0 };
  };

  before(async () => {
    t = await createTestContext();
    developer = await t.createUser();
    project = await t.createProject({ visibility: 20 });
    await t.addMember(project, developer.user, 30);
    const labels = await t.db.insertInto('labels')
      .values(['l0', 'l1', 'L2', 'other'].map((title) => ({ title, color: '#000000', project_id: project.id })))
      .returning(['id', 'title']).execute();
    const id = (title: string) => labels.find((l) => l.title === title)!.id;
    // both: l0 and L2; one: l0 only; none: no label; other: 'other' only.
    const sets: Record<string, string[]> = { both: ['l0', 'L2'], one: ['l0'], none: [], other: ['other'] };
    for (const [name, set] of Object.entries(sets)) {
      const iid = await nextInternalId(t.db, 'issues', project.id);
      const issue = await t.db.insertInto('issues').values({ iid, project_id: project.id, title: `issue ${name}`, author_id: developer.user.id, state_id: 1 })
        .returning('id').executeTakeFirstOrThrow();
      issues[name] = iid;
      const miid = await nextInternalId(t.db, 'merge_requests', project.id);
      const mr = await t.db.insertInto('merge_requests')
        .values({ iid: miid, target_project_id: project.id, source_project_id: project.id, source_branch: `b${miid}`, target_branch: 'main', title: `mr ${name}`, state_id: 1, author_id: developer.user.id })
        .returning('id').executeTakeFirstOrThrow();
      mrs[name] = miid;
      for (const title of set) {
        await t.db.insertInto('label_links').values([
          { label_id: id(title), target_type: 'Issue', target_id: issue.id, created_at: new Date() },
          { label_id: id(title), target_type: 'MergeRequest', target_id: mr.id, created_at: new Date() },
        ]).execute();
      }
    }
  });
  after(async () => { await t.close(); });

  const iidsOf = (body: any[]) => body.map((x) => x.iid).sort((a, b) => a - b);

  for (const kind of ['issues', 'merge_requests'] as const) {
    it(`${kind}: labels match all given names (any case), not[labels] none of them, as one aggregate`, async () => {
      const url = `/api/v4/projects/${project.id}/${kind}`;
      const want = kind === 'issues' ? issues : mrs;
      const all = await t.get(url, { token: developer.token, query: { labels: 'l0,l2' } });
      assert.equal(all.status, 200, JSON.stringify(all.body));
      assert.deepEqual(iidsOf(all.body), [want.both]);
      // A name given twice (in any case) counts once.
      const twice = await t.get(url, { token: developer.token, query: { labels: 'l0,L0' } });
      assert.deepEqual(iidsOf(twice.body), [want.both, want.one].sort((a, b) => a - b));
      const not = await t.get(url, { token: developer.token, query: { 'not[labels]': 'l0,other' } });
      assert.deepEqual(iidsOf(not.body), [want.none]);
      const none = await t.get(url, { token: developer.token, query: { labels: 'None' } });
      assert.deepEqual(iidsOf(none.body), [want.none]);
      const any = await t.get(url, { token: developer.token, query: { labels: 'Any' } });
      assert.deepEqual(iidsOf(any.body), [want.both, want.one, want.other].sort((a, b) => a - b));
      // Every one of 100 names, one of which no item has: nothing.
      const many = await t.get(url, { token: developer.token, query: { labels: ['l0', 'L2', ...labelNames(98, 100)].join(',') } });
      assert.equal(many.status, 200);
      assert.deepEqual(many.body, []);
      const notMany = await t.get(url, { token: developer.token, query: { 'not[labels]': ['l0', ...labelNames(99, 100)].join(',') } });
      assert.deepEqual(iidsOf(notMany.body), [want.none, want.other].sort((a, b) => a - b));
    });
  }

  it('assignee_username[] (every one), not[assignee_username] (none) and approver_ids (all developers) are one aggregate; their caps', async () => {
    const other = await t.createUser();
    const reporter = await t.createUser();
    await t.addMember(project, other.user, 30);
    await t.addMember(project, reporter.user, 20);
    const issueId = async (iid: number) => (await t.db.selectFrom('issues').select('id').where('project_id', '=', project.id).where('iid', '=', iid).executeTakeFirstOrThrow()).id;
    await t.db.insertInto('issue_assignees').values([
      { issue_id: await issueId(issues.both), user_id: developer.user.id },
      { issue_id: await issueId(issues.both), user_id: other.user.id },
      { issue_id: await issueId(issues.one), user_id: developer.user.id },
    ]).execute();
    const url = `/api/v4/projects/${project.id}/issues`;
    const both = await t.get(url, { token: developer.token, query: { 'assignee_username[]': [developer.user.username.toUpperCase(), other.user.username] } as any });
    assert.equal(both.status, 200, JSON.stringify(both.body));
    assert.deepEqual(iidsOf(both.body), [issues.both]);
    const not = await t.get(url, { token: developer.token, query: { 'not[assignee_username][]': [other.user.username, 'nobody-at-all'] } as any });
    assert.deepEqual(iidsOf(not.body), [issues.one, issues.none, issues.other]);
    const tooMany = await t.get(url, { token: developer.token, query: { assignee_username: labelNames(101).join(',') } });
    assert.equal(tooMany.status, 400);
    assert.deepEqual(tooMany.body, { error: 'assignee_username allows a maximum of 100 items' });
    const iids = await t.get(url, { token: developer.token, query: { 'iids[]': Array.from({ length: 101 }, (_, i) => i + 1) } as any });
    assert.deepEqual(iids.body, { error: 'iids allows a maximum of 100 items' });
    const notLabels = await t.get(url, { token: developer.token, query: { 'not[labels]': labelNames(101).join(',') } });
    assert.deepEqual(notLabels.body, { error: 'not[labels] allows a maximum of 100 items' });

    const mrUrl = `/api/v4/projects/${project.id}/merge_requests`;
    const approvers = await t.get(mrUrl, { token: developer.token, query: { approver_ids: `${developer.user.id},${other.user.id},${developer.user.id}` } });
    assert.equal(approvers.status, 200, JSON.stringify(approvers.body));
    assert.equal(approvers.body.length, 4);
    const withReporter = await t.get(mrUrl, { token: developer.token, query: { approver_ids: `${developer.user.id},${reporter.user.id}` } });
    assert.deepEqual(withReporter.body, []);
    const manyIds = Array.from({ length: 100 }, (_, i) => i + 1).join(',');
    const { res: capped, ms } = await timed(mrUrl, { approver_ids: manyIds });
    assert.equal(capped.status, 200);
    assert.ok(ms < 1000, `100 approver_ids took ${ms.toFixed(0)} ms`);
    const over = await t.get(mrUrl, { token: developer.token, query: { approver_ids: `${manyIds},101` } });
    assert.deepEqual(over.body, { error: 'approver_ids allows a maximum of 100 items' });
    const approvedBy = await t.get(mrUrl, { token: developer.token, query: { approved_by_ids: '1,2,3,4,5,6' } });
    assert.deepEqual(approvedBy.body, { error: 'approved_by_ids allows a maximum of 5 items' });
  });

  it('160 and 500 labels answer a 400 fast, on /issues (anonymous), project issues and merge requests', async () => {
    const urls: [string, string | null][] = [
      ['/api/v4/issues', null],
      [`/api/v4/projects/${project.id}/issues`, developer.token],
      [`/api/v4/projects/${project.id}/merge_requests`, developer.token],
      ['/api/v4/merge_requests', developer.token],
    ];
    for (const [url, token] of urls) {
      for (const n of [160, 500]) {
        for (const param of ['labels', 'not[labels]']) {
          const { res, ms } = await timed(url, { scope: 'all', [param]: labelNames(n).join(',') }, token);
          assert.equal(res.status, 400, `${url} ${param} ${n}: ${JSON.stringify(res.body)}`);
          assert.match(JSON.stringify(res.body), /labels/);
          assert.ok(ms < 1000, `${url} ${param} with ${n} labels took ${ms.toFixed(0)} ms`);
        }
      }
    }
  });

  it('100 labels (the cap) answer fast, with and without not[labels]', async () => {
    const names = labelNames(100).join(',');
    for (const url of ['/api/v4/issues', `/api/v4/projects/${project.id}/issues`, `/api/v4/projects/${project.id}/merge_requests`, '/api/v4/merge_requests']) {
      const { res, ms } = await timed(url, { scope: 'all', labels: names, 'not[labels]': names }, developer.token);
      assert.equal(res.status, 200, `${url}: ${JSON.stringify(res.body)}`);
      assert.ok(ms < 1000, `${url} with 100 labels took ${ms.toFixed(0)} ms`);
    }
  });

  it('in=title,title,... (as many as fit in a URL) is one condition per field', async () => {
    for (const url of [`/api/v4/projects/${project.id}/issues`, '/api/v4/merge_requests']) {
      const { res, ms } = await timed(url, { scope: 'all', search: 'other', in: Array(2500).fill('title').join(',') });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(iidsOf(res.body), [url.includes('issues') ? issues.other : mrs.other]);
      assert.ok(ms < 1000, `${url} with in=title x 2500 took ${ms.toFixed(0)} ms`);
    }
  });

  it('custom_attributes: every pair must match, one count whatever their number; at most 100 pairs', async () => {
    const who = await t.createUser();
    await t.db.insertInto('user_custom_attributes').values([
      { user_id: who.user.id, key: 'team', value: 'red' },
      { user_id: who.user.id, key: 'site', value: 'north' },
    ]).execute();
    const ids = async (query: Record<string, string>) => {
      const res = await t.get('/api/v4/users', { query }); // as root
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.map((u: any) => u.id);
    };
    assert.deepEqual(await ids({ 'custom_attributes[team]': 'red', 'custom_attributes[site]': 'north' }), [who.user.id]);
    assert.deepEqual(await ids({ 'custom_attributes[team]': 'red', 'custom_attributes[site]': 'south' }), []);
    const hundred = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`custom_attributes[k${i}]`, 'v']));
    const { res, ms } = await timed('/api/v4/users', hundred, ROOT_TOKEN);
    assert.equal(res.status, 200);
    assert.ok(ms < 1000, `100 custom attributes took ${ms.toFixed(0)} ms`);
    const over = await t.get('/api/v4/users', { query: { ...hundred, 'custom_attributes[k100]': 'v' } });
    assert.deepEqual(over.body, { error: 'custom_attributes allows a maximum of 100 items' });
  });

  it('every other list parameter takes at most 100 items', async () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => i + 1).join(',');
    const group = await t.createGroup({ path: t.unique('g') });
    const cases: [string, Record<string, string>, string][] = [
      [`/api/v4/projects/${project.id}/repository/merge_base`, { refs: many(101) }, 'refs'],
      [`/api/v4/projects/${project.id}/milestones`, { 'iids[]': many(101) }, 'iids'],
      [`/api/v4/projects/${project.id}/users`, { skip_users: many(101) }, 'skip_users'],
      [`/api/v4/projects/${project.id}/members`, { user_ids: many(101) }, 'user_ids'],
      [`/api/v4/groups/${group.id}/members/all`, { skip_users: many(101) }, 'skip_users'],
      ['/api/v4/groups', { skip_groups: many(101) }, 'skip_groups'],
      ['/api/v4/projects', { topic: many(101) }, 'topic'],
      ['/api/v4/runners/all', { tag_list: many(101) }, 'tag_list'],
      [`/api/v4/projects/${project.id}/issues`, { issue_type: many(101) }, 'issue_type'],
      [`/api/v4/groups/${group.id}/epics`, { labels: many(101) }, 'labels'],
    ];
    for (const [url, query, name] of cases) {
      const res = await t.get(url, { query }); // as root
      assert.equal(res.status, 400, `${url}: ${res.status} ${JSON.stringify(res.body)}`);
      assert.deepEqual(res.body, { error: `${name} allows a maximum of 100 items` }, url);
      const atCap = await t.get(url, { query: Object.fromEntries(Object.entries(query).map(([k]) => [k, many(100)])) });
      assert.notEqual(atCap.status, 500, url);
      assert.doesNotMatch(JSON.stringify(atCap.body), /maximum of/, url);
    }
  });
});
