import type { CiRunner } from '../db/schema/ci.js';
import { iso, type PresentContext } from './users.js';
import type { ProjectRow } from './projects.js';
import { projectFullPath } from './projects.js';

/** A runner that called within this many seconds is online (GitLab's ONLINE_CONTACT_TIMEOUT, 2 hours). */
export const RUNNER_ONLINE_SECONDS = 2 * 3600;

/** online: true or false once the runner has called, null when it never has (GitLab's online?). */
export function runnerOnline(r: Pick<CiRunner, 'contacted_at'>, now = Date.now()): boolean | null {
  if (!r.contacted_at) return null;
  return now - new Date(r.contacted_at as unknown as string).getTime() < RUNNER_ONLINE_SECONDS * 1000;
}

/** online, offline, or not_connected when it never called. */
export function runnerStatus(r: Pick<CiRunner, 'contacted_at'>, now = Date.now()): 'online' | 'offline' | 'not_connected' {
  const online = runnerOnline(r, now);
  return online === null ? 'not_connected' : online ? 'online' : 'offline';
}

/** GitLab's Entities::Ci::Runner: lists, and a job's runner. */
export function presentRunner(r: CiRunner) {
  return {
    id: r.id,
    description: r.description,
    ip_address: r.ip_address,
    active: r.active,
    paused: !r.active,
    is_shared: r.runner_type === 'instance_type',
    runner_type: r.runner_type,
    name: r.name ?? null,
    online: runnerOnline(r),
    status: runnerStatus(r),
  };
}

export interface RunnerDetailExtras {
  /** The runner's projects the caller may see. */
  projects: ProjectRow[];
  groups: { id: number; name: string; full_path: string }[];
}

/** GitLab's Entities::Ci::RunnerDetails: single reads and updates. */
export function presentRunnerDetail(ctx: PresentContext, r: CiRunner, x: RunnerDetailExtras) {
  return {
    ...presentRunner(r),
    tag_list: [...r.tag_list].sort(),
    run_untagged: r.run_untagged,
    locked: r.locked,
    maximum_timeout: r.maximum_timeout,
    access_level: r.access_level,
    version: r.version,
    revision: r.revision,
    platform: r.platform,
    architecture: r.architecture,
    contacted_at: iso(r.contacted_at),
    maintenance_note: r.maintenance_note,
    maintainer_note: r.maintenance_note,
    projects: x.projects.map((p) => ({
      id: p.id,
      name: p.name,
      name_with_namespace: `${p.namespace.full_name} / ${p.name}`,
      path: p.path,
      path_with_namespace: projectFullPath(p),
    })),
    groups: x.groups.map((g) => ({ id: g.id, web_url: `${ctx.baseUrl}/groups/${g.full_path}`, name: g.name })),
  };
}
