import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import type { Project } from '../../src/db/schema/core.js';
import {
  CherryPickDryRunSchema, CommitDetailSchema, CommitNoteSchema, CommitRefSchema, CommitSchema, CommitWithStatsSchema, DiffSchema, DiscussionSchema,
} from '../../src/presenters/schemas/commits.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('commits: response forms match their schemas', () => {
  let t: TestContext;
  let dev: TestUser;
  let project: Project;
  let url: string;
  let first: string, second: string;
  before(async () => {
    t = await createTestContext();
    dev = await t.createUser();
    project = await t.createProject({ visibility: 20 });
    url = `/api/v4/projects/${project.id}/repository`;
    await t.addMember(project, dev.user, 30);
    const c1 = await t.post(`${url}/commits`, {
      branch: 'main', commit_message: 'Initial\n\nBody\n\nSigned-off-by: A <a@example.com>',
      actions: [{ action: 'create', file_path: 'README.md', content: 'one\ntwo\n' }, { action: 'create', file_path: 'run.sh', content: 'x', execute_filemode: true }],
    });
    assertOne(CommitDetailSchema, c1, 'POST commits (first)');
    first = c1.body.id;
    const c2 = await t.post(`${url}/commits`, {
      branch: 'feature', start_branch: 'main', commit_message: 'Change',
      actions: [{ action: 'update', file_path: 'README.md', content: 'one\nthree\n' }, { action: 'move', previous_path: 'run.sh', file_path: 'bin/run.sh' }],
    });
    assertOne(CommitDetailSchema, c2, 'POST commits (second)');
    second = c2.body.id;
    assert.equal((await t.post(`${url}/tags`, { tag_name: 'v1', ref: first, message: 'tagged' })).status, 201);
  });
  after(async () => { await t.close(); });

  it('list: Commit form, CommitWithStats with with_stats, trailers on request', async () => {
    assertEach(CommitSchema, await t.get(`${url}/commits?ref_name=feature`, { token: null }), 'GET commits');
    assertEach(CommitSchema, await t.get(`${url}/commits?ref_name=feature&trailers=true`, { token: null }), 'GET commits?trailers');
    assertEach(CommitWithStatsSchema, await t.get(`${url}/commits?ref_name=feature&with_stats=true`, { token: null }), 'GET commits?with_stats');
  });

  it('single: CommitDetail with and without stats', async () => {
    assertOne(CommitDetailSchema, await t.get(`${url}/commits/${second}`, { token: null }), 'GET commit');
    const noStats = await t.get(`${url}/commits/feature?stats=false`, { token: null });
    assertOne(CommitDetailSchema, noStats, 'GET commit?stats=false');
    assert.equal('stats' in noStats.body, false);
  });

  it('diff entries and refs', async () => {
    assertEach(DiffSchema, await t.get(`${url}/commits/${second}/diff`, { token: null }), 'GET diff');
    assertEach(DiffSchema, await t.get(`${url}/commits/${first}/diff`, { token: null }), 'GET diff (root commit)');
    assertEach(CommitRefSchema, await t.get(`${url}/commits/${first}/refs`, { token: null }), 'GET refs');
  });

  it('comments and discussions', async () => {
    assertOne(CommitNoteSchema, await t.post(`${url}/commits/${second}/comments`, { note: 'plain' }, { token: dev.token }), 'POST comment');
    const onLine = await t.post(`${url}/commits/${second}/comments`, { note: 'on a line', path: 'README.md', line: 2, line_type: 'new' }, { token: dev.token });
    assertOne(CommitNoteSchema, onLine, 'POST comment on a line');
    assert.equal(onLine.body.path, 'README.md');
    assertEach(CommitNoteSchema, await t.get(`${url}/commits/${second}/comments`, { token: null }), 'GET comments');
    assertEach(DiscussionSchema, await t.get(`${url}/commits/${second}/discussions`, { token: null }), 'GET discussions');
  });

  it('cherry-pick and revert answer the Commit form; dry runs their own', async () => {
    assert.equal((await t.post(`${url}/branches`, { branch: 'pick', ref: first })).status, 201);
    assertOne(CherryPickDryRunSchema, await t.post(`${url}/commits/${second}/cherry_pick`, { branch: 'pick', dry_run: true }, { token: dev.token }), 'cherry-pick dry run');
    assertOne(CommitSchema, await t.post(`${url}/commits/${second}/cherry_pick`, { branch: 'pick' }, { token: dev.token }), 'cherry-pick');
    assertOne(CommitSchema, await t.post(`${url}/commits/${second}/revert`, { branch: 'feature' }, { token: dev.token }), 'revert');
  });

  it('the schemas reject stray fields', async () => {
    const c = (await t.get(`${url}/commits/${second}`, { token: null })).body;
    assert.equal(Value.Check(CommitSchema, c), false, 'detail fields are not in the Commit form');
  });
});
