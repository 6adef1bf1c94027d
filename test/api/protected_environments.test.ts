import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, runJob } from '../helpers/ci.js';

const YAML = `
stages: [build, deploy]
build: { stage: build, script: [make] }
deploy_prod: { stage: deploy, script: [deploy], environment: { name: production } }
deploy_review: { stage: deploy, script: [review], environment: { name: "review/$CI_COMMIT_REF_NAME" } }
deploy_staging: { stage: deploy, script: [stage], environment: staging }
manual_prod: { stage: deploy, script: [deploy], environment: production, when: manual }
`;

describe('protected environments API', () => {
  let t: TestContext;
  let project: Project;
  let publicProject: Project;
  let shared: Namespace;
  let unshared: Namespace;
  let guest: TestUser, reporter: TestUser, developer: TestUser, maintainer: TestUser, outsider: TestUser, deployer: TestUser, teamMember: TestUser;
  const api = (rest = '', p: Project = project) => `/api/v4/projects/${p.id}/protected_environments${rest}`;

  before(async () => {
    t = await createTestContext();
    project = await t.createProject();
    publicProject = await t.createProject({ visibility: 20 });
    [guest, reporter, developer, maintainer, outsider, deployer, teamMember] = await Promise.all(
      Array.from({ length: 7 }, (_, i) => t.createUser({ name: `Person ${i}` })),
    );
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, deployer.user, 30);
    await t.addMember(publicProject, developer.user, 30);
    shared = await t.createGroup({ name: 'Release Team' });
    unshared = await t.createGroup({ name: 'Other Team' });
    await t.addMember(shared, teamMember.user, 30);
    // The project is shared with the release team (developer access for its members).
    await t.db.insertInto('project_group_links').values({ project_id: project.id, group_id: shared.id, group_access: 30, expires_at: null }).execute();
  });
  after(async () => {
    await t?.close();
  });

  it('protects, lists, reads and unprotects environments (names with slashes too)', async () => {
    const created = await t.post(api(), { name: 'production', deploy_access_levels: [{ access_level: 40 }], required_approval_count: 2 }, { token: maintainer.token });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.name, 'production');
    assert.equal(created.body.required_approval_count, 2);
    assert.equal(created.body.deploy_access_levels.length, 1);
    const level = created.body.deploy_access_levels[0];
    assert.equal(level.access_level, 40);
    assert.equal(level.access_level_description, 'Maintainers');
    assert.equal(level.user_id, null);
    assert.equal(level.group_id, null);
    assert.equal(typeof level.id, 'number');

    const slashed = await t.post(api(), { name: 'review/feature-1', deploy_access_levels: [{ access_level: 30 }] }, { token: maintainer.token });
    assert.equal(slashed.status, 201);
    assert.equal(slashed.body.required_approval_count, 0);
    assert.equal(slashed.body.deploy_access_levels[0].access_level_description, 'Developers + Maintainers');

    const one = await t.get(api(`/${encodeURIComponent('review/feature-1')}`), { token: maintainer.token });
    assert.equal(one.status, 200);
    assert.equal(one.body.name, 'review/feature-1');

    const list = await t.get(api(), { token: maintainer.token });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.map((e: any) => e.name), ['production', 'review/feature-1']);
    assert.equal(list.headers['x-total'], '2');
    const paged = await t.get(api(), { token: maintainer.token, query: { per_page: 1, page: 2 } });
    assert.deepEqual(paged.body.map((e: any) => e.name), ['review/feature-1']);

    // Duplicates conflict, as GitLab.
    const dup = await t.post(api(), { name: 'production', deploy_access_levels: [{ access_level: 30 }] }, { token: maintainer.token });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.message, "Protected environment 'production' already exists");

    assert.equal((await t.delete(api(`/${encodeURIComponent('review/feature-1')}`), { token: maintainer.token })).status, 204);
    assert.equal((await t.get(api(`/${encodeURIComponent('review/feature-1')}`), { token: maintainer.token })).status, 404);
    assert.equal((await t.delete(api(`/${encodeURIComponent('review/feature-1')}`), { token: maintainer.token })).status, 404);
    assert.equal((await t.get(api('/nowhere'), { token: maintainer.token })).status, 404);
  });

  it('deploy access levels: users with project access, groups the project is shared with', async () => {
    const res = await t.post(
      api(),
      { name: 'canary', deploy_access_levels: [{ user_id: deployer.user.id }, { group_id: shared.id }, { access_level: 60 }] },
      { token: maintainer.token },
    );
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const [byUser, byGroup, byRole] = res.body.deploy_access_levels;
    assert.equal(byUser.user_id, deployer.user.id);
    assert.equal(byUser.access_level_description, deployer.user.name);
    assert.equal(byGroup.group_id, shared.id);
    assert.equal(byGroup.access_level_description, 'Release Team');
    assert.equal(byRole.access_level, 60);
    assert.equal(byRole.access_level_description, 'Administrators');

    // A user without access to the project, a group the project is not shared with: 422.
    const stranger = await t.post(api(), { name: 'x1', deploy_access_levels: [{ user_id: outsider.user.id }] }, { token: maintainer.token });
    assert.equal(stranger.status, 422);
    assert.match(JSON.stringify(stranger.body.message), /user must have access to the project/);
    const notShared = await t.post(api(), { name: 'x2', deploy_access_levels: [{ group_id: unshared.id }] }, { token: maintainer.token });
    assert.equal(notShared.status, 422);
    assert.match(JSON.stringify(notShared.body.message), /group must have the project shared/);
    const missingUser = await t.post(api(), { name: 'x3', deploy_access_levels: [{ user_id: 99999999 }] }, { token: maintainer.token });
    assert.equal(missingUser.status, 422);
    assert.equal((await t.get(api('/x1'), { token: maintainer.token })).status, 404, 'nothing was stored');
  });

  it('refuses malformed parameters', async () => {
    const post = (body: unknown) => t.post(api(), body, { token: maintainer.token });
    let res = await post({ deploy_access_levels: [{ access_level: 40 }] });
    assert.equal(res.status, 400);
    assert.equal(res.body.error, 'name is missing');
    res = await post({ name: 'a' });
    assert.equal(res.status, 400);
    assert.equal(res.body.error, 'deploy_access_levels is missing');
    res = await post({ name: 'a', deploy_access_levels: [{ access_level: 40, user_id: deployer.user.id }] });
    assert.equal(res.status, 400);
    assert.match(res.body.error, /are mutually exclusive/);
    res = await post({ name: 'a', deploy_access_levels: [{}] });
    assert.equal(res.status, 400);
    assert.match(res.body.error, /exactly one parameter must be provided/);
    res = await post({ name: 'a', deploy_access_levels: [{ access_level: 20 }] });
    assert.equal(res.status, 400);
    assert.equal(res.body.error, 'deploy_access_levels[access_level] does not have a valid value');
    res = await post({ name: 'a', deploy_access_levels: [{ user_id: 'abc' }] });
    assert.equal(res.status, 400);
    res = await post({ name: 'a', deploy_access_levels: 'nope' });
    assert.equal(res.status, 400);
    res = await post({ name: 'a', deploy_access_levels: [{ access_level: 40 }], required_approval_count: 6 });
    assert.equal(res.status, 422);
    res = await post({ name: 'a', deploy_access_levels: [] });
    assert.equal(res.status, 422);
    res = await post({ name: 'bad\u0001name', deploy_access_levels: [{ access_level: 40 }] });
    assert.equal(res.status, 400);
    // Form fields work too (deploy_access_levels[][access_level]).
    res = await t.call('POST', api(), { token: maintainer.token, form: 'name=form-env&deploy_access_levels[][access_level]=30' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.deploy_access_levels[0].access_level, 30);
  });

  it('is for maintainers: permission cases', async () => {
    await t.post(api(), { name: 'perm', deploy_access_levels: [{ access_level: 40 }] }, { token: maintainer.token });
    for (const u of [guest, reporter, developer]) {
      assert.equal((await t.get(api(), { token: u.token })).status, 403);
      assert.equal((await t.get(api('/perm'), { token: u.token })).status, 403);
      assert.equal((await t.post(api(), { name: 'nope', deploy_access_levels: [{ access_level: 40 }] }, { token: u.token })).status, 403);
      assert.equal((await t.delete(api('/perm'), { token: u.token })).status, 403);
    }
    assert.equal((await t.get(api(), { token: outsider.token })).status, 404);
    assert.equal((await t.get(api(), { token: null })).status, 401);
    assert.equal((await t.get(api('', publicProject), { token: null })).status, 401);
    assert.equal((await t.get(api('', publicProject), { token: outsider.token })).status, 403);
    assert.equal((await t.get(api('', publicProject), { token: developer.token })).status, 403);
    // Administrators may (root is one).
    assert.equal((await t.get(api('/perm'))).status, 200);
    assert.equal((await t.delete(api('/perm'))).status, 204);
  });

  describe('deployment jobs', () => {
    let ciProject: Project;
    const jobs = (rest: string) => `/api/v4/projects/${ciProject.id}/jobs${rest}`;

    before(async () => {
      ciProject = await t.createProject();
      for (const [u, level] of [[developer, 30], [maintainer, 40], [deployer, 30], [reporter, 20]] as const) await t.addMember(ciProject, u.user, level);
      await t.db.insertInto('project_group_links').values({ project_id: ciProject.id, group_id: shared.id, group_access: 30, expires_at: null }).execute();
      await commitFiles(t, ciProject, { 'README.md': 'hello\n' });
      const env = (name: string, levels: unknown[]) => t.post(`/api/v4/projects/${ciProject.id}/protected_environments`, { name, deploy_access_levels: levels }, { token: maintainer.token });
      assert.equal((await env('production', [{ access_level: 40 }, { user_id: deployer.user.id }, { group_id: shared.id }])).status, 201);
      assert.equal((await env('review/by-dev', [{ access_level: 40 }])).status, 201);
    });

    /** A pipeline pushed by `user` (root, an administrator, when null), its build job run. */
    async function pipelineBy(user: TestUser | null, branch: string) {
      await commitFiles(t, ciProject, { '.gitlab-ci.yml': YAML }, { branch, startBranch: 'main', token: user?.token });
      const p = await latestPipeline(t, ciProject.id);
      assert.equal(p.ref, branch);
      if (user) assert.equal(p.user_id, user.user.id);
      await runJob(t, (await jobsByName(t, p.id)).build, 'success');
      return jobsByName(t, p.id);
    }

    it('fails deployments to a protected environment for users outside it; nobody runs them', async () => {
      const j = await pipelineBy(developer, 'by-dev');
      assert.equal(j.deploy_prod.status, 'failed');
      assert.equal(j.deploy_prod.failure_reason, 'protected_environment_failure');
      // review/by-dev is protected too (a name with a slash, from an expanded environment name).
      assert.equal(j.deploy_review.environment, 'review/by-dev');
      assert.equal(j.deploy_review.status, 'failed');
      assert.equal(j.deploy_staging.status, 'pending', 'unprotected environments deploy');
      assert.equal(j.manual_prod.status, 'manual');
      const pending = await t.db.selectFrom('ci_pending_builds').select('build_id').where('build_id', 'in', [j.deploy_prod.id, j.deploy_review.id]).execute();
      assert.equal(pending.length, 0);
      const shown = await t.get(jobs(`/${j.deploy_prod.id}`), { token: developer.token });
      assert.equal(shown.body.status, 'failed');
      assert.equal(shown.body.failure_reason, 'protected_environment_failure');

      // Playing or retrying them is refused to the developer; a maintainer may.
      assert.equal((await t.post(jobs(`/${j.manual_prod.id}/play`), {}, { token: developer.token })).status, 403);
      assert.equal((await t.post(jobs(`/${j.deploy_prod.id}/retry`), {}, { token: developer.token })).status, 403);
      assert.equal((await t.post(jobs(`/${j.deploy_staging.id}/cancel`), {}, { token: developer.token })).status, 201);
      assert.equal((await t.post(jobs(`/${j.deploy_staging.id}/retry`), {}, { token: developer.token })).status, 201, 'unprotected jobs retry as before');
      const played = await t.post(jobs(`/${j.manual_prod.id}/play`), {}, { token: maintainer.token });
      assert.equal(played.status, 200);
      assert.equal(played.body.status, 'pending');
      const retried = await t.post(jobs(`/${j.deploy_prod.id}/retry`), {}, { token: maintainer.token });
      assert.equal(retried.status, 201);
      assert.equal(retried.body.status, 'pending');
      // A reporter may not play jobs at all.
      assert.equal((await t.post(jobs(`/${j.manual_prod.id}/play`), {}, { token: reporter.token })).status, 403);
    });

    it('runs them for users a deploy access level admits (user, group, role, admin)', async () => {
      const byUser = await pipelineBy(deployer, 'by-deployer');
      assert.equal(byUser.deploy_prod.status, 'pending');
      assert.equal(byUser.deploy_review.status, 'pending', 'review/by-deployer is not protected');
      assert.equal((await t.post(jobs(`/${byUser.manual_prod.id}/play`), {}, { token: deployer.token })).status, 200);

      const byGroup = await pipelineBy(teamMember, 'by-team');
      assert.equal(byGroup.deploy_prod.status, 'pending');

      const byMaintainer = await pipelineBy(maintainer, 'by-maintainer');
      assert.equal(byMaintainer.deploy_prod.status, 'pending');

      // Administrators always deploy, even where only administrators are admitted.
      assert.equal((await t.post(`/api/v4/projects/${ciProject.id}/protected_environments`, { name: 'review/by-admin', deploy_access_levels: [{ access_level: 60 }] }, { token: maintainer.token })).status, 201);
      const byAdmin = await pipelineBy(null, 'by-admin');
      assert.equal(byAdmin.deploy_review.environment, 'review/by-admin');
      assert.equal(byAdmin.deploy_review.status, 'pending');

      // Once the environment is unprotected, the developer deploys.
      assert.equal((await t.delete(`/api/v4/projects/${ciProject.id}/protected_environments/production`, { token: maintainer.token })).status, 204);
      const free = await pipelineBy(developer, 'by-dev-2');
      assert.equal(free.deploy_prod.status, 'pending');
      assert.equal((await t.post(jobs(`/${free.manual_prod.id}/play`), {}, { token: developer.token })).status, 200);
    });
  });
});
