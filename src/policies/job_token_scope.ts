import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Project } from '../db/schema/core.js';

/** What a job token's credential says about where it comes from (ci/job_tokens.ts sets meta.projectId). */
export function jobTokenProjectId(cred: { kind: string; meta?: Record<string, unknown> } | null | undefined): number | null {
  if (!cred || cred.kind !== 'job_token') return null;
  const id = Number(cred.meta?.projectId);
  return Number.isInteger(id) && id > 0 ? id : null;
}

/**
 * GitLab's Ci::JobToken::Scope#accessible? for the inbound direction: may a job of project
 * `jobProjectId` use its CI_JOB_TOKEN on `target`? Its own project always; another project only
 * when `target` has the inbound scope off, or lists that project, or a group above it, on its
 * allowlist. A project the token may not reach is, to that token, a project it cannot see.
 */
export async function jobTokenMayAccess(
  db: Database,
  jobProjectId: number,
  target: Pick<Project, 'id' | 'ci_inbound_job_token_scope_enabled'>,
): Promise<boolean> {
  if (jobProjectId === target.id) return true;
  if (!target.ci_inbound_job_token_scope_enabled) return true;
  const row = await sql<{ ok: number }>`
    select 1 as ok from ci_job_token_project_scope_links
     where source_project_id = ${target.id} and target_project_id = ${jobProjectId}
    union all
    select 1 from ci_job_token_group_scope_links l
      join projects p on p.id = ${jobProjectId}
      join namespaces n on n.id = p.namespace_id
     where l.source_project_id = ${target.id} and l.target_group_id = any(n.traversal_ids)
    limit 1`.execute(db);
  return row.rows.length > 0;
}
