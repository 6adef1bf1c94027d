import crypto from 'node:crypto';
import { linkForkLfsObjects } from '../lfs/objects.js';
import { sql } from 'kysely';
import { transition } from '../db/state_machine.js';
import { MERGE_REQUEST_MACHINE } from '../db/work_item_states.js';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { Namespace, Project, User } from '../db/schema/core.js';
import { forkMemberOf } from '../finders/forks.js';
import { projectFullName, type ProjectWithNamespace } from '../finders/projects.js';
import { hasRefs } from '../git/plumbing.js';
import { branchExists } from '../git/refs.js';
import { cloneRepositoryForFork, moveRepository, removeRepository, repositoryPath } from '../git/repository.js';
import { isValidBranchName } from '../git/validate.js';
import { pathError } from '../lib/paths.js';
import { Visibility, VISIBILITY_LEVELS } from '../policies/access.js';
import { apiError, notFound, validationFailed } from '../plugins/errors.js';
import {
  grantCreatorMaintainer, insertProject, NAME_MESSAGE, NAME_RE, nameTaken, pathTaken, projectRepoPath, storageRoot,
} from './projects.js';

/**
 * Forks (GitLab's Projects::ForkService and UnlinkForkService). A fork is a new project whose
 * repository is a copy of the source's (see cloneRepositoryForFork for why a hardlinked clone),
 * joined to the source's fork network. Done synchronously: a local clone takes milliseconds, so
 * the answer already has import_status "finished".
 *
 * Order, so that a crash leaves nothing half made: the repository is cloned into a temporary
 * directory on the source's storage first; then one transaction inserts the project row and its
 * network membership and renames the clone into the project's hashed path. Before the rename
 * only a temporary directory exists (removed on failure); after it, the directory belongs to a
 * row that either commits or, if the transaction is lost, to an id no row will ever have.
 */

export interface ForkParams {
  name?: string;
  path?: string;
  description?: string | null;
  visibility?: string;
  /** Fork only this branch (GitLab's `branches`); it becomes the fork's default branch. */
  branches?: string;
  mr_default_target_self?: boolean;
}

/** Settings a fork takes from its source (GitLab copies the feature access levels and CI settings). */
function inheritedSettings(source: Project): Record<string, unknown> {
  const settings = (source.settings ?? {}) as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(settings)) {
    if (key.endsWith('_access_level') || ['ci_config_path', 'shared_runners_enabled', 'ci_default_git_depth'].includes(key)) out[key] = value;
  }
  return out;
}

/**
 * Joins `forkId` to the fork network of `sourceId` (making one, rooted at the source, when the
 * source is in none), inside the caller's transaction. Two first forks at once meet on the
 * network's unique root.
 */
async function joinForkNetwork(trx: Database, sourceId: number, forkId: number): Promise<void> {
  let source = await forkMemberOf(trx, sourceId);
  if (!source) {
    await trx.insertInto('fork_networks').values({ root_project_id: sourceId }).onConflict((oc) => oc.column('root_project_id').doNothing()).execute();
    const network = await trx.selectFrom('fork_networks').select('id').where('root_project_id', '=', sourceId).executeTakeFirstOrThrow();
    await trx
      .insertInto('fork_network_members')
      .values({ project_id: sourceId, fork_network_id: network.id, forked_from_project_id: null })
      .onConflict((oc) => oc.column('project_id').doNothing())
      .execute();
    source = (await forkMemberOf(trx, sourceId))!;
  }
  await trx.insertInto('fork_network_members').values({ project_id: forkId, fork_network_id: source.fork_network_id, forked_from_project_id: sourceId }).execute();
}

/** POST /projects/:id/fork into `namespace` (the route checked that the caller may fork the source and create there). */
export async function forkProject(cairn: Cairn, input: { user: User; source: ProjectWithNamespace; namespace: Namespace; params: ForkParams }): Promise<Project> {
  const { db } = cairn;
  const { user, source, namespace, params } = input;
  const name = params.name !== undefined ? params.name.trim() : source.name;
  const path = params.path !== undefined ? params.path.trim() : source.path;

  const sourceDir = projectRepoPath(cairn, source);
  let branch: string | undefined;
  if (params.branches !== undefined && params.branches !== '') {
    branch = params.branches;
    if (!isValidBranchName(branch) || !(await branchExists(cairn.catfile, sourceDir, branch))) throw notFound('Source Branch');
  }

  // GitLab answers every model error of a fork with 409 and the errors by attribute.
  const problems: Record<string, string[]> = {};
  if (!name) problems.name = ["can't be blank"];
  else if (!NAME_RE.test(name)) problems.name = [NAME_MESSAGE];
  else if (await nameTaken(db, namespace, name)) problems.name = ['has already been taken'];
  const pathProblem = pathError(path);
  if (pathProblem) problems.path = [pathProblem];
  else if (await pathTaken(db, namespace, path)) problems.path = ['has already been taken'];
  if (namespace.type === 'User' && !user.admin) {
    const owned = await db.selectFrom('projects').select(sql<number>`count(*)::int`.as('n')).where('namespace_id', '=', namespace.id).executeTakeFirstOrThrow();
    if (owned.n >= user.projects_limit) problems.limit_reached = [`Your project limit is ${user.projects_limit} projects! Please contact your administrator to increase it`];
  }
  if (Object.keys(problems).length) throw validationFailed(problems, 409);

  // Never more visible than the source, nor than a group it goes into; `visibility` may only lower it.
  let visibility = source.visibility_level;
  if (namespace.type === 'Group') visibility = Math.min(visibility, namespace.visibility_level);
  if (params.visibility !== undefined) visibility = Math.min(visibility, VISIBILITY_LEVELS[params.visibility] ?? Visibility.PRIVATE);

  const headBranch = branch ?? source.default_branch ?? 'main';
  const tmp = repositoryPath(storageRoot(cairn, source.repository_storage), `@tmp/fork-${crypto.randomUUID()}.git`);
  try {
    await cloneRepositoryForFork(sourceDir, tmp, { branch, headBranch });
    const empty = !(await hasRefs(tmp));
    const fork = await insertProject(
      cairn,
      {
        name,
        path,
        namespace_id: namespace.id,
        creator_id: user.id,
        description: params.description !== undefined ? params.description : source.description,
        visibility_level: visibility,
        default_branch: headBranch,
        topics: [],
        repository_storage: source.repository_storage,
        empty_repo: empty,
        settings: {
          ...inheritedSettings(source),
          ...(params.mr_default_target_self !== undefined ? { mr_default_target_self: params.mr_default_target_self } : {}),
          import_status: 'finished',
        },
      },
      {
        repository: async (trx, project, gitDir) => {
          await joinForkNetwork(trx, source.id, project.id);
          await linkForkLfsObjects(trx, source.id, project.id);
          await moveRepository(tmp, gitDir);
        },
      },
    );
    await grantCreatorMaintainer(db, user, namespace, fork);
    return fork;
  } finally {
    // Gone after a successful rename; what a failure left behind otherwise.
    await removeRepository(tmp);
  }
}

/**
 * POST /projects/:id/fork/:forked_from_id: records that an existing project is a fork of
 * another. 409 when it already is a fork; 400 when it is the root of a network of its own (its
 * forks would be torn from it) or is the source itself.
 */
export async function linkFork(db: Database, project: Project, source: Project): Promise<void> {
  if (project.id === source.id) throw apiError(400, 'Project cannot be a fork of itself');
  const member = await forkMemberOf(db, project.id);
  if (member?.forked_from_project_id != null) throw apiError(409, 'Project already forked');
  if (member) throw apiError(400, 'Project is the root of a fork network of its own');
  try {
    await db.transaction().execute((trx) => joinForkNetwork(trx, source.id, project.id));
  } catch (e) {
    // Linked by someone else meanwhile (the member's primary key).
    if ((e as { code?: string }).code === '23505') throw apiError(409, 'Project already forked');
    throw e;
  }
}

/**
 * DELETE /projects/:id/fork (GitLab's UnlinkForkService): open merge requests between the project
 * and the rest of its network are closed, the project leaves the network, its direct forks
 * forget it as their parent, and a network it was the root of lives on without a root. False
 * when the project is in no network (the route answers 304).
 */
export async function unlinkFork(cairn: Cairn, project: ProjectWithNamespace, user: User): Promise<boolean> {
  const member = await forkMemberOf(cairn.db, project.id);
  if (!member) return false;
  await cairn.db.transaction().execute(async (trx) => {
    await transition(trx, MERGE_REQUEST_MACHINE, (qb) => qb.where((eb: any) => eb.or([
      eb.and([eb('source_project_id', '=', project.id), eb('target_project_id', '<>', project.id)]),
      eb.and([eb('target_project_id', '=', project.id), eb('source_project_id', '<>', project.id)]),
    ])), 'close', { set: { closed_at: new Date(), closed_by_id: user.id, updated_at: new Date() } });
    await trx.deleteFrom('fork_network_members').where('project_id', '=', project.id).execute();
    await trx.updateTable('fork_network_members').set({ forked_from_project_id: null, updated_at: new Date() }).where('forked_from_project_id', '=', project.id).execute();
    await trx
      .updateTable('fork_networks')
      .set({ root_project_id: null, deleted_root_project_name: projectFullName(project), updated_at: new Date() })
      .where('root_project_id', '=', project.id)
      .execute();
  });
  return true;
}

