import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { drainJobs } from '../../src/jobs/queue.js';
import { projectRepoPath } from '../../src/services/projects.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

describe('repository housekeeping', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  const graphExists = (dir: string) =>
    fs.existsSync(path.join(dir, 'objects/info/commit-graph')) || fs.existsSync(path.join(dir, 'objects/info/commit-graphs'));

  it('POST /projects/:id/housekeeping writes a commit-graph; maintainers only', async () => {
    const { user: dev, token: devToken } = await t.createUser();
    const created = await t.post('/api/v4/projects', { name: t.unique('hk'), initialize_with_readme: true });
    assert.equal(created.status, 201);
    const project = await t.db.selectFrom('projects').selectAll().where('id', '=', created.body.id).executeTakeFirstOrThrow();
    await t.addMember(project, dev, 30);
    assert.equal((await t.post(`/api/v4/projects/${project.id}/housekeeping`, {}, { token: devToken })).status, 403);
    assert.equal((await t.post(`/api/v4/projects/${project.id}/housekeeping`, { task: 'nonsense' })).status, 400);
    const dir = projectRepoPath(t.app.cairn, project);
    const res = await t.post(`/api/v4/projects/${project.id}/housekeeping`, { task: 'eager' });
    assert.equal(res.status, 201);
    assert.ok(graphExists(dir));
  });

  it('a commit through the API queues housekeeping once, and the job writes the graph', async () => {
    const created = await t.post('/api/v4/projects', { name: t.unique('hk') });
    const id = created.body.id;
    for (const n of [1, 2]) {
      const c = await t.post(`/api/v4/projects/${id}/repository/commits`, {
        branch: 'main', commit_message: `c${n}`, actions: [{ action: 'create', file_path: `f${n}.txt`, content: 'x' }],
      });
      assert.equal(c.status, 201);
    }
    const queued = await t.db.selectFrom('background_jobs').selectAll().where('kind', '=', 'repository.housekeeping').where('state', '=', 'pending').execute();
    assert.equal(queued.filter((j) => Number((j.payload as any).projectId) === id).length, 1);
    await t.db.updateTable('background_jobs').set({ run_at: new Date(0) }).where('kind', '=', 'repository.housekeeping').execute();
    await drainJobs(t.app.cairn);
    const project = await t.db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    assert.ok(graphExists(projectRepoPath(t.app.cairn, project)));
  });
});
