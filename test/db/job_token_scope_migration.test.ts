import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { down, up } from '../../src/db/migrations/0950_job_token_scope.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

// Migration 0950: projects that exist when it runs keep their job tokens' reach (the inbound scope
// off, as GitLab left projects older than the setting); projects created afterwards have it on.
describe('migration 0950_job_token_scope', () => {
  let t: TestContext;
  before(async () => {
    t = await createTestContext();
  });
  after(async () => {
    await t?.close();
  });

  it('turns the inbound scope off for existing projects and on for new ones', async () => {
    // Made with a statement of its own: down and up move the column to the end of the table, and
    // on PostgreSQL a statement this connection prepared before (`returning *`) would no longer fit.
    const ns = await t.db.selectFrom('namespaces').select('id').where('path', '=', 'root').executeTakeFirstOrThrow();
    const existing = await t.db
      .insertInto('projects')
      .values({ name: 'existing', path: t.unique('existing'), namespace_id: ns.id, visibility_level: 0 } as any)
      .returning('id')
      .executeTakeFirstOrThrow();
    await down(t.db as any);
    await up(t.db as any);
    const created = await t.createProject();
    const rows = await t.db.selectFrom('projects').select(['id', 'ci_inbound_job_token_scope_enabled']).where('id', 'in', [existing.id, created.id]).orderBy('id').execute();
    assert.deepEqual(rows.map((r) => r.ci_inbound_job_token_scope_enabled), [false, true]);
    const tables = await t.db.selectFrom('ci_job_token_project_scope_links').select('id').execute();
    assert.deepEqual(tables, []);
  });
});
