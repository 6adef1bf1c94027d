import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { Deployment, DeploymentStatus, Environment, EnvironmentState } from '../db/schema/environments.js';
import type { DeploymentExtras } from '../presenters/environments.js';
import type { ProjectRow } from '../presenters/projects.js';
import { loadJobExtras } from './pipelines.js';

// Environments and deployments of a project (the route's guard has checked the caller may read
// them): one query builder per list for its page and its total, a step per filter.

export interface EnvironmentFilters {
  name?: string;
  /** Names that start with it (GitLab's for_name_like; at least 3 characters, checked by the route). */
  search?: string;
  states?: EnvironmentState;
}

const likePattern = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

export function environmentsQuery(db: Database, projectId: number, f: EnvironmentFilters) {
  let q = db.selectFrom('environments').where('project_id', '=', projectId);
  if (f.name !== undefined) q = q.where('name', '=', f.name);
  if (f.search !== undefined) q = q.where((eb) => eb(eb.fn('lower', ['name']), 'like', `${likePattern(f.search!.toLowerCase())}%`));
  if (f.states !== undefined) q = q.where('state', '=', f.states);
  return q;
}

export async function findEnvironment(db: Database, projectId: number, id: number): Promise<Environment | undefined> {
  return db.selectFrom('environments').selectAll().where('project_id', '=', projectId).where('id', '=', id).executeTakeFirst();
}

export const DEPLOYMENT_ORDERS = ['id', 'iid', 'created_at', 'updated_at', 'finished_at', 'ref'] as const;
export type DeploymentOrder = (typeof DEPLOYMENT_ORDERS)[number];

export interface DeploymentFilters {
  environment?: string;
  status?: DeploymentStatus;
  updatedAfter?: Date;
  updatedBefore?: Date;
  finishedAfter?: Date;
  finishedBefore?: Date;
}

export function deploymentsQuery(db: Database, projectId: number, f: DeploymentFilters) {
  let q = db.selectFrom('deployments').where('deployments.project_id', '=', projectId);
  if (f.environment !== undefined) {
    const env = f.environment;
    q = q.where('environment_id', 'in', (eb) => eb.selectFrom('environments').select('id').where('project_id', '=', projectId).where('name', '=', env));
  }
  if (f.status !== undefined) q = q.where('status', '=', f.status);
  if (f.updatedAfter) q = q.where('updated_at', '>', f.updatedAfter);
  if (f.updatedBefore) q = q.where('updated_at', '<', f.updatedBefore);
  if (f.finishedAfter) q = q.where('finished_at', '>', f.finishedAfter);
  if (f.finishedBefore) q = q.where('finished_at', '<', f.finishedBefore);
  return q;
}

export async function findDeployment(db: Database, projectId: number, id: number): Promise<Deployment | undefined> {
  return db.selectFrom('deployments').selectAll().where('project_id', '=', projectId).where('id', '=', id).executeTakeFirst();
}

/** The last successful deployment of each of these environments (GitLab's last_deployment). */
export async function lastDeployments(db: Database, environmentIds: number[]): Promise<Map<number, Deployment>> {
  if (!environmentIds.length) return new Map();
  const rows = await db
    .selectFrom('deployments').selectAll()
    .distinctOn('environment_id')
    .where('environment_id', 'in', environmentIds).where('status', '=', 'success')
    .orderBy('environment_id').orderBy('id', 'desc')
    .execute();
  return new Map(rows.map((d) => [d.environment_id, d]));
}

/** Everything presenting these deployments needs: their environments, users and jobs (with the jobs' own extras). */
export async function loadDeploymentExtras(cairn: Cairn, project: ProjectRow, deployments: Deployment[]): Promise<DeploymentExtras> {
  const db = cairn.db;
  const envIds = [...new Set(deployments.map((d) => d.environment_id))];
  const userIds = [...new Set(deployments.flatMap((d) => (d.user_id ? [d.user_id] : [])))];
  const jobIds = [...new Set(deployments.flatMap((d) => (d.deployable_id ? [d.deployable_id] : [])))];
  const [envs, users, jobs] = await Promise.all([
    envIds.length ? db.selectFrom('environments').selectAll().where('id', 'in', envIds).execute() : [],
    userIds.length ? db.selectFrom('users').selectAll().where('id', 'in', userIds).execute() : [],
    jobIds.length ? db.selectFrom('ci_builds').selectAll().where('id', 'in', jobIds).execute() : [],
  ]);
  return {
    environments: new Map(envs.map((e) => [e.id, e])),
    users: new Map(users.map((u) => [u.id, u])),
    jobs: new Map(jobs.map((j) => [j.id, j])),
    jobExtras: await loadJobExtras(cairn, project, jobs),
  };
}
