import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { parseCalendarDate, parseTimestamp } from '../../src/lib/timestamps.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

// JavaScript dates reach year +275760, PostgreSQL's timestamps and ISO 8601's four digits do not:
// a date or time parameter outside years 1 to 9999 is GitLab's 400 naming the parameter, never a
// 500 (from the database, or from an answer whose timestamp the schema refuses).
const LATEST_JS = '+275760-09-12T23:59:59.991Z';
const OUT_OF_RANGE = [LATEST_JS, '-000001-01-01T00:00:00Z', '0000-06-01T00:00:00Z', '10000-01-01T00:00:00Z'];

describe('date and time parameters: one parser, years 1 to 9999', () => {
  let t: TestContext;
  let project: Project;
  let group: Namespace;
  let p: string;

  before(async () => {
    t = await createTestContext({ changelogRateLimit: 0 });
    group = await t.createGroup();
    project = await t.createProject({ group });
    p = `/api/v4/projects/${project.id}`;
    const commit = await t.post(`${p}/repository/commits`, { branch: 'main', commit_message: 'first', actions: [{ action: 'create', file_path: 'a.txt', content: 'a\n' }] });
    assert.equal(commit.status, 201, commit.text);
  });
  after(async () => {
    await t.close();
  });

  it('parses timestamps and calendar dates, refusing what is out of range', () => {
    assert.equal(parseTimestamp('2024-02-29T10:00:00Z')?.toISOString(), '2024-02-29T10:00:00.000Z');
    assert.equal(parseTimestamp('2024-02-29T10:00:00')?.toISOString(), '2024-02-29T10:00:00.000Z', 'no zone: UTC');
    assert.equal(parseTimestamp('2024-02-29')?.toISOString(), '2024-02-29T00:00:00.000Z');
    assert.equal(parseTimestamp('2024-02-29T10:00:00+02:00')?.toISOString(), '2024-02-29T08:00:00.000Z');
    assert.equal(parseTimestamp('0001-01-01T00:00:00Z')?.toISOString(), '0001-01-01T00:00:00.000Z');
    assert.equal(parseTimestamp('9999-12-31T23:59:59.999Z')?.toISOString(), '9999-12-31T23:59:59.999Z');
    for (const bad of [...OUT_OF_RANGE, 'yesterday', '', '2024-13-01T00:00:00Z']) assert.equal(parseTimestamp(bad), null, bad);
    assert.equal(parseCalendarDate('2024-02-29'), '2024-02-29');
    assert.equal(parseCalendarDate('2024-02-29T10:00:00Z', { time: 'allowed' }), '2024-02-29');
    for (const bad of ['2023-02-29', '0000-01-01', '+275760-09-12', '10000-01-01', '2024-02-29T10:00:00Z', '24-01-01']) assert.equal(parseCalendarDate(bad), null, bad);
  });

  it('list filters: 400 naming the parameter', async () => {
    const cases: [string, string][] = [
      ['/api/v4/projects', 'created_after'],
      ['/api/v4/projects', 'last_activity_before'],
      [`${p}/repository/commits`, 'since'],
      [`${p}/repository/commits`, 'until'],
      [`${p}/issues`, 'created_after'],
      ['/api/v4/issues', 'updated_before'],
      [`${p}/merge_requests`, 'updated_after'],
      [`${p}/pipelines`, 'created_before'],
      [`${p}/milestones`, 'updated_after'],
      [`/api/v4/groups/${group.id}/epics`, 'created_after'],
      ['/api/v4/snippets/all', 'created_after'],
      ['/api/v4/users', 'created_before'],
    ];
    for (const [url, name] of cases) {
      for (const value of OUT_OF_RANGE) {
        const res = await t.get(url, { query: { [name]: value } });
        assert.deepEqual([res.status, res.body], [400, { error: `${name} is invalid` }], `${url}?${name}=${value}`);
      }
      const ok = await t.get(url, { query: { [name]: '2020-01-01T00:00:00Z' } });
      assert.equal(ok.status, 200, `${url}?${name}=2020-01-01T00:00:00Z: ${ok.text}`);
    }
  });

  it('written timestamps and dates: 400 naming the parameter', async () => {
    const issue = await t.post(`${p}/issues`, { title: 'dated' });
    assert.equal(issue.status, 201);
    const writes: [string, string, string, Record<string, unknown>][] = [
      ['POST', `${p}/issues`, 'created_at', { title: 'x' }],
      ['PUT', `${p}/issues/${issue.body.iid}`, 'updated_at', {}],
      ['POST', `${p}/issues/${issue.body.iid}/notes`, 'created_at', { body: 'x' }],
      ['POST', `/api/v4/groups/${group.id}/epics`, 'created_at', { title: 'x' }],
      ['POST', '/api/v4/user/keys', 'expires_at', { title: 'k', key: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl' }],
      ['POST', `${p}/repository/changelog`, 'date', { version: '1.0.0' }],
    ];
    for (const [method, url, name, body] of writes) {
      for (const value of OUT_OF_RANGE) {
        const res = await t.call(method, url, { body: { ...body, [name]: value } });
        assert.deepEqual([res.status, res.body], [400, { error: `${name} is invalid` }], `${method} ${url} ${name}=${value}`);
      }
    }
    const dates: [string, string, string, Record<string, unknown>][] = [
      ['PUT', `${p}/issues/${issue.body.iid}`, 'due_date', {}],
      ['POST', `${p}/members`, 'expires_at', { user_id: (await t.createUser()).user.id, access_level: 30 }],
      ['POST', '/api/v4/user/personal_access_tokens', 'expires_at', { name: 'x', scopes: ['k8s_proxy'] }],
      ['POST', `/api/v4/groups/${group.id}/epics`, 'start_date_fixed', { title: 'x', start_date_is_fixed: true }],
    ];
    for (const [method, url, name, body] of dates) {
      for (const value of ['+275760-09-12', '0000-01-01', '-000001-01-01']) {
        const res = await t.call(method, url, { body: { ...body, [name]: value } });
        assert.deepEqual([res.status, res.body], [400, { error: `${name} is invalid` }], `${method} ${url} ${name}=${value}`);
      }
    }
  });

  it("milestone dates: past 9999-12-31 is GitLab's validation error (also for years of five digits), year 0 no date", async () => {
    for (const field of ['start_date', 'due_date']) {
      const late = await t.post(`${p}/milestones`, { title: `late ${field}`, [field]: '10000-01-01' });
      assert.equal(late.status, 400, late.text);
      assert.match(late.text, /date must not be after 9999-12-31/);
    }
    const zero = await t.post(`${p}/milestones`, { title: 'year zero', start_date: '0000-01-01' });
    assert.equal(zero.status, 201, zero.text);
    assert.equal(zero.body.start_date, null);
    const epic = await t.post(`/api/v4/groups/${group.id}/epics`, { title: 'late', start_date_is_fixed: true, start_date_fixed: '10000-01-01' });
    assert.deepEqual([epic.status, epic.body], [400, { error: 'start_date_fixed is invalid' }]);
  });
});
