import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { ProjectSchema, ProjectWithAccessSchema } from '../../src/presenters/schemas/projects.js';
import { MergeRequestSingleSchema } from '../../src/presenters/schemas/merge_requests.js';
import { projectRepoPath } from '../../src/services/projects.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('forks: fork, list, link, unlink, merge requests from a fork', () => {
  let t: TestContext;
  let guest: TestUser, reporter: TestUser, dev: TestUser, maintainer: TestUser, outsider: TestUser, other: TestUser;
  let group: Namespace, closedGroup: Namespace;
  let upstream: Project;
  let up: string;
  let mainSha: string;

  const api = (path: string) => `/api/v4${path}`;
  const commit = (projectId: number, branch: string, files: Record<string, string>, token?: string, extra: Record<string, unknown> = {}) =>
    t.post(api(`/projects/${projectId}/repository/commits`), {
      branch,
      commit_message: `add ${Object.keys(files).join(',')}`,
      actions: Object.entries(files).map(([file_path, content]) => ({ action: 'create', file_path, content })),
      ...extra,
    }, token ? { token } : undefined);
  const gitDir = async (id: number) => projectRepoPath(t.app.cairn, (await t.db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirstOrThrow()));
  const refs = (dir: string) => execFileSync('git', ['--git-dir', dir, 'for-each-ref', '--format=%(refname) %(objectname)']).toString().trim().split('\n').filter(Boolean);

  before(async () => {
    t = await createTestContext();
    [guest, reporter, dev, maintainer, outsider, other] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    group = await t.createGroup({ visibility: 0 });
    closedGroup = await t.createGroup({ visibility: 0 });
    await t.addMember(closedGroup, dev.user, 20);
    upstream = await t.createProject({ group, visibility: 0 });
    up = api(`/projects/${upstream.id}`);
    await t.addMember(upstream, guest.user, 10);
    await t.addMember(upstream, reporter.user, 20);
    await t.addMember(upstream, dev.user, 30);
    await t.addMember(upstream, maintainer.user, 40);
    assert.equal((await commit(upstream.id, 'main', { 'README.md': 'hello\n' })).status, 201);
    assert.equal((await commit(upstream.id, 'feature', { 'feature.txt': 'f\n' }, undefined, { start_branch: 'main' })).status, 201);
    assert.equal((await t.post(`${up}/repository/tags`, { tag_name: 'v1', ref: 'main' })).status, 201);
    mainSha = (await t.get(`${up}/repository/branches/main`)).body.commit.id;
  });
  after(async () => { await t.close(); });

  let fork: any;

  it('forks into the caller\'s namespace: 201, a real copy of branches and tags, forked_from_project, forks_count', async () => {
    const res = await t.post(`${up}/fork`, {}, { token: reporter.token });
    assertOne(ProjectSchema, res, 'POST fork'); assert.equal(res.status, 201);
    fork = res.body;
    assert.equal(fork.namespace.path, reporter.user.username);
    assert.equal(fork.path, upstream.path);
    assert.equal(fork.name, upstream.name);
    assert.equal(fork.visibility, 'private');
    assert.equal(fork.default_branch, 'main');
    assert.equal(fork.empty_repo, false);
    assert.equal(fork.import_status, 'finished');
    assert.equal(fork.forked_from_project.id, upstream.id);
    assert.equal(fork.forked_from_project.path_with_namespace, `${group.full_path}/${upstream.path}`);
    const branches = await t.get(api(`/projects/${fork.id}/repository/branches`), { token: reporter.token });
    assert.deepEqual(branches.body.map((b: any) => b.name).sort(), ['feature', 'main']);
    assert.equal(branches.body.find((b: any) => b.name === 'main').commit.id, mainSha);
    const tags = await t.get(api(`/projects/${fork.id}/repository/tags`), { token: reporter.token });
    assert.deepEqual(tags.body.map((x: any) => x.name), ['v1']);
    // The fork's repository names nothing of the source and borrows no objects from it.
    const dir = await gitDir(fork.id);
    assert.ok(!fs.existsSync(`${dir}/objects/info/alternates`));
    assert.ok(!fs.readFileSync(`${dir}/config`, 'utf8').includes('origin'));
    const upstreamRead = await t.get(up, { token: reporter.token });
    assert.equal(upstreamRead.body.forks_count, 1);
    const forkRead = await t.get(api(`/projects/${fork.id}`), { token: reporter.token });
    assertOne(ProjectWithAccessSchema, forkRead, 'GET fork');
    assert.equal(forkRead.body.forked_from_project.id, upstream.id);
    assert.equal(forkRead.body.permissions.project_access.access_level, 50);
  });

  it('refuses a taken name or path (409), anonymous (401), invisible sources (404), no fork right (403), bad namespaces (404), bad input (400)', async () => {
    const again = await t.post(`${up}/fork`, {}, { token: reporter.token });
    assert.equal(again.status, 409);
    assert.deepEqual(again.body, { message: { name: ['has already been taken'], path: ['has already been taken'] } });
    const samePath = await t.post(`${up}/fork`, { name: 'Other name' }, { token: reporter.token });
    assert.equal(samePath.status, 409);
    assert.deepEqual(samePath.body.message, { path: ['has already been taken'] });
    const badPath = await t.post(`${up}/fork`, { path: 'bad path!', name: 'x' }, { token: reporter.token });
    assert.equal(badPath.status, 409);
    assert.ok(badPath.body.message.path);
    assert.equal((await t.post(`${up}/fork`, {}, { token: null })).status, 401);
    assert.equal((await t.post(`${up}/fork`, {}, { token: outsider.token })).status, 404);
    // A guest of a private project cannot read its code, so cannot fork it.
    assert.equal((await t.post(`${up}/fork`, {}, { token: guest.token })).status, 403);
    // Into a group where the caller is only a reporter, or one they cannot see.
    const noCreate = await t.post(`${up}/fork`, { namespace_id: closedGroup.id }, { token: dev.token });
    assert.deepEqual([noCreate.status, noCreate.body], [404, { message: '404 Target Namespace Not Found' }]);
    assert.equal((await t.post(`${up}/fork`, { namespace_path: group.full_path }, { token: dev.token })).status, 404);
    assert.equal((await t.post(`${up}/fork`, { namespace: 'no/such/namespace' }, { token: dev.token })).status, 404);
    assert.equal((await t.post(`${up}/fork`, { visibility: 'secret' }, { token: dev.token })).status, 400);
    assert.equal((await t.post(`${up}/fork`, { branches: 'nope' }, { token: dev.token })).status, 404);
    assert.equal((await t.post(`${up}/fork`, { branches: '-x' }, { token: dev.token })).status, 404);
    assert.equal((await t.post(api('/projects/999999/fork'), {}, { token: dev.token })).status, 404);
  });

  it('forking disabled on the source is a 403 even for its maintainers; a limited user cannot fork into their namespace', async () => {
    const p = await t.createProject({ group, visibility: 20 });
    await t.addMember(p, maintainer.user, 40);
    assert.equal((await t.put(api(`/projects/${p.id}`), { forking_access_level: 'disabled' })).status, 200);
    assert.equal((await t.post(api(`/projects/${p.id}/fork`), {}, { token: maintainer.token })).status, 403);
    assert.equal((await t.put(api(`/projects/${p.id}`), { forking_access_level: 'enabled' })).status, 200);
    const limited = await t.createUser({ projects_limit: 0 });
    const res = await t.post(api(`/projects/${p.id}/fork`), {}, { token: limited.token });
    assert.equal(res.status, 404, 'no project can be created in a namespace with no room');
  });

  it('takes namespace, name, path, description, visibility no wider than the source, one branch, mr_default_target_self', async () => {
    const target = await t.createGroup({ visibility: 20 });
    await t.addMember(target, dev.user, 30);
    const res = await t.post(`${up}/fork`, {
      namespace_id: target.id, name: 'My fork', path: 'my-fork', description: 'forked', visibility: 'public', branches: 'feature', mr_default_target_self: true,
    }, { token: dev.token });
    assertOne(ProjectSchema, res, 'POST fork with options'); assert.equal(res.status, 201);
    assert.equal(res.body.namespace.id, target.id);
    assert.equal(res.body.name, 'My fork');
    assert.equal(res.body.path, 'my-fork');
    assert.equal(res.body.description, 'forked');
    assert.equal(res.body.visibility, 'private', 'never more visible than the source');
    assert.equal(res.body.default_branch, 'feature');
    assert.equal(res.body.mr_default_target_self, true);
    const branches = await t.get(api(`/projects/${res.body.id}/repository/branches`), { token: dev.token });
    assert.deepEqual(branches.body.map((b: any) => b.name), ['feature']);
    assert.deepEqual((await t.get(api(`/projects/${res.body.id}/repository/tags`), { token: dev.token })).body, []);
    // A developer who forks into a group becomes the fork's maintainer.
    const members = await t.get(api(`/projects/${res.body.id}/members`), { token: dev.token });
    assert.equal(members.body.find((m: any) => m.id === dev.user.id)?.access_level, 40);
    // by path, deprecated `namespace`
    const byPath = await t.post(`${up}/fork`, { namespace: target.full_path, path: 'second', name: 'second' }, { token: dev.token });
    assert.equal(byPath.status, 201);
    assert.equal(byPath.body.namespace.id, target.id);
    assert.equal((await t.get(up, { token: dev.token })).body.forks_count, 3);
  });

  it('lists visible direct forks with the project list filters', async () => {
    const asRoot = await t.get(`${up}/forks`);
    assertEach(ProjectWithAccessSchema, asRoot, 'GET forks');
    assert.deepEqual(asRoot.body.map((p: any) => p.id).includes(fork.id), true);
    assert.equal(asRoot.headers['x-total'], '3');
    // The reporter's private fork is not the developer's to see.
    const asDev = await t.get(`${up}/forks`, { token: dev.token });
    assert.ok(!asDev.body.some((p: any) => p.id === fork.id));
    assert.equal(asDev.body.length, 2);
    const searched = await t.get(`${up}/forks`, { query: { search: 'my-fork' } });
    assert.deepEqual(searched.body.map((p: any) => p.path), ['my-fork']);
    const simple = await t.get(`${up}/forks`, { query: { simple: true, per_page: 1 } });
    assert.equal(simple.body.length, 1);
    assert.equal(simple.headers['x-total-pages'], '3');
    assert.equal((await t.get(`${up}/forks`, { token: outsider.token })).status, 404);
    assert.equal((await t.get(`${up}/forks`, { token: null })).status, 404);
    assert.deepEqual((await t.get(api(`/projects/${fork.id}/forks`), { token: reporter.token })).body, []);
  });

  it('hides forked_from_project from callers who cannot read the source', async () => {
    const pub = await t.createProject({ visibility: 20 });
    assert.equal((await commit(pub.id, 'main', { 'a.txt': 'a\n' })).status, 201);
    const res = await t.post(api(`/projects/${pub.id}/fork`), { namespace_id: (await t.createGroup({ visibility: 20, owner: other.user })).id }, { token: other.token });
    assert.equal(res.status, 201);
    assert.equal(res.body.visibility, 'public');
    assert.equal((await t.get(api(`/projects/${res.body.id}`), { token: outsider.token })).body.forked_from_project.id, pub.id);
    assert.equal((await t.put(api(`/projects/${pub.id}`), { visibility: 'private' })).status, 200);
    const hidden = await t.get(api(`/projects/${res.body.id}`), { token: outsider.token });
    assert.equal(hidden.status, 200);
    assert.equal(hidden.body.forked_from_project, undefined);
  });

  let mrIid: number;
  const branchName = 'from-fork';

  it('a merge request from the fork lives in the upstream, with the fork as source_project_id and the head ref fetched', async () => {
    assert.equal((await commit(fork.id, branchName, { 'fork.txt': 'from the fork\n' }, reporter.token, { start_branch: 'main' })).status, 201);
    const res = await t.post(api(`/projects/${fork.id}/merge_requests`), {
      source_branch: branchName, target_branch: 'main', title: 'From a fork', target_project_id: upstream.id,
    }, { token: reporter.token });
    assertOne(MergeRequestSingleSchema, res, 'POST fork merge request'); assert.equal(res.status, 201);
    mrIid = res.body.iid;
    assert.equal(res.body.project_id, upstream.id);
    assert.equal(res.body.target_project_id, upstream.id);
    assert.equal(res.body.source_project_id, fork.id);
    assert.equal(res.body.merge_status, 'can_be_merged');
    assert.equal(res.body.changes_count, '1');
    const head = (await t.get(api(`/projects/${fork.id}/repository/branches/${branchName}`), { token: reporter.token })).body.commit.id;
    assert.equal(res.body.sha, head);
    assert.ok(refs(await gitDir(upstream.id)).includes(`refs/merge-requests/${mrIid}/head ${head}`));
    const list = await t.get(`${up}/merge_requests`, { token: dev.token });
    assert.deepEqual(list.body.map((m: any) => [m.iid, m.source_project_id]), [[mrIid, fork.id]]);
    assert.deepEqual((await t.get(api(`/projects/${fork.id}/merge_requests`), { token: reporter.token })).body, []);
    const commits = await t.get(`${up}/merge_requests/${mrIid}/commits`, { token: dev.token });
    assert.deepEqual(commits.body.map((c: any) => c.id), [head]);
    const changes = await t.get(`${up}/merge_requests/${mrIid}/changes`, { token: dev.token });
    assert.deepEqual(changes.body.changes.map((c: any) => c.new_path), ['fork.txt']);
    const diffs = await t.get(`${up}/merge_requests/${mrIid}/diffs`, { token: dev.token });
    assert.deepEqual(diffs.body.map((c: any) => c.new_path), ['fork.txt']);
  });

  it('a push to the fork refreshes the merge request in the upstream', async () => {
    const res = await commit(fork.id, branchName, { 'second.txt': 'second\n' }, reporter.token);
    assert.equal(res.status, 201);
    const mr = await t.get(`${up}/merge_requests/${mrIid}`, { token: dev.token });
    assert.equal(mr.body.sha, res.body.id);
    assert.equal(mr.body.diff_refs.head_sha, res.body.id);
    assert.equal((await t.get(`${up}/merge_requests/${mrIid}/commits`, { token: dev.token })).body.length, 2);
    assert.ok(refs(await gitDir(upstream.id)).includes(`refs/merge-requests/${mrIid}/head ${res.body.id}`));
  });

  it('refuses a target outside the fork network (422) or invisible (404), and a source the caller cannot push to (403)', async () => {
    const stranger = await t.createProject({ visibility: 20 });
    assert.equal((await commit(stranger.id, 'main', { 'x.txt': 'x\n' })).status, 201);
    const res = await t.post(api(`/projects/${fork.id}/merge_requests`), {
      source_branch: branchName, target_branch: 'main', title: 'Elsewhere', target_project_id: stranger.id,
    }, { token: reporter.token });
    assert.deepEqual([res.status, res.body], [422, { message: ['Source project is not a fork of the target project'] }]);
    const hidden = await t.createProject({ visibility: 0 });
    assert.equal((await t.post(api(`/projects/${fork.id}/merge_requests`), {
      source_branch: branchName, target_branch: 'main', title: 'Hidden', target_project_id: hidden.id,
    }, { token: reporter.token })).status, 404);
    assert.equal((await t.post(api(`/projects/${fork.id}/merge_requests`), {
      source_branch: branchName, target_branch: 'main', title: 'Not mine', target_project_id: upstream.id,
    }, { token: maintainer.token })).status, 404, 'the private fork is not the maintainer\'s to see');
  });

  it('compare reads across the fork network only', async () => {
    const res = await t.get(`${up}/repository/compare`, { query: { from: branchName, to: 'main', from_project_id: fork.id, straight: true }, token: reporter.token });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.diffs.map((d: any) => d.old_path).sort(), ['fork.txt', 'second.txt']);
    // from_project_id names where `from` is read; `to` is read in the project of the path.
    const across = await t.get(api(`/projects/${fork.id}/repository/compare`), { query: { from: 'main', to: branchName, from_project_id: upstream.id }, token: reporter.token });
    assert.equal(across.status, 200);
    assert.deepEqual(across.body.diffs.map((d: any) => d.new_path).sort(), ['fork.txt', 'second.txt']);
    const stranger = await t.createProject({ visibility: 20 });
    const no = await t.get(`${up}/repository/compare`, { query: { from: 'main', to: 'main', from_project_id: stranger.id } });
    assert.deepEqual([no.status, no.body], [400, { message: `Target project id:${stranger.id} is not a fork of project id:${upstream.id}` }]);
  });

  it('merging the fork\'s merge request puts its commits on the upstream branch', async () => {
    const head = (await t.get(`${up}/merge_requests/${mrIid}`, { token: dev.token })).body.sha;
    assert.equal((await t.put(`${up}/merge_requests/${mrIid}/merge`, {}, { token: reporter.token })).status, 401, 'reporters cannot merge (the spec\'s 401)');
    const res = await t.put(`${up}/merge_requests/${mrIid}/merge`, { sha: head }, { token: maintainer.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.state, 'merged');
    const main = (await t.get(`${up}/repository/branches/main`, { token: dev.token })).body.commit;
    assert.deepEqual(main.parent_ids, [mainSha, head]);
    const file = await t.get(`${up}/repository/files/fork.txt/raw`, { query: { ref: 'main' }, token: dev.token });
    assert.equal(file.text, 'from the fork\n');
  });

  it('links an existing project as a fork (owner or admin; 409 when already a fork) and unlinks it (204, then 304)', async () => {
    const mine = await t.createProject({ owner: other.user });
    const linkUrl = api(`/projects/${mine.id}/fork/${upstream.id}`);
    assert.equal((await t.post(linkUrl, {}, { token: null })).status, 401);
    assert.equal((await t.post(linkUrl, {}, { token: other.token })).status, 404, 'other cannot see the upstream');
    await t.addMember(upstream, other.user, 10);
    assert.equal((await t.post(linkUrl, {}, { token: other.token })).status, 403, 'a guest may not fork it');
    await t.db.updateTable('members').set({ access_level: 20 }).where('user_id', '=', other.user.id).where('source_id', '=', upstream.id).where('source_type', '=', 'Project').execute();
    await t.addMember(mine, dev.user, 40);
    assert.equal((await t.post(linkUrl, {}, { token: dev.token })).status, 403, 'a maintainer of the project is not its owner');
    const res = await t.post(linkUrl, {}, { token: other.token });
    assertOne(ProjectSchema, res, 'POST link fork'); assert.equal(res.status, 201);
    assert.equal(res.body.forked_from_project.id, upstream.id);
    const again = await t.post(linkUrl, {}, { token: other.token });
    assert.deepEqual([again.status, again.body], [409, { message: 'Project already forked' }]);
    assert.equal((await t.post(api(`/projects/${upstream.id}/fork/${upstream.id}`), {})).status, 400);
    assert.equal((await t.post(api(`/projects/${mine.id}/fork/999999`), {})).status, 404);

    const unlink = api(`/projects/${mine.id}/fork`);
    assert.equal((await t.delete(unlink, { token: dev.token })).status, 403);
    assert.equal((await t.delete(unlink, { token: null })).status, 401);
    assert.equal((await t.delete(unlink, { token: other.token })).status, 204);
    assert.equal((await t.delete(unlink, { token: other.token })).status, 304);
    assert.equal((await t.get(api(`/projects/${mine.id}`), { token: other.token })).body.forked_from_project, undefined);
    // Linked again by an administrator.
    assert.equal((await t.post(linkUrl, {})).status, 201);
  });

  it('unlinking closes the merge requests between the fork and its network', async () => {
    assert.equal((await commit(fork.id, 'second-mr', { 'third.txt': '3\n' }, reporter.token, { start_branch: 'main' })).status, 201);
    const mr = await t.post(api(`/projects/${fork.id}/merge_requests`), { source_branch: 'second-mr', target_branch: 'main', title: 'Two', target_project_id: upstream.id }, { token: reporter.token });
    assert.equal(mr.status, 201);
    const scratch = await t.post(`${up}/fork`, { path: 'scratch', name: 'scratch' }, { token: reporter.token });
    assert.equal(scratch.status, 201);
    assert.equal((await commit(scratch.body.id, 'x', { 'x.txt': 'x\n' }, reporter.token, { start_branch: 'main' })).status, 201);
    const open = await t.post(api(`/projects/${scratch.body.id}/merge_requests`), { source_branch: 'x', target_branch: 'main', title: 'X', target_project_id: upstream.id }, { token: reporter.token });
    assert.equal(open.status, 201);
    assert.equal((await t.delete(api(`/projects/${scratch.body.id}/fork`), { token: reporter.token })).status, 204);
    const closed = await t.get(`${up}/merge_requests/${open.body.iid}`, { token: dev.token });
    assert.equal(closed.body.state, 'closed');
    assert.equal(closed.body.closed_by.id, reporter.user.id);
    assert.equal((await t.get(`${up}/merge_requests/${mr.body.iid}`, { token: dev.token })).body.state, 'opened');
  });

  it('deleting the fork closes its open merge requests, which keep their head ref and commits in the upstream', async () => {
    const open = (await t.get(`${up}/merge_requests`, { query: { state: 'opened' }, token: dev.token })).body;
    assert.deepEqual(open.map((m: any) => [m.title, m.source_project_id]), [['Two', fork.id]]);
    const iid = open[0].iid;
    const head = open[0].sha;
    assert.equal((await t.delete(api(`/projects/${fork.id}`), { token: reporter.token })).status, 202);
    const mr = await t.get(`${up}/merge_requests/${iid}`, { token: dev.token });
    assert.equal(mr.body.state, 'closed');
    assert.equal(mr.body.source_project_id, null);
    assert.ok(refs(await gitDir(upstream.id)).includes(`refs/merge-requests/${iid}/head ${head}`));
    const commits = await t.get(`${up}/merge_requests/${iid}/commits`, { token: dev.token });
    assert.deepEqual(commits.body.map((c: any) => c.id)[0], head);
    assert.equal((await t.get(up, { token: dev.token })).body.forks_count, 3, 'the deleted fork no longer counts');
  });

  it('a fork keeps working when its source repository is gone', async () => {
    const src = await t.createProject({ visibility: 20 });
    const written = await commit(src.id, 'main', { 'keep.txt': 'kept\n' });
    const f = await t.post(api(`/projects/${src.id}/fork`), { namespace_id: (await t.createGroup({ owner: other.user })).id }, { token: other.token });
    assert.equal(f.status, 201);
    execFileSync('git', ['--git-dir', await gitDir(src.id), 'gc', '--quiet', '--prune=now']);
    fs.rmSync(await gitDir(src.id), { recursive: true, force: true });
    const file = await t.get(api(`/projects/${f.body.id}/repository/files/keep.txt/raw`), { query: { ref: 'main' }, token: other.token });
    assert.equal(file.text, 'kept\n');
    assert.equal((await t.get(api(`/projects/${f.body.id}/repository/commits/${written.body.id}`), { token: other.token })).status, 200);
    execFileSync('git', ['--git-dir', await gitDir(f.body.id), 'fsck', '--no-progress']);
  });

  it('an empty project forks into an empty fork', async () => {
    const empty = await t.createProject({ visibility: 20 });
    const res = await t.post(api(`/projects/${empty.id}/fork`), { namespace_id: (await t.createGroup({ owner: other.user })).id }, { token: other.token });
    assert.equal(res.status, 201);
    assert.equal(res.body.empty_repo, true);
    assert.equal((await commit(res.body.id, 'main', { 'a.txt': 'a\n' }, other.token)).status, 201);
  });
});
