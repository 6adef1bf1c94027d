import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import type { Project } from '../../src/db/schema/core.js';
import { BlameRangeSchema, FileWriteSchema, RepositoryFileSchema } from '../../src/presenters/schemas/files.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('repository files: response forms match their schemas', () => {
  let t: TestContext;
  let project: Project;
  let url: string;
  before(async () => {
    t = await createTestContext();
    project = await t.createProject({ visibility: 20 });
    url = `/api/v4/projects/${project.id}/repository/files`;
  });
  after(async () => { await t.close(); });

  it('create, update, read, blame', async () => {
    assertOne(FileWriteSchema, await t.post(`${url}/${encodeURIComponent('docs/a b.md')}`, { branch: 'main', content: 'one\ntwo\n', commit_message: 'add' }), 'POST file');
    assertOne(FileWriteSchema, await t.put(`${url}/${encodeURIComponent('docs/a b.md')}`, { branch: 'main', content: 'one\nthree\n', commit_message: 'edit' }), 'PUT file');
    assertOne(FileWriteSchema, await t.post(`${url}/run.sh`, { branch: 'main', content: 'x', commit_message: 'exec', execute_filemode: true }), 'POST executable');
    assertOne(RepositoryFileSchema, await t.get(`${url}/${encodeURIComponent('docs/a b.md')}?ref=main`, { token: null }), 'GET file');
    const exec = await t.get(`${url}/run.sh?ref=main`, { token: null });
    assertOne(RepositoryFileSchema, exec, 'GET executable');
    assert.equal(exec.body.execute_filemode, true);
    assertEach(BlameRangeSchema, await t.get(`${url}/${encodeURIComponent('docs/a b.md')}/blame?ref=main`, { token: null }), 'GET blame');
    assert.equal(Value.Check(RepositoryFileSchema, { ...exec.body, encoding: 'text' }), false);
  });
});
