import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { labelEventsOf } from '../../src/finders/labels.js';
import { presentResourceLabelEvent } from '../../src/presenters/labels.js';
import { GroupLabelSchema, ProjectLabelSchema, ResourceLabelEventSchema } from '../../src/presenters/schemas/labels.js';
import { setLabels } from '../../src/services/label_links.js';
import { nextInternalId } from '../../src/services/internal_ids.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertMatches, assertOne } from '../helpers/contract.js';

describe('labels API', () => {
  let t: TestContext;
  let top: Namespace;
  let sub: Namespace;
  let project: Project;
  let sibling: Project;
  let publicProject: Project;
  let personal: Project;
  let guest: TestUser;
  let reporter: TestUser;
  let developer: TestUser;
  let maintainer: TestUser;
  let groupReporter: TestUser;
  let groupGuest: TestUser;
  let outsider: TestUser;
  const api = (p: Project | number, rest = '') => `/api/v4/projects/${typeof p === 'number' ? p : p.id}/labels${rest}`;
  const gapi = (g: Namespace, rest = '') => `/api/v4/groups/${g.id}/labels${rest}`;

  async function issue(p: Project, attrs: { state_id?: number; confidential?: boolean; author_id?: number } = {}) {
    const iid = await nextInternalId(t.db, 'issues', p.id);
    return t.db
      .insertInto('issues')
      .values({ iid, project_id: p.id, title: `issue ${iid}`, author_id: attrs.author_id ?? null, state_id: attrs.state_id ?? 1, confidential: attrs.confidential ?? false })
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async function mergeRequest(p: Project, state_id = 1) {
    const iid = await nextInternalId(t.db, 'merge_requests', p.id);
    return t.db
      .insertInto('merge_requests')
      .values({ iid, target_project_id: p.id, source_project_id: p.id, source_branch: `b${iid}`, target_branch: 'main', title: `mr ${iid}`, state_id, author_id: null })
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async function link(labelId: number, targetType: 'Issue' | 'MergeRequest', targetId: number) {
    await t.db.insertInto('label_links').values({ label_id: labelId, target_type: targetType, target_id: targetId, created_at: new Date() }).execute();
  }

  before(async () => {
    t = await createTestContext();
    top = await t.createGroup({ path: t.unique('top') });
    sub = await t.createGroup({ path: t.unique('sub'), parent: top });
    project = await t.createProject({ group: sub });
    sibling = await t.createProject({ group: top });
    publicProject = await t.createProject({ visibility: 20 });
    personal = await t.createProject();
    [guest, reporter, developer, maintainer, groupReporter, groupGuest, outsider] = await Promise.all(Array.from({ length: 7 }, () => t.createUser()));
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(top, groupReporter.user, 20);
    await t.addMember(top, groupGuest.user, 10);
  });
  after(async () => {
    await t.close();
  });

  describe('permissions', () => {
    it('asks anonymous callers to sign in, on public and private projects alike', async () => {
      for (const p of [publicProject, project]) {
        const res = await t.get(api(p), { token: null });
        assert.equal(res.status, 401);
        assert.deepEqual(res.body, { message: '401 Unauthorized' });
      }
      assert.equal((await t.get(gapi(top), { token: null })).status, 401);
    });

    it('hides private projects and groups from outsiders, shows public ones', async () => {
      assert.equal((await t.get(api(project), { token: outsider.token })).status, 404);
      assert.equal((await t.get(gapi(top), { token: outsider.token })).status, 404);
      const pub = await t.get(api(publicProject), { token: outsider.token });
      assert.equal(pub.status, 200);
      assert.equal((await t.post(api(publicProject), { name: 'x', color: '#000000' }, { token: outsider.token })).status, 403);
    });

    it('lets guests read and reporters and up manage labels', async () => {
      assert.equal((await t.get(api(project), { token: guest.token })).status, 200);
      const denied = await t.post(api(project), { name: 'by-guest', color: '#111111' }, { token: guest.token });
      assert.equal(denied.status, 403);
      assert.deepEqual(denied.body, { message: '403 Forbidden' });
      for (const [who, name] of [[reporter, 'by-reporter'], [developer, 'by-developer'], [maintainer, 'by-maintainer']] as const) {
        const res = await t.post(api(project), { name, color: '#123456' }, { token: who.token });
        assert.equal(res.status, 201, `${name}: ${JSON.stringify(res.body)}`);
      }
      const admin = await t.post(api(project), { name: 'by-admin', color: '#123456' });
      assert.equal(admin.status, 201);
      assert.equal((await t.delete(api(project, '/by-admin'), { token: guest.token })).status, 403);
      assert.equal((await t.put(api(project, '/by-admin'), { color: 'red' }, { token: guest.token })).status, 403);
    });

    it('lets group guests read and group reporters manage group labels', async () => {
      assert.equal((await t.get(gapi(top), { token: groupGuest.token })).status, 200);
      assert.equal((await t.post(gapi(top), { name: 'g-by-guest', color: '#222222' }, { token: groupGuest.token })).status, 403);
      assert.equal((await t.post(gapi(top), { name: 'g-by-reporter', color: '#222222' }, { token: groupReporter.token })).status, 201);
      // Project members read the groups above their project, but manage none of their labels.
      assert.equal((await t.get(gapi(sub), { token: maintainer.token })).status, 200);
      assert.equal((await t.post(gapi(sub), { name: 'g-by-project-member', color: '#222222' }, { token: maintainer.token })).status, 403);
    });

    it('refuses label changes on archived projects and reading when issues and merge requests are off', async () => {
      const archived = await t.createProject({ group: top });
      await t.db.updateTable('projects').set({ archived: true }).where('id', '=', archived.id).execute();
      assert.equal((await t.get(api(archived))).status, 200);
      assert.equal((await t.post(api(archived), { name: 'a', color: '#000000' })).status, 403);

      const plain = await t.createProject({ visibility: 20 });
      const off = await t.put(`/api/v4/projects/${plain.id}`, { issues_access_level: 'disabled', merge_requests_access_level: 'disabled' });
      assert.equal(off.status, 200, JSON.stringify(off.body));
      assert.equal((await t.get(api(plain), { token: outsider.token })).status, 403);
    });
  });

  describe('project labels', () => {
    it('creates a label with GitLab’s fields, colours and contrast', async () => {
      const res = await t.post(api(project), { name: 'bug', color: '#d9534f', description: 'Something **broke**', priority: 3 }, { token: reporter.token });
      assert.equal(res.status, 201);
      assertOne(ProjectLabelSchema, res, 'created label');
      assert.deepEqual(
        { ...res.body, id: 0 },
        {
          id: 0,
          name: 'bug',
          color: '#d9534f',
          text_color: '#FFFFFF',
          description: 'Something **broke**',
          description_html: '<p>Something <strong>broke</strong></p>',
          subscribed: false,
          priority: 3,
          is_project_label: true,
        },
      );
      const light = await t.post(api(project), { name: 'light', color: 'LightYellow' });
      assert.equal(light.body.color, '#FFFFE0');
      assert.equal(light.body.text_color, '#333333');
      assert.equal(light.body.description, null);
      assert.equal(light.body.description_html, null);
      assert.equal(light.body.priority, null);
      const short = await t.post(api(project), { name: 'short', color: '#fff' });
      assert.equal(short.status, 201);
      assert.equal(short.body.color, '#fff');
      assert.equal(short.body.text_color, '#333333');
    });

    it('answers validation errors as GitLab does', async () => {
      const badColor = await t.post(api(project), { name: 'c1', color: 'blueish' });
      assert.equal(badColor.status, 400);
      assert.deepEqual(badColor.body, { message: { color: ['must be a valid color code'] } });
      assert.deepEqual((await t.post(api(project), { name: 'c2', color: '#12345' })).body, { message: { color: ['must be a valid color code'] } });
      const dup = await t.post(api(project), { name: 'bug', color: '#000000' });
      assert.equal(dup.status, 409);
      assert.deepEqual(dup.body, { message: 'Label already exists' });
      assert.deepEqual((await t.post(api(project), { color: '#000000' })).body, { error: 'name is missing' });
      assert.deepEqual((await t.post(api(project), { name: 'nocolor' })).body, { error: 'color is missing' });
      const comma = await t.post(api(project), { name: 'a,b', color: '#000000' });
      assert.equal(comma.status, 400);
      assert.deepEqual(comma.body, { message: { title: ['is invalid'] } });
      const blank = await t.post(api(project), { name: '  ', color: '#000000' });
      assert.deepEqual(blank.body, { message: { title: ["can't be blank", 'is invalid'] } });
      const long = await t.post(api(project), { name: 'x'.repeat(256), color: '#000000' });
      assert.deepEqual(long.body, { message: { title: ['is too long (maximum is 255 characters)'] } });
      assert.deepEqual((await t.post(api(project), { name: 'p', color: '#000000', priority: 'high' })).body, { error: 'priority is invalid' });
      assert.deepEqual((await t.post(api(project), { name: 'p', color: '#000000', priority: -1 })).body, { message: { priority: ['must be greater than or equal to 0'] } });
      // HTML in titles is dropped, as GitLab sanitizes them.
      const html = await t.post(api(project), { name: '<b>strong</b> one', color: '#000000' });
      assert.equal(html.body.name, 'strong one');
    });

    it('gets a label by id or by title (URL-encoded), 404 otherwise', async () => {
      const created = await t.post(api(project), { name: 'needs/triage now', color: '#00ff00' });
      const byId = await t.get(api(project, `/${created.body.id}`), { token: guest.token });
      assert.equal(byId.status, 200);
      assert.equal(byId.body.name, 'needs/triage now');
      const byTitle = await t.get(api(project, `/${encodeURIComponent('needs/triage now')}`), { token: guest.token });
      assert.equal(byTitle.body.id, created.body.id);
      const missing = await t.get(api(project, '/nothing-here'));
      assert.equal(missing.status, 404);
      assert.deepEqual(missing.body, { message: '404 Label Not Found' });
      // A label of another project is not this project's.
      const other = await t.post(api(sibling), { name: 'sibling-only', color: '#000000' });
      assert.equal((await t.get(api(project, `/${other.body.id}`))).status, 404);
    });

    it('updates name, colour, description and priority; null priority removes it', async () => {
      const created = await t.post(api(project), { name: 'to-edit', color: '#000000' });
      const res = await t.put(api(project, '/to-edit'), { new_name: 'edited', color: 'white', description: 'Now _described_', priority: 7 }, { token: reporter.token });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assertOne(ProjectLabelSchema, res, 'updated label');
      assert.equal(res.body.id, created.body.id);
      assert.equal(res.body.name, 'edited');
      assert.equal(res.body.color, '#FFFFFF');
      assert.equal(res.body.text_color, '#333333');
      assert.equal(res.body.description_html, '<p>Now <em>described</em></p>');
      assert.equal(res.body.priority, 7);
      const cleared = await t.put(api(project, `/${created.body.id}`), { priority: null });
      assert.equal(cleared.body.priority, null);
      await t.put(api(project, '/edited'), { priority: 4 });
      const form = await t.call('PUT', api(project, '/edited'), { form: 'priority=' });
      assert.equal(form.status, 200);
      assert.equal(form.body.priority, null);

      const none = await t.put(api(project, '/edited'), {});
      assert.equal(none.status, 400);
      assert.deepEqual(none.body, { error: 'new_name, color, description, priority are missing, at least one parameter must be provided' });
      const taken = await t.put(api(project, '/edited'), { new_name: 'bug' });
      assert.equal(taken.status, 400);
      assert.deepEqual(taken.body, { message: { title: ['has already been taken'] } });
      const badColor = await t.put(api(project, '/edited'), { color: 'nope' });
      assert.deepEqual(badColor.body, { message: { color: ['must be a valid color code'] } });
      assert.equal((await t.put(api(project, '/missing'), { color: 'red' })).status, 404);
    });

    it('keeps the deprecated forms that name the label in the body', async () => {
      const created = await t.post(api(project), { name: 'legacy', color: '#000000' });
      const byName = await t.put(api(project), { name: 'legacy', color: '#111111' });
      assert.equal(byName.status, 200);
      assert.equal(byName.body.color, '#111111');
      const byId = await t.put(api(project), { label_id: created.body.id, new_name: 'legacy2' });
      assert.equal(byId.body.name, 'legacy2');
      assert.deepEqual((await t.put(api(project), { color: 'red' })).body, { error: 'label_id, name are missing, exactly one parameter must be provided' });
      assert.deepEqual((await t.put(api(project), { name: 'legacy2', label_id: created.body.id, color: 'red' })).body, { error: 'label_id, name are mutually exclusive' });
      const del = await t.delete(api(project), { query: { name: 'legacy2' } });
      assert.equal(del.status, 204);
      assert.equal((await t.get(api(project, `/${created.body.id}`))).status, 404);
    });

    it('deletes a label (204), its links and priority with it', async () => {
      const created = await t.post(api(project), { name: 'doomed', color: '#000000', priority: 1 });
      const i = await issue(project);
      await link(created.body.id, 'Issue', i.id);
      const res = await t.delete(api(project, '/doomed'), { token: reporter.token });
      assert.equal(res.status, 204);
      assert.equal(res.text, '');
      assert.equal((await t.get(api(project, `/${created.body.id}`))).status, 404);
      assert.equal((await t.db.selectFrom('label_links').select('label_id').where('label_id', '=', created.body.id).execute()).length, 0);
      assert.equal((await t.db.selectFrom('label_priorities').select('label_id').where('label_id', '=', created.body.id).execute()).length, 0);
      assert.equal((await t.delete(api(project, '/doomed'))).status, 404);
    });

    it('lists with search, pagination headers and counts', async () => {
      const own = await t.createProject({ group: sub });
      await t.addMember(own, reporter.user, 20);
      await t.addMember(own, guest.user, 10);
      const names = ['alpha', 'beta', 'gamma', 'delta'];
      const ids: Record<string, number> = {};
      for (const name of names) ids[name] = (await t.post(api(own), { name, color: '#336699', description: `the ${name} label` })).body.id;
      const all = await t.get(api(own), { query: { include_ancestor_groups: 'false', per_page: 2 } });
      assert.equal(all.status, 200);
      assert.equal(all.headers['x-total'], String(names.length + (await groupLabelCount(sub))));
      assert.equal(all.headers['x-per-page'], '2');
      assert.equal(all.body.length, 2);
      const searched = await t.get(api(own), { query: { search: 'amm', include_ancestor_groups: 'false' } });
      assert.deepEqual(searched.body.map((l: any) => l.name), ['gamma']);
      const byDescription = await t.get(api(own), { query: { search: 'the delta' } });
      assert.deepEqual(byDescription.body.map((l: any) => l.name), ['delta']);
      assert.equal(all.body[0].open_issues_count, undefined, 'counts only with with_counts');

      const open = await issue(own);
      const closed = await issue(own, { state_id: 2 });
      const secret = await issue(own, { confidential: true });
      const mr = await mergeRequest(own);
      const merged = await mergeRequest(own, 3);
      for (const target of [open, closed, secret]) await link(ids.alpha, 'Issue', target.id);
      await link(ids.alpha, 'MergeRequest', mr.id);
      await link(ids.alpha, 'MergeRequest', merged.id);
      await link(ids.beta, 'Issue', open.id);

      const counted = await t.get(api(own), { token: reporter.token, query: { with_counts: 'true', search: 'a' } });
      assertEach(ProjectLabelSchema, counted, 'labels with counts');
      const alpha = counted.body.find((l: any) => l.name === 'alpha');
      assert.deepEqual([alpha.open_issues_count, alpha.closed_issues_count, alpha.open_merge_requests_count], [2, 1, 1]);
      const beta = counted.body.find((l: any) => l.name === 'beta');
      assert.deepEqual([beta.open_issues_count, beta.closed_issues_count, beta.open_merge_requests_count], [1, 0, 0]);
      const gamma = counted.body.find((l: any) => l.name === 'gamma');
      assert.deepEqual([gamma.open_issues_count, gamma.closed_issues_count, gamma.open_merge_requests_count], [0, 0, 0]);
      // A guest does not count the confidential issue.
      const asGuest = await t.get(api(own), { token: guest.token, query: { with_counts: true, search: 'alpha' } });
      assert.equal(asGuest.body[0].open_issues_count, 1);
    });

    it('subscribes and unsubscribes (201, then 304 when nothing changes)', async () => {
      await t.post(api(project), { name: 'watched', color: '#000000' });
      const sub1 = await t.post(api(project, '/watched/subscribe'), {}, { token: guest.token });
      assert.equal(sub1.status, 201);
      assert.equal(sub1.body.subscribed, true);
      assert.equal((await t.post(api(project, '/watched/subscribe'), {}, { token: guest.token })).status, 304);
      assert.equal((await t.get(api(project, '/watched'), { token: guest.token })).body.subscribed, true);
      assert.equal((await t.get(api(project, '/watched'), { token: reporter.token })).body.subscribed, false);
      const unsub = await t.post(api(project, '/watched/unsubscribe'), {}, { token: guest.token });
      assert.equal(unsub.status, 201);
      assert.equal(unsub.body.subscribed, false);
      assert.equal((await t.post(api(project, '/watched/unsubscribe'), {}, { token: guest.token })).status, 304);
    });
  });

  async function groupLabelCount(g: Namespace): Promise<number> {
    const row = await t.db.selectFrom('labels').select((eb) => eb.fn.countAll<number>().as('n')).where('group_id', '=', g.id).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  describe('group labels and inheritance', () => {
    let topLabel: any;
    let subLabel: any;

    before(async () => {
      topLabel = (await t.post(gapi(top), { name: 'org-wide', color: '#aa0000', description: 'From the top' })).body;
      subLabel = (await t.post(gapi(sub), { name: 'team', color: '#00aa00' })).body;
    });

    it('creates, reads, updates and deletes group labels', async () => {
      assert.equal(topLabel.name, 'org-wide');
      const one = await t.get(gapi(top, `/${topLabel.id}`), { token: groupGuest.token });
      assertOne(GroupLabelSchema, one, 'group label');
      assert.equal(one.body.description_html, '<p>From the top</p>');
      assert.equal('priority' in one.body, false);
      assert.equal('is_project_label' in one.body, false);
      const dup = await t.post(gapi(top), { name: 'org-wide', color: '#000000' });
      assert.equal(dup.status, 409);
      const bad = await t.post(gapi(top), { name: 'x', color: 'not-a-colour' });
      assert.deepEqual(bad.body, { message: { color: ['must be a valid color code'] } });

      const temp = await t.post(gapi(top), { name: 'temp', color: '#000000' }, { token: groupReporter.token });
      const upd = await t.put(gapi(top, '/temp'), { new_name: 'temp2', description: 'changed' }, { token: groupReporter.token });
      assert.equal(upd.status, 200);
      assertOne(GroupLabelSchema, upd, 'updated group label');
      assert.equal(upd.body.name, 'temp2');
      assert.deepEqual((await t.put(gapi(top, '/temp2'), {})).body, { error: 'new_name, color, description are missing, at least one parameter must be provided' });
      const legacy = await t.put(gapi(top), { name: 'temp2', color: 'black' });
      assert.equal(legacy.body.color, '#000000');
      assert.equal((await t.delete(gapi(top, `/${temp.body.id}`), { token: groupGuest.token })).status, 403);
      assert.equal((await t.delete(gapi(top, `/${temp.body.id}`), { token: groupReporter.token })).status, 204);
      assert.equal((await t.get(gapi(top, `/${temp.body.id}`))).status, 404);
      const legacyDelete = await t.post(gapi(top), { name: 'temp3', color: '#000000' });
      assert.equal((await t.delete(gapi(top), { query: { name: 'temp3' } })).status, 204);
      assert.equal((await t.get(gapi(top, `/${legacyDelete.body.id}`))).status, 404);
    });

    it('shows ancestor group labels in projects and subgroups', async () => {
      const list = await t.get(api(project), { token: guest.token, query: { per_page: 100 } });
      assertEach(ProjectLabelSchema, list, 'project labels with group labels');
      const names = list.body.map((l: any) => l.name);
      assert.ok(names.includes('org-wide') && names.includes('team') && names.includes('bug'), names.join(','));
      const orgWide = list.body.find((l: any) => l.name === 'org-wide');
      assert.equal(orgWide.is_project_label, false);
      assert.equal(orgWide.priority, null);
      const sorted = [...names].sort((a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0));
      assert.deepEqual(names, sorted, 'ordered by title');

      // Without ancestors: the project's own labels and its own group's.
      const near = await t.get(api(project), { query: { include_ancestor_groups: false, per_page: 100 } });
      const nearNames = near.body.map((l: any) => l.name);
      assert.ok(nearNames.includes('team') && !nearNames.includes('org-wide'));
      assert.equal((await t.get(api(project, '/org-wide'), { query: { include_ancestor_groups: false } })).status, 404);
      assert.equal((await t.get(api(project, '/org-wide'))).body.id, topLabel.id);

      const subList = await t.get(gapi(sub), { query: { per_page: 100 } });
      assert.deepEqual(subList.body.map((l: any) => l.name).filter((n: string) => ['org-wide', 'team'].includes(n)), ['org-wide', 'team']);
      const subOnly = await t.get(gapi(sub), { query: { include_ancestor_groups: 'false' } });
      assert.deepEqual(subOnly.body.map((l: any) => l.name), ['team']);

      // A project title that an ancestor group already uses is taken.
      const clash = await t.post(api(project), { name: 'org-wide', color: '#000000' });
      assert.equal(clash.status, 409);
    });

    it('lists descendant groups’ and projects’ labels on request', async () => {
      const plain = await t.get(gapi(top), { query: { per_page: 100 } });
      assert.ok(!plain.body.some((l: any) => l.name === 'team' || l.name === 'sibling-only'));
      const withSubgroups = await t.get(gapi(top), { query: { include_descendant_groups: true, per_page: 100 } });
      assert.ok(withSubgroups.body.some((l: any) => l.name === 'team'));
      assert.ok(!withSubgroups.body.some((l: any) => l.name === 'sibling-only'));
      const withProjects = await t.get(gapi(top), { query: { only_group_labels: false, per_page: 100 } });
      assertEach(GroupLabelSchema, withProjects, 'group labels with project labels');
      assert.ok(withProjects.body.some((l: any) => l.name === 'sibling-only'));
      assert.ok(!withProjects.body.some((l: any) => l.name === 'bug'), 'projects of subgroups only with include_descendant_groups');
      const everything = await t.get(gapi(top), { query: { only_group_labels: false, include_descendant_groups: true, per_page: 100 } });
      assert.ok(everything.body.some((l: any) => l.name === 'bug'));
    });

    it('prioritizes a group label per project; only its group changes or deletes it', async () => {
      const prio = await t.put(api(project, '/team'), { priority: 5 }, { token: reporter.token });
      assert.equal(prio.status, 200, JSON.stringify(prio.body));
      assert.equal(prio.body.priority, 5);
      assert.equal(prio.body.is_project_label, false);
      assert.equal((await t.get(api(project, '/team'), { token: guest.token })).body.priority, 5);
      const other = await t.createProject({ group: sub });
      assert.equal((await t.get(api(other, '/team'))).body.priority, null, 'priorities are per project');
      // As in GitLab, changes through a project reach its own group's labels, not those further up.
      assert.equal((await t.put(api(project, '/org-wide'), { priority: 1 })).status, 404);
      // The project's reporter is no member of the group: the label itself is not theirs to change.
      assert.equal((await t.put(api(project, '/team'), { color: '#000000' }, { token: reporter.token })).status, 403);
      assert.equal((await t.delete(api(project, '/team'), { token: reporter.token })).status, 403);
      const byGroupReporter = await t.put(api(sibling, '/org-wide'), { description: 'edited from a project' }, { token: groupReporter.token });
      assert.equal(byGroupReporter.status, 200);
      assert.equal(byGroupReporter.body.description, 'edited from a project');
    });

    it('promotes a project label to its group, merging same-titled labels of the group’s projects', async () => {
      const here = (await t.post(api(sibling), { name: 'shared', color: '#0000ff' })).body;
      const cousin = await t.createProject({ group: sub });
      const there = (await t.post(api(cousin), { name: 'shared', color: '#ff0000' })).body;
      const i1 = await issue(sibling);
      const i2 = await issue(cousin);
      await link(here.id, 'Issue', i1.id);
      await link(there.id, 'Issue', i2.id);
      await t.put(api(cousin, '/shared'), { priority: 2 });

      assert.equal((await t.put(api(sibling, '/shared/promote'), {}, { token: reporter.token })).status, 404, 'not a member of sibling');
      // Project label managers who manage no label of the group may not promote into it.
      await t.post(api(project), { name: 'project-only', color: '#000000' });
      assert.equal((await t.put(api(project, '/project-only/promote'), {}, { token: maintainer.token })).status, 403);
      const res = await t.put(api(sibling, '/shared/promote'), {}, { token: groupReporter.token });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assertOne(GroupLabelSchema, res, 'promoted label');
      assert.equal(res.body.id, here.id);
      const promoted = await t.get(gapi(top, `/${here.id}`));
      assert.equal(promoted.body.name, 'shared');
      assert.equal((await t.get(api(cousin, `/${there.id}`))).status, 404, 'the merged label is gone');
      const fromCousin = await t.get(api(cousin, '/shared'));
      assert.equal(fromCousin.body.id, here.id);
      assert.equal(fromCousin.body.is_project_label, false);
      assert.equal(fromCousin.body.priority, 2, 'the priority moved over');
      const links = await t.db.selectFrom('label_links').select(['label_id', 'target_id']).where('target_id', 'in', [i1.id, i2.id]).where('target_type', '=', 'Issue').execute();
      assert.deepEqual(links.map((l) => l.label_id), [here.id, here.id]);

      const personalLabel = await t.post(api(personal), { name: 'mine', color: '#000000' });
      assert.equal(personalLabel.status, 201);
      const noGroup = await t.put(api(personal, '/mine/promote'), {});
      assert.equal(noGroup.status, 400);
      assert.deepEqual(noGroup.body, { message: 'Failed to promote project label to group label' });
    });

    it('subscribes to group labels', async () => {
      const res = await t.post(gapi(top, '/org-wide/subscribe'), {}, { token: groupGuest.token });
      assert.equal(res.status, 201);
      assert.equal(res.body.subscribed, true);
      assert.equal((await t.get(gapi(top, '/org-wide'), { token: groupGuest.token })).body.subscribed, true);
      assert.equal((await t.post(gapi(top, '/org-wide/unsubscribe'), {}, { token: groupGuest.token })).status, 201);
      assert.equal((await t.post(gapi(top, '/org-wide/unsubscribe'), {}, { token: groupGuest.token })).status, 304);
    });
  });

  describe('setLabels and label events (service level; issues have no API yet)', () => {
    it('sets, adds and removes labels by title, creating unknown ones, and records each change', async () => {
      const p = await t.createProject({ group: sub });
      await t.post(api(p), { name: 'existing', color: '#000000' });
      const i = await issue(p);
      const target = { targetType: 'Issue' as const, targetId: i.id, projectId: p.id, userId: developer.user.id };

      const first = await setLabels(t.db, target, { labels: 'existing, org-wide,brand-new, existing' });
      assert.deepEqual(first.labels.map((l) => l.title), ['brand-new', 'existing', 'org-wide']);
      assert.deepEqual(first.added.map((l) => l.title), ['brand-new', 'existing', 'org-wide']);
      assert.equal(first.removed.length, 0);
      const created = first.labels.find((l) => l.title === 'brand-new')!;
      assert.equal(created.project_id, p.id);
      assert.equal(created.color, '#6699cc');
      assert.equal(first.labels.find((l) => l.title === 'org-wide')!.group_id, top.id, 'the ancestor group label is used, not copied');

      const second = await setLabels(t.db, target, { add_labels: ['team'], remove_labels: ['existing', 'never-heard-of'] });
      assert.deepEqual(second.labels.map((l) => l.title), ['brand-new', 'org-wide', 'team']);
      assert.deepEqual(second.added.map((l) => l.title), ['team']);
      assert.deepEqual(second.removed.map((l) => l.title), ['existing']);
      assert.equal((await t.db.selectFrom('labels').select('id').where('title', '=', 'never-heard-of').execute()).length, 0);

      const same = await setLabels(t.db, target, { labels: ['team', 'org-wide', 'brand-new'] });
      assert.equal(same.added.length + same.removed.length, 0, 'no change, no event');

      const guarded = await setLabels(t.db, { ...target, createMissing: false }, { labels: ['team', 'not-allowed-to-create'] });
      assert.deepEqual(guarded.labels.map((l) => l.title), ['team']);
      assert.equal((await t.db.selectFrom('labels').select('id').where('title', '=', 'not-allowed-to-create').execute()).length, 0);

      // Label changes are their own records, not notes.
      const notes = await t.db.selectFrom('notes').select('id').where('noteable_type', '=', 'Issue').where('noteable_id', '=', i.id).execute();
      assert.equal(notes.length, 0);

      const { rows, total } = await labelEventsOf(t.db, 'Issue', i.id);
      assert.equal(total, 7);
      const actions = rows.map((r) => `${r.event.action} ${r.label?.title}`);
      assert.deepEqual(actions.slice(0, 3).sort(), ['add brand-new', 'add existing', 'add org-wide']);
      assert.deepEqual(actions.slice(3, 5).sort(), ['add team', 'remove existing']);
      assert.deepEqual(actions.slice(5).sort(), ['remove brand-new', 'remove org-wide']);

      const ctx = { baseUrl: t.config.externalUrl };
      for (const row of rows) assertMatches(ResourceLabelEventSchema, JSON.parse(JSON.stringify(presentResourceLabelEvent(ctx, row))), 'label event');
      const shown = presentResourceLabelEvent(ctx, rows[0]);
      assert.equal(shown.resource_type, 'Issue');
      assert.equal(shown.resource_id, i.id);
      assert.equal(shown.user?.username, developer.user.username);
      assert.deepEqual(Object.keys(shown.label!).sort(), ['color', 'description', 'description_html', 'id', 'name', 'text_color']);

      // A deleted label leaves its events, without a label.
      await t.delete(api(p, '/brand-new'));
      const after = await labelEventsOf(t.db, 'Issue', i.id, { limit: 2, offset: 0 });
      assert.equal(after.total, 7);
      assert.equal(after.rows.length, 2);
      const all = await labelEventsOf(t.db, 'Issue', i.id);
      assert.ok(all.rows.some((r) => r.label === null));
      for (const row of all.rows) assertMatches(ResourceLabelEventSchema, JSON.parse(JSON.stringify(presentResourceLabelEvent(ctx, row))), 'label event');
    });

    it('works on merge requests and inside the caller’s transaction', async () => {
      const p = await t.createProject({ group: sub });
      const mr = await mergeRequest(p);
      const result = await t.db.transaction().execute((trx) =>
        setLabels(trx, { targetType: 'MergeRequest', targetId: mr.id, projectId: p.id, userId: null }, { add_labels: 'team,review me' }),
      );
      assert.deepEqual(result.labels.map((l) => l.title), ['review me', 'team']);
      const events = await labelEventsOf(t.db, 'MergeRequest', mr.id);
      assert.equal(events.total, 2);
      assert.ok(events.rows.every((r) => r.user === null && r.event.target_type === 'MergeRequest'));
      const counted = await t.get(api(p), { query: { with_counts: true, search: 'team' } });
      assert.equal(counted.body[0].open_merge_requests_count, 1);
    });
  });
});
