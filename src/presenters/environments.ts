import type { CiBuild } from '../db/schema/ci.js';
import type { User } from '../db/schema/core.js';
import type { DeployAccessLevel, Deployment, Environment, ProtectedEnvironment } from '../db/schema/environments.js';
import { accessLevelDescription, type AccessLevelNames } from './access_levels.js';
import { presentJob, type JobExtras } from './ci.js';
import type { ProjectRow } from './projects.js';
import { iso, presentUserBasic, type PresentContext } from './users.js';

/** GitLab's Entities::EnvironmentBasic (a deployment's environment). */
export function presentEnvironmentBasic(e: Environment) {
  return {
    id: e.id,
    name: e.name,
    slug: e.slug,
    external_url: e.external_url,
    created_at: iso(e.created_at)!,
    updated_at: iso(e.updated_at)!,
  };
}

/**
 * GitLab's Entities::Environment (lists, create, update, stop), with its project in the
 * BasicProjectDetails form (`project`, presented once by the caller).
 */
export function presentEnvironment<P>(e: Environment, project: P) {
  return {
    ...presentEnvironmentBasic(e),
    tier: e.tier,
    project,
    state: e.state,
    auto_stop_at: iso(e.auto_stop_at),
    description: e.description,
    auto_stop_setting: 'always',
  };
}

/** What presenting deployments needs, loaded once per page (finders/environments.ts loadDeploymentExtras). */
export interface DeploymentExtras {
  environments: Map<number, Environment>;
  users: Map<number, User>;
  jobs: Map<number, CiBuild>;
  jobExtras: JobExtras;
}

/** GitLab's Entities::Deployment: its environment, its user and its job (deployable). */
export function presentDeployment(ctx: PresentContext, project: ProjectRow, d: Deployment, x: DeploymentExtras) {
  const user = d.user_id ? x.users.get(d.user_id) : undefined;
  const job = d.deployable_id ? x.jobs.get(d.deployable_id) : undefined;
  return {
    id: d.id,
    iid: d.iid,
    ref: d.ref,
    sha: d.sha,
    status: d.status,
    created_at: iso(d.created_at)!,
    updated_at: iso(d.updated_at)!,
    finished_at: iso(d.finished_at),
    user: user ? presentUserBasic(ctx, user) : null,
    environment: presentEnvironmentBasic(x.environments.get(d.environment_id)!),
    deployable: job ? presentJob(ctx, project, job, x.jobExtras) : null,
  };
}

/** The single environment: its last successful deployment too. */
export function presentEnvironmentDetail<P>(ctx: PresentContext, project: ProjectRow, projectBody: P, e: Environment, last: Deployment | null, x: DeploymentExtras) {
  return { ...presentEnvironment(e, projectBody), last_deployment: last ? presentDeployment(ctx, project, last, x) : null };
}

/** A deploy access level: a role's description, or the user's or group's name (GitLab's humanize). */
export function presentDeployAccessLevel(l: DeployAccessLevel, names: AccessLevelNames) {
  return {
    id: l.id,
    // GitLab's column default: user and group levels show 40.
    access_level: l.access_level ?? 40,
    access_level_description: accessLevelDescription(l, names),
    user_id: l.user_id,
    group_id: l.group_id,
    group_inheritance_type: l.group_inheritance_type,
  };
}

export function presentProtectedEnvironment(env: ProtectedEnvironment, levels: DeployAccessLevel[], names: AccessLevelNames) {
  return {
    name: env.name,
    deploy_access_levels: levels.filter((l) => l.protected_environment_id === env.id).map((l) => presentDeployAccessLevel(l, names)),
    required_approval_count: env.required_approval_count,
  };
}
