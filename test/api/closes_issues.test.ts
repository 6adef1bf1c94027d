import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { drainJobs } from '../../src/jobs/queue.js';
import { closingReferences } from '../../src/lib/closing_pattern.js';
import { IssueBasicSchema } from '../../src/presenters/schemas/issues.js';
import { MergeRequestSchema } from '../../src/presenters/schemas/merge_requests.js';
import { closeIssuesOfMergedRequest } from '../../src/services/closing_issues.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach } from '../helpers/contract.js';

describe('closing pattern', () => {
  const base = 'http://cairn.test';
  const refs = (text: string) => closingReferences(text, base).map((r) => `${r.projectPath ?? ''}#${r.iid}`);

  it('finds the issues GitLab would close, and only those', () => {
    assert.deepEqual(refs('Closes #1, #2 and #3'), ['#1', '#2', '#3']);
    assert.deepEqual(refs('fixes group/project#2'), ['group/project#2']);
    assert.deepEqual(refs('Resolves http://cairn.test/g/sub/p/-/issues/3 and http://elsewhere/x/y/-/issues/4'), ['g/sub/p#3']);
    assert.deepEqual(refs('Resolves http://cairn.test/g/p/issues/5'), ['g/p#5']);
    assert.deepEqual(refs('Awesome (Fix #20, Fixes #21 and Closes #22). Related to #17 and fixes #18, #19 and #23'), ['#20', '#21', '#22', '#18', '#19', '#23']);
    assert.deepEqual(refs('Closed: issue #5\nimplementing issues #6. see #7'), ['#5', '#6']);
    assert.deepEqual(refs('CLOSES #5, FIXES #6, fIxes #7'), [], "GitLab's pattern: only the first letter may be a capital");
    for (const word of ['close', 'closes', 'closed', 'closing', 'fix', 'fixes', 'fixed', 'fixing', 'resolve', 'resolves', 'resolved', 'resolving', 'implement', 'implements', 'implemented', 'implementing']) {
      assert.deepEqual(refs(`${word} #9`), ['#9'], word);
      assert.deepEqual(refs(`${word[0].toUpperCase()}${word.slice(1)} #9`), ['#9'], word);
    }
    assert.deepEqual(refs('disclose #4, prefix#1, closes nothing, Fixes: #8 #8'), ['#8']);
    assert.deepEqual(refs(''), []);
    assert.deepEqual(refs('closes #99999999999'), []);
  });
});

describe('merge requests: closes_issues and closing on merge', () => {
  let t: TestContext;
  let group: Namespace;
  let project: Project, other: Project, secret: Project;
  let dev: TestUser, guest: TestUser, outsider: TestUser, admin: TestUser;
  let base: string;
  let seq = 0;

  const write = async (branch: string, file: string, message: string, startBranch?: string) => {
    const res = await t.post(`${base}/repository/commits`, {
      branch, commit_message: message, actions: [{ action: 'create', file_path: `${file}-${++seq}.txt`, content: 'x\n' }], ...(startBranch ? { start_branch: startBranch } : {}),
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
  };
  const issue = async (p: Project, title: string) => {
    const res = await t.post(`/api/v4/projects/${p.id}/issues`, { title });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  };
  const state = async (p: Project, iid: number) => (await t.get(`/api/v4/projects/${p.id}/issues/${iid}`)).body;

  before(async () => {
    // Developers merge into main here: no default branch protection.
    t = await createTestContext({ defaultBranchProtection: 0 });
    [dev, guest, outsider, admin] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    await t.db.updateTable('users').set({ admin: true }).where('id', '=', admin.user.id).execute();
    group = await t.createGroup({ path: t.unique('grp') });
    project = await t.createProject({ group });
    other = await t.createProject({ group });
    secret = await t.createProject({ group: await t.createGroup({ path: t.unique('hidden') }) });
    await t.addMember(project, dev.user, 30);
    await t.addMember(project, guest.user, 10);
    await t.addMember(other, dev.user, 10);
    base = `/api/v4/projects/${project.id}`;
    await write('main', 'readme', 'initial');
  });
  after(async () => { await t.close(); });

  it('lists the issues a merge request would close that the caller may read, and closes them on merge', async () => {
    const [i1, i2, i3, i4] = [await issue(project, 'one'), await issue(project, 'two'), await issue(project, 'three'), await issue(project, 'four')];
    const o1 = await issue(other, 'other one');
    const o2 = await issue(other, 'other two');
    const s1 = await issue(secret, 'secret one');
    const secretUrl = `${t.config.externalUrl}/${(await t.get(`/api/v4/projects/${secret.id}`)).body.path_with_namespace}/-/issues/${s1.iid}`;
    await write('feature', 'f', `Add feature\n\nImplementing #${i3.iid}`, 'main');
    const mr = await t.post(`${base}/merge_requests`, {
      source_branch: 'feature', target_branch: 'main', title: 'Feature',
      description: `Closes #${i1.iid}, #${i2.iid} and fixes ${group.full_path}/${other.path}#${o1.iid}, ${other.path}#${o2.iid}. Related to #${i4.iid}. Resolves ${secretUrl}. Closes #424242`,
    }, { token: dev.token });
    assert.equal(mr.status, 201, JSON.stringify(mr.body));
    const url = `${base}/merge_requests/${mr.body.iid}/closes_issues`;

    const forDev = await t.get(url, { token: dev.token });
    assertEach(IssueBasicSchema, forDev, 'closes_issues');
    assert.deepEqual(forDev.body.map((i: any) => i.id), [i1.id, i2.id, o1.id, o2.id, i3.id]);
    assert.equal(forDev.headers['x-total'], '5');
    assert.equal(forDev.body[2].references.relative, `${other.path}#${o1.iid}`);
    const forAdmin = await t.get(url, { token: admin.token });
    assert.deepEqual(forAdmin.body.map((i: any) => i.id), [i1.id, i2.id, o1.id, o2.id, s1.id, i3.id]);
    const paged = await t.get(url, { token: dev.token, query: { per_page: 2, page: 2 } });
    assert.deepEqual(paged.body.map((i: any) => i.id), [o1.id, o2.id]);
    assert.equal((await t.get(url, { token: null })).status, 401);
    assert.equal((await t.get(url, { token: outsider.token })).status, 404);
    assert.equal((await t.get(url, { token: guest.token })).status, 403, 'a guest of a private project reads no merge requests');
    assert.equal((await t.get(`${base}/merge_requests/9999/closes_issues`, { token: dev.token })).status, 404);
    assert.equal((await t.get(`${base}/issues/${i1.iid}`)).body.merge_requests_count, 1);
    const closedBy = await t.get(`${base}/issues/${i1.iid}/closed_by`, { token: dev.token });
    assertEach(MergeRequestSchema, closedBy, 'closed_by');
    assert.deepEqual(closedBy.body.map((m: any) => m.iid), [mr.body.iid]);
    assert.deepEqual((await t.get(`${base}/issues/${i1.iid}/closed_by`, { token: guest.token })).body, [], 'a guest may not read the merge request');

    // Merging closes them, in the queue, as the user who merged, where that user may update them.
    const merged = await t.put(`${base}/merge_requests/${mr.body.iid}/merge`, {}, { token: dev.token });
    assert.equal(merged.status, 200, JSON.stringify(merged.body));
    assert.equal((await state(project, i1.iid)).state, 'opened', 'closing waits for the queue');
    await drainJobs(t.app.cairn);
    for (const i of [i1, i2, i3]) {
      const now = await state(project, i.iid);
      assert.equal(now.state, 'closed', `#${i.iid}`);
      assert.equal(now.closed_by.id, dev.user.id);
    }
    assert.equal((await state(project, i4.iid)).state, 'opened', 'only mentioned, not closed');
    assert.equal((await state(other, o1.iid)).state, 'opened', 'a guest of the other project may not close its issues');
    assert.equal((await state(secret, s1.iid)).state, 'opened', 'the merge user cannot see it');
    const notes = await t.get(`${base}/issues/${i1.iid}/notes`);
    assert.deepEqual(notes.body.map((n: any) => [n.body, n.system]), [[`closed via merge request !${mr.body.iid}`, true]]);

    // Closing again (a retried job) changes nothing.
    await closeIssuesOfMergedRequest(t.app.cairn, mr.body.id, dev.user.id);
    assert.equal((await t.get(`${base}/issues/${i1.iid}/notes`)).body.length, 1);
  });

  it('closes issues of another project as the merge user may, and only on the default branch', async () => {
    await t.db.updateTable('members').set({ access_level: 20 }).where('source_type', '=', 'Project').where('source_id', '=', other.id).where('user_id', '=', dev.user.id).execute();
    const o = await issue(other, 'cross');
    const local = await issue(project, 'local');
    await write('side', 'side', 'side', 'main');
    await write('feature2', 'f2', 'second', 'main');
    const side = await t.post(`${base}/merge_requests`, { source_branch: 'feature2', target_branch: 'side', title: 'Not default', description: `Closes #${local.iid}` }, { token: dev.token });
    assert.equal(side.status, 201);
    assert.equal((await t.put(`${base}/merge_requests/${side.body.iid}/merge`, {}, { token: dev.token })).status, 200);
    await drainJobs(t.app.cairn);
    assert.equal((await state(project, local.iid)).state, 'opened', 'a merge into another branch closes nothing');

    await write('feature3', 'f3', 'third', 'main');
    const cross = await t.post(`${base}/merge_requests`, { source_branch: 'feature3', target_branch: 'main', title: 'Cross', description: `Fixes ${group.full_path}/${other.path}#${o.iid}` }, { token: dev.token });
    assert.equal((await state(other, o.iid)).merge_requests_count, 1, 'recorded when the merge request was opened');
    const edited = await t.put(`${base}/merge_requests/${cross.body.iid}`, { description: 'nothing to close' }, { token: dev.token });
    assert.equal(edited.status, 200);
    assert.equal((await state(other, o.iid)).merge_requests_count, 0, 'and when its description changed');
    await t.put(`${base}/merge_requests/${cross.body.iid}`, { description: `Fixes ${group.full_path}/${other.path}#${o.iid}` }, { token: dev.token });
    assert.equal((await t.put(`${base}/merge_requests/${cross.body.iid}/merge`, {}, { token: dev.token })).status, 200);
    await drainJobs(t.app.cairn);
    const now = await state(other, o.iid);
    assert.equal(now.state, 'closed');
    const notes = await t.get(`/api/v4/projects/${other.id}/issues/${o.iid}/notes`);
    assert.equal(notes.body[0].body, `closed via merge request ${group.full_path}/${project.path}!${cross.body.iid}`);
  });
});
