import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import type { Project } from '../../src/db/schema/core.js';
import { TagSchema } from '../../src/presenters/schemas/branches.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('tags: response forms match their schemas', () => {
  let t: TestContext;
  let project: Project;
  let url: string;
  before(async () => {
    t = await createTestContext();
    project = await t.createProject({ visibility: 20 });
    url = `/api/v4/projects/${project.id}/repository`;
    assert.equal((await t.post(`${url}/commits`, { branch: 'main', commit_message: 'init', actions: [{ action: 'create', file_path: 'a', content: 'a' }] })).status, 201);
  });
  after(async () => { await t.close(); });

  it('lightweight and annotated tags: create, list, single', async () => {
    const light = await t.post(`${url}/tags`, { tag_name: 'v1', ref: 'main' });
    assertOne(TagSchema, light, 'POST lightweight tag');
    assert.equal(light.body.created_at, null);
    const annotated = await t.post(`${url}/tags`, { tag_name: 'v2', ref: 'main', message: 'Release 2' });
    assertOne(TagSchema, annotated, 'POST annotated tag');
    assert.equal(typeof annotated.body.created_at, 'string');
    assertEach(TagSchema, await t.get(`${url}/tags`, { token: null }), 'GET tags');
    assertOne(TagSchema, await t.get(`${url}/tags/v2`, { token: null }), 'GET tag');
    assert.equal(Value.Check(TagSchema, { ...annotated.body, release: { tag_name: 'v2' } }), false);
  });
});
