import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import type { Project } from '../../src/db/schema/core.js';
import { CommitSchema } from '../../src/presenters/schemas/commits.js';
import { BlobSchema, CompareSchema, ContributorSchema, TreeEntrySchema } from '../../src/presenters/schemas/repository.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('repository: response forms match their schemas', () => {
  let t: TestContext;
  let project: Project;
  let url: string;
  before(async () => {
    t = await createTestContext();
    project = await t.createProject({ visibility: 20 });
    url = `/api/v4/projects/${project.id}/repository`;
    const commit = (body: Record<string, unknown>) => t.post(`${url}/commits`, body).then((r) => assert.equal(r.status, 201, r.text));
    await commit({ branch: 'main', commit_message: 'init', actions: [{ action: 'create', file_path: 'README.md', content: 'a\n' }, { action: 'create', file_path: 'src/x.ts', content: 'x\n' }] });
    await commit({
      branch: 'topic', start_branch: 'main', commit_message: 'topic',
      actions: [{ action: 'update', file_path: 'README.md', content: 'b\n' }, { action: 'delete', file_path: 'src/x.ts' }, { action: 'create', file_path: 'tool', content: 'y', execute_filemode: true }],
    });
  });
  after(async () => { await t.close(); });

  it('tree entries and blobs', async () => {
    const tree = await t.get(`${url}/tree`, { token: null });
    assertEach(TreeEntrySchema, tree, 'GET tree');
    assertEach(TreeEntrySchema, await t.get(`${url}/tree?recursive=true&ref=topic`, { token: null }), 'GET tree?recursive');
    const blob = tree.body.find((e: { type: string }) => e.type === 'blob');
    assertOne(BlobSchema, await t.get(`${url}/blobs/${blob.id}`, { token: null }), 'GET blob');
  });

  it('compare (with and without commits), contributors, merge base', async () => {
    const cmp = await t.get(`${url}/compare?from=main&to=topic`, { token: null });
    assertOne(CompareSchema, cmp, 'GET compare');
    assert.ok(cmp.body.diffs.length === 3 && cmp.body.commit);
    assertOne(CompareSchema, await t.get(`${url}/compare?from=main&to=main`, { token: null }), 'GET compare (same ref)');
    assertOne(CompareSchema, await t.get(`${url}/compare?from=main&to=topic&straight=true`, { token: null }), 'GET compare (straight)');
    assertEach(ContributorSchema, await t.get(`${url}/contributors`, { token: null }), 'GET contributors');
    assertOne(CommitSchema, await t.get(`${url}/merge_base?refs[]=main&refs[]=topic`, { token: null }), 'GET merge_base');
  });

  it('the schemas reject stray fields', async () => {
    const e = (await t.get(`${url}/tree`, { token: null })).body[0];
    assert.equal(Value.Check(TreeEntrySchema, { ...e, size: 1 }), false);
  });
});
