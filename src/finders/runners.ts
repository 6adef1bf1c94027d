import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { CiRunner, RunnerType } from '../db/schema/ci.js';
import { RUNNER_MANAGER } from '../policies/rules.js';
import { RUNNER_ONLINE_SECONDS } from '../presenters/runners.js';
import { pageWithTotal, totalCount } from './paging.js';

/**
 * Runner lists (GitLab's Ci::RunnersFinder and the scopes of Ci::Runner): first which runners the
 * list may show at all, then one step per filter, each a no-op when its parameter is absent. The
 * page and its total come from one statement.
 */

/** Which runners a list starts from. */
export type RunnerVisibility =
  /** GET /runners/all (administrators). */
  | { kind: 'all' }
  /** GET /runners: the runners the caller manages (maintainer of one of a project runner's projects, of a group runner's group). */
  | { kind: 'owned'; userId: number }
  /** GET /projects/:id/runners: its own runners, its ancestor groups' and, when it allows them, the instance's. */
  | { kind: 'project'; projectId: number; namespaceTraversalIds: number[]; instanceRunners: boolean }
  /** GET /groups/:id/runners: the group's and its ancestors' runners and the instance's. */
  | { kind: 'group'; traversalIds: number[] };

export interface RunnerFilters {
  /** Deprecated scope: a status or, on the admin list, specific / shared / a type. */
  scope?: string;
  type?: RunnerType;
  /** online, offline, not_connected (never_contacted), and the deprecated active / paused. */
  status?: string;
  paused?: boolean;
  /** Every tag must be on the runner. */
  tagList?: string[];
}

const runnersTable = (db: Database) => db.selectFrom('ci_runners as r');
type RunnerQuery = ReturnType<typeof runnersTable>;

const onlineSince = () => sql`now() - make_interval(secs => ${RUNNER_ONLINE_SECONDS})`;

/** SQL: runners the user manages (not instance runners). One definition for lists and single reads. */
export function managedByUser(userId: number) {
  return sql<boolean>`(
    (r.runner_type = 'project_type' and exists (
       select 1 from ci_runner_projects rp
       where rp.runner_id = r.id and rp.project_id in ${RUNNER_MANAGER.projectIds(userId)}))
    or (r.runner_type = 'group_type' and exists (
       select 1 from ci_runner_namespaces rn
       where rn.runner_id = r.id and rn.namespace_id in ${RUNNER_MANAGER.groupIds(userId)})))`;
}

function visible(q: RunnerQuery, v: RunnerVisibility): RunnerQuery {
  switch (v.kind) {
    case 'all':
      return q;
    case 'owned':
      return q.where(managedByUser(v.userId));
    case 'project':
      return q.where(sql<boolean>`(
        (r.runner_type = 'project_type' and exists (select 1 from ci_runner_projects rp where rp.runner_id = r.id and rp.project_id = ${v.projectId}))
        or (r.runner_type = 'group_type' and exists (select 1 from ci_runner_namespaces rn where rn.runner_id = r.id and rn.namespace_id = any(${v.namespaceTraversalIds}::int[])))
        or (r.runner_type = 'instance_type' and ${v.instanceRunners}))`);
    case 'group':
      return q.where(sql<boolean>`(
        (r.runner_type = 'group_type' and exists (select 1 from ci_runner_namespaces rn where rn.runner_id = r.id and rn.namespace_id = any(${v.traversalIds}::int[])))
        or r.runner_type = 'instance_type')`);
  }
}

/** A status, as GitLab's runner scopes compute it from contacted_at (and active for the deprecated ones). */
function byStatus(q: RunnerQuery, status: string | undefined): RunnerQuery {
  switch (status) {
    case undefined:
      return q;
    case 'active':
      return q.where('r.active', '=', true);
    case 'paused':
      return q.where('r.active', '=', false);
    case 'online':
      return q.where(sql<boolean>`r.contacted_at > ${onlineSince()}`);
    case 'offline':
      return q.where(sql<boolean>`r.contacted_at <= ${onlineSince()}`);
    case 'not_connected':
    case 'never_contacted':
      return q.where('r.contacted_at', 'is', null);
    default:
      return q.where(sql<boolean>`false`);
  }
}

function byScope(q: RunnerQuery, scope: string | undefined): RunnerQuery {
  switch (scope) {
    case 'specific':
      return q.where('r.runner_type', 'in', ['group_type', 'project_type']);
    case 'shared':
      return q.where('r.runner_type', '=', 'instance_type');
    case 'instance_type':
    case 'group_type':
    case 'project_type':
      return q.where('r.runner_type', '=', scope);
    default:
      return byStatus(q, scope);
  }
}

function filtered(db: Database, v: RunnerVisibility, f: RunnerFilters): RunnerQuery {
  let q = visible(runnersTable(db), v);
  q = byScope(q, f.scope);
  if (f.type) q = q.where('r.runner_type', '=', f.type);
  q = byStatus(q, f.status);
  if (f.paused !== undefined) q = q.where('r.active', '=', !f.paused);
  if (f.tagList?.length) q = q.where(sql<boolean>`r.tag_list @> ${f.tagList}::text[]`);
  return q;
}

export async function listRunners(db: Database, v: RunnerVisibility, f: RunnerFilters, page: { limit: number; offset: number }) {
  const base = filtered(db, v, f);
  const rows = await base.selectAll('r').select(totalCount).orderBy('r.id', 'asc').limit(page.limit).offset(page.offset).execute();
  const result = await pageWithTotal(rows as (CiRunner & { total_count: number })[], page.offset, async () =>
    Number((await base.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow()).n),
  );
  return { rows: result.rows as CiRunner[], total: result.total };
}

export async function findRunner(db: Database, id: number): Promise<CiRunner | undefined> {
  return db.selectFrom('ci_runners').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * May the user manage the runner (see it, change it, remove it, list its jobs)? Administrators
 * any; others a project runner of a project they maintain, a group runner of a group they
 * maintain (or own); an instance runner never.
 */
export async function userManagesRunner(db: Database, user: User, runnerId: number): Promise<boolean> {
  if (user.admin) return true;
  const found = await runnersTable(db).select('r.id').where('r.id', '=', runnerId).where(managedByUser(user.id)).executeTakeFirst();
  return !!found;
}

/** The projects a runner is assigned to (owner project first) and its groups. */
export async function runnerOwners(db: Database, runnerId: number) {
  const [projects, groups] = await Promise.all([
    db.selectFrom('ci_runner_projects').select('project_id').where('runner_id', '=', runnerId).orderBy('id').execute(),
    db
      .selectFrom('ci_runner_namespaces as rn')
      .innerJoin('namespaces as n', 'n.id', 'rn.namespace_id')
      .select(['n.id', 'n.name', 'n.full_path'])
      .where('rn.runner_id', '=', runnerId)
      .orderBy('n.id')
      .execute(),
  ]);
  return { projectIds: projects.map((p) => p.project_id), groups };
}
