import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import type { Project } from '../../src/db/schema/core.js';
import { BranchSchema } from '../../src/presenters/schemas/branches.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('branches: response forms match their schemas', () => {
  let t: TestContext;
  let dev: TestUser;
  let project: Project;
  let url: string;
  before(async () => {
    t = await createTestContext();
    dev = await t.createUser();
    project = await t.createProject({ visibility: 20 });
    url = `/api/v4/projects/${project.id}/repository`;
    await t.addMember(project, dev.user, 30);
    assert.equal((await t.post(`${url}/commits`, { branch: 'main', commit_message: 'init', actions: [{ action: 'create', file_path: 'a', content: 'a' }] })).status, 201);
  });
  after(async () => { await t.close(); });

  it('create, list, single for anonymous and developers', async () => {
    assertOne(BranchSchema, await t.post(`${url}/branches`, { branch: 'feature/x', ref: 'main' }, { token: dev.token }), 'POST branch');
    assertEach(BranchSchema, await t.get(`${url}/branches`, { token: null }), 'GET branches (anonymous)');
    assertEach(BranchSchema, await t.get(`${url}/branches`, { token: dev.token }), 'GET branches (developer)');
    assertOne(BranchSchema, await t.get(`${url}/branches/main`, { token: null }), 'GET branch');
    assertOne(BranchSchema, await t.get(`${url}/branches/${encodeURIComponent('feature/x')}`, { token: dev.token }), 'GET branch with a slash');
    const b = (await t.get(`${url}/branches/main`, { token: null })).body;
    assert.equal(Value.Check(BranchSchema, { ...b, extra: 1 }), false);
  });
});
