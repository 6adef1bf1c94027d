import { groupWebUrl } from './namespaces.js';
import { projectSettings, type ProjectRow } from './projects.js';
import type { PresentContext } from './users.js';

/** The job token scope of a project: inbound is the allowlist; outbound GitLab's older (deprecated) setting. */
export function presentJobTokenScope(project: ProjectRow) {
  return { inbound_enabled: project.ci_inbound_job_token_scope_enabled, outbound_enabled: !!projectSettings(project).ci_job_token_scope_enabled };
}

/** GitLab's BasicGroupDetails. */
export function presentBasicGroupDetails(ctx: PresentContext, g: { id: number; name: string; full_path: string }) {
  return { id: g.id, web_url: groupWebUrl(ctx, g.full_path), name: g.name };
}
