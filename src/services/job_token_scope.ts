import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import { badRequest } from '../plugins/errors.js';

/**
 * The CI job token's inbound scope of a project (GitLab's Ci::JobTokenScope services): whether
 * it is on, and the projects and groups whose job tokens it admits. Who may change it is the
 * route's check (maintainers); reading the targets is the caller's (a project or group they see).
 */
export async function setInboundScope(cairn: Pick<Cairn, 'db'>, projectId: number, enabled: boolean): Promise<void> {
  await cairn.db.updateTable('projects').set({ ci_inbound_job_token_scope_enabled: enabled, updated_at: new Date() }).where('id', '=', projectId).execute();
}

export async function allowProject(cairn: Pick<Cairn, 'db'>, sourceProjectId: number, targetProjectId: number, user: User) {
  // The project itself is always in its own scope.
  if (sourceProjectId === targetProjectId) throw badRequest('Target project is already in the job token scope');
  const row = await sql<{ id: number }>`
    insert into ci_job_token_project_scope_links (source_project_id, target_project_id, added_by_id)
    values (${sourceProjectId}, ${targetProjectId}, ${user.id})
    on conflict (source_project_id, target_project_id) do nothing
    returning id`.execute(cairn.db);
  if (!row.rows.length) throw badRequest('Target project is already in the job token scope');
  return { source_project_id: sourceProjectId, target_project_id: targetProjectId };
}

export async function disallowProject(cairn: Pick<Cairn, 'db'>, sourceProjectId: number, targetProjectId: number): Promise<void> {
  const res = await cairn.db.deleteFrom('ci_job_token_project_scope_links').where('source_project_id', '=', sourceProjectId).where('target_project_id', '=', targetProjectId).executeTakeFirst();
  if (!Number(res.numDeletedRows)) throw badRequest('Target project is not in the job token scope');
}

export async function allowGroup(cairn: Pick<Cairn, 'db'>, sourceProjectId: number, targetGroupId: number, user: User) {
  const row = await sql<{ id: number }>`
    insert into ci_job_token_group_scope_links (source_project_id, target_group_id, added_by_id)
    values (${sourceProjectId}, ${targetGroupId}, ${user.id})
    on conflict (source_project_id, target_group_id) do nothing
    returning id`.execute(cairn.db);
  if (!row.rows.length) throw badRequest('Target group is already in the job token scope');
  return { source_project_id: sourceProjectId, target_group_id: targetGroupId };
}

export async function disallowGroup(cairn: Pick<Cairn, 'db'>, sourceProjectId: number, targetGroupId: number): Promise<void> {
  const res = await cairn.db.deleteFrom('ci_job_token_group_scope_links').where('source_project_id', '=', sourceProjectId).where('target_group_id', '=', targetGroupId).executeTakeFirst();
  if (!Number(res.numDeletedRows)) throw badRequest('Target group is not in the job token scope');
}

/** The ids of the projects a project's scope admits: itself first, then its allowlist in the order they were added. */
export async function allowedProjectIds(cairn: Pick<Cairn, 'db'>, projectId: number): Promise<number[]> {
  const links = await cairn.db.selectFrom('ci_job_token_project_scope_links').select('target_project_id').where('source_project_id', '=', projectId).orderBy('id').execute();
  return [projectId, ...links.map((l) => l.target_project_id).filter((id) => id !== projectId)];
}

/** The groups on a project's allowlist, a page of them with the total. */
export async function allowedGroups(cairn: Pick<Cairn, 'db'>, projectId: number, page: { limit: number; offset: number }) {
  const base = cairn.db
    .selectFrom('ci_job_token_group_scope_links as l')
    .innerJoin('namespaces as n', 'n.id', 'l.target_group_id')
    .where('l.source_project_id', '=', projectId);
  const [rows, total] = await Promise.all([
    base.select(['n.id', 'n.name', 'n.full_path']).orderBy('l.id').limit(page.limit).offset(page.offset).execute(),
    base.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: total.n };
}
