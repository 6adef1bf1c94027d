import type { Insertable } from 'kysely';
import type { Cairn } from '../context.js';
import type { ProjectsTable } from '../db/schema/core.js';
import { hashedDiskPath, initBareRepository, repositoryPath } from '../git/repository.js';
import { sql } from 'kysely';
import { transition } from '../db/state_machine.js';
import { MERGE_REQUEST_MACHINE } from '../db/work_item_states.js';
import type { Database } from '../db/index.js';
import type { Namespace, Project, User } from '../db/schema/core.js';
import { createRootCommit, hasRefs, rootReadme } from '../git/plumbing.js';
import { branchExists, setHead } from '../git/refs.js';
import { isValidBranchName } from '../git/validate.js';
import { scheduleRepositoryRemoval } from './repository_removal.js';
import { scheduleLfsPrune } from '../lfs/objects.js';
import { deleteProjectsSnippets } from './snippets.js';
import { storageRoot } from './storages.js';
import { pathError, pathFromName } from '../lib/paths.js';
import { AccessLevel, VISIBILITY_LEVELS, VISIBILITY_NAMES } from '../policies/access.js';
import { groupAccessLevel } from '../finders/access_levels.js';
import { ApiError, apiError, validationFailed } from '../plugins/errors.js';
import type { ProjectRow } from '../presenters/projects.js';
import { can, effectiveLevel, featureAvailable } from '../policies/abilities.js';
import { parseProjectSettings } from './project-settings.js';
import { createRegistrationToken } from '../ci/runners.js';
import { notify } from './notify.js';
import { protectDefaultBranch } from './default_branch_protection.js';

export type NewProject = Omit<Insertable<ProjectsTable>, 'disk_path'>;

export { storageRoot };

export function projectRepoPath(cairn: Pick<Cairn, 'config'>, project: { repository_storage: string; disk_path: string }): string {
  return repositoryPath(storageRoot(cairn, project.repository_storage), project.disk_path);
}

/**
 * Inserts the project and creates its bare repository inside one transaction: a failed
 * `git init` rolls the row back, and a crash before commit leaves only an unused directory
 * under a hashed path no row points to.
 */
export async function insertProject(
  cairn: Cairn,
  attrs: NewProject,
  opts: {
    /** Puts the repository in place instead of `git init` (a fork's, prepared beforehand), inside the same transaction. */
    repository?: (trx: Database, project: Project, gitDir: string) => Promise<void>;
  } = {},
) {
  return cairn.db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('projects')
      .values(attrs)
      .returningAll()
      .executeTakeFirstOrThrow();
    const diskPath = hashedDiskPath('project', inserted.id);
    const project = await trx.updateTable('projects').set({ disk_path: diskPath }).where('id', '=', inserted.id).returningAll().executeTakeFirstOrThrow();
    await createRegistrationToken(trx, cairn.config, { type: 'project_type', projectId: project.id });
    if (opts.repository) await opts.repository(trx, project, projectRepoPath(cairn, project));
    else await initBareRepository(projectRepoPath(cairn, project), project.default_branch ?? 'main');
    return project;
  });
}

// ---------------------------------------------------------------------------------------------
// Projects API: create, update, delete, transfer, stars.

export const NAME_RE = /^[\p{L}\p{N}_\p{Extended_Pictographic}][\p{L}\p{N}\p{Extended_Pictographic}\p{M}_.+\- ]*$/u;
export const NAME_MESSAGE = "can contain only letters, digits, emoji, '_', '.', '+', dashes, or spaces. It must start with a letter, digit, emoji, or '_'.";

/** Ruby's Hash#inspect of validation errors, as GitLab embeds it in some messages. */
export function rubyErrors(errors: Record<string, string[]>): string {
  return `{${Object.entries(errors).map(([k, v]) => `:${k}=>[${v.map((m) => JSON.stringify(m)).join(', ')}]`).join(', ')}}`;
}

function paramErrors(errors: string[]): ApiError {
  return new ApiError(400, { error: errors.join(', ') });
}

/** May `user` create projects in `ns` (GitLab's create_projects ability)? */
export async function canCreateProjectIn(db: Database, user: User, ns: Namespace): Promise<boolean> {
  if (user.admin) return true;
  if (ns.type === 'User') return ns.owner_id === user.id && user.projects_limit > 0;
  return can(user, 'create_projects', { group: ns, accessLevel: effectiveLevel(user, await groupAccessLevel(db, user.id, ns)) });
}

/** Is `path` free inside namespace `ns` (no project and no subgroup holds it)? */
export async function pathTaken(db: Database, ns: Namespace, path: string, exceptProjectId?: number) {
  const project = await db
    .selectFrom('projects')
    .select('id')
    .where('namespace_id', '=', ns.id)
    .where(sql`lower(path)`, '=', path.toLowerCase())
    .$if(exceptProjectId !== undefined, (q) => q.where('id', '<>', exceptProjectId!))
    .executeTakeFirst();
  if (project) return true;
  const group = await db.selectFrom('namespaces').select('id').where(sql`lower(full_path)`, '=', `${ns.full_path}/${path}`.toLowerCase()).executeTakeFirst();
  return !!group;
}

export async function nameTaken(db: Database, ns: Namespace, name: string, exceptProjectId?: number) {
  const row = await db
    .selectFrom('projects')
    .select('id')
    .where('namespace_id', '=', ns.id)
    .where(sql`lower(name)`, '=', name.toLowerCase())
    .$if(exceptProjectId !== undefined, (q) => q.where('id', '<>', exceptProjectId!))
    .executeTakeFirst();
  return !!row;
}

/** The default branch for new projects in `ns`: the nearest group setting, else main. */
async function namespaceDefaultBranch(db: Database, ns: Namespace): Promise<string> {
  if (ns.type !== 'Group') return 'main';
  const rows = await db.selectFrom('namespaces').select(['id', 'default_branch_name']).where('id', 'in', ns.traversal_ids).execute();
  const byId = new Map(rows.map((r) => [r.id, r.default_branch_name]));
  for (const id of [...ns.traversal_ids].reverse()) {
    const name = byId.get(id);
    if (name) return name;
  }
  return 'main';
}

function parseVisibility(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  const level = VISIBILITY_LEVELS[String(value)];
  if (level === undefined) throw paramErrors(['visibility does not have a valid value']);
  return level;
}

export function parseTopics(params: Record<string, unknown>): string[] | undefined {
  const raw = params.topics ?? params.tag_list;
  if (raw === undefined || raw === null) return undefined;
  const list = Array.isArray(raw) ? raw.map(String) : String(raw).split(',');
  return [...new Set(list.map((t) => t.trim()).filter(Boolean))];
}

function visibilityAllowedIn(ns: Namespace, level: number): string | null {
  if (ns.type === 'Group' && level > ns.visibility_level) {
    return `${VISIBILITY_NAMES[level]} is not allowed in a ${VISIBILITY_NAMES[ns.visibility_level]} group.`;
  }
  return null;
}

export interface CreateProjectInput {
  user: User;
  namespace: Namespace;
  params: Record<string, unknown>;
}

/**
 * POST /projects and /projects/user/:user_id. Validates like GitLab (name/path rules,
 * uniqueness in the namespace, visibility within the group's, creation rights), inserts the
 * row and bare repository, and with initialize_with_readme writes a first commit.
 */
export async function createProject(cairn: Cairn, input: CreateProjectInput): Promise<Project> {
  const { db } = cairn;
  const { user, namespace: ns, params } = input;
  const name = typeof params.name === 'string' ? params.name.trim() : undefined;
  const rawPath = typeof params.path === 'string' ? params.path.trim() : undefined;
  if (!name && !rawPath) throw new ApiError(400, { error: 'name, path are missing, at least one parameter must be provided' });
  if (params.import_url !== undefined && params.import_url !== null && params.import_url !== '') {
    throw validationFailed({ import_url: ['is not supported by this server'] });
  }
  const path = rawPath || pathFromName(name!);
  const projectName = name || rawPath!;

  const { settings, errors, modelErrors } = parseProjectSettings(params);
  const visibility = parseVisibility(params.visibility) ?? 0;
  if (errors.length) throw paramErrors(errors);

  if (!(await canCreateProjectIn(db, user, ns))) throw validationFailed({ namespace: ['is not valid'] });
  if (ns.type === 'User' && !user.admin) {
    const owned = await db.selectFrom('projects').select(sql<number>`count(*)::int`.as('n')).where('namespace_id', '=', ns.id).executeTakeFirstOrThrow();
    if (owned.n >= user.projects_limit) {
      throw new ApiError(403, { message: [`Your project limit is ${user.projects_limit} projects! Please contact your administrator to increase it`] });
    }
  }

  const problems: Record<string, string[]> = { ...modelErrors };
  const nameProblem = NAME_RE.test(projectName) ? null : NAME_MESSAGE;
  if (nameProblem) problems.name = [nameProblem];
  const pathProblem = pathError(path);
  if (pathProblem) problems.path = [pathProblem];
  if (!nameProblem && (await nameTaken(db, ns, projectName))) problems.name = ['has already been taken'];
  if (!pathProblem && (await pathTaken(db, ns, path))) problems.path = ['has already been taken'];
  const visibilityProblem = visibilityAllowedIn(ns, visibility);
  if (visibilityProblem) problems.visibility_level = [visibilityProblem];
  const defaultBranch = typeof params.default_branch === 'string' && params.default_branch ? params.default_branch : await namespaceDefaultBranch(db, ns);
  if (!isValidBranchName(defaultBranch)) problems.default_branch = ['is invalid'];
  if (Object.keys(problems).length) throw validationFailed(problems);

  const project = await insertProject(cairn, {
    name: projectName,
    path,
    namespace_id: ns.id,
    creator_id: user.id,
    description: typeof params.description === 'string' ? params.description : null,
    visibility_level: visibility,
    default_branch: defaultBranch,
    topics: parseTopics(params) ?? [],
    settings,
  });

  await grantCreatorMaintainer(db, user, ns, project);

  if (params.initialize_with_readme === true) {
    const content = `# ${projectName}\n\n${project.description ? project.description + '\n' : ''}`;
    await createRootCommit(projectRepoPath(cairn, project), {
      branch: defaultBranch,
      files: [{ path: 'README.md', content }],
      message: 'Initial commit',
      author: { name: user.name, email: user.commit_email || user.email },
    });
    await protectDefaultBranch(cairn, project.id);
    return db.updateTable('projects').set({ empty_repo: false, last_activity_at: new Date() }).where('id', '=', project.id).returningAll().executeTakeFirstOrThrow();
  }
  return project;
}

/**
 * A developer who creates a project (or a fork) in a group becomes its maintainer (GitLab's rule):
 * whoever the group does not already make able to administer it.
 */
export async function grantCreatorMaintainer(db: Database, user: User, ns: Namespace, project: Project): Promise<void> {
  if (ns.type !== 'Group' || user.admin) return;
  if (can(user, 'admin_project', { project, accessLevel: effectiveLevel(user, await groupAccessLevel(db, user.id, ns)) })) return;
  await db
    .insertInto('members')
    .values({ source_type: 'Project', source_id: project.id, user_id: user.id, access_level: AccessLevel.MAINTAINER, created_by_id: user.id })
    .onConflict((oc) => oc.columns(['source_type', 'source_id', 'user_id']).doNothing())
    .execute();
}

export interface UpdateProjectInput {
  user: User;
  project: ProjectRow;
  /** The caller's effective level on the project. */
  accessLevel: number;
  params: Record<string, unknown>;
}

/** PUT /projects/:id. Maintainers change settings; renames and visibility need the owner. */
export async function updateProject(cairn: Cairn, input: UpdateProjectInput): Promise<void> {
  const { db } = cairn;
  const { user, project, params, accessLevel } = input;
  const ns = project.namespace;
  const owner = can(user, 'owner_project', { project, accessLevel });
  const changes: Record<string, unknown> = {};

  const { settings, errors, modelErrors } = parseProjectSettings(params);
  const visibility = parseVisibility(params.visibility);
  if (errors.length) throw paramErrors(errors);

  const name = typeof params.name === 'string' ? params.name.trim() : undefined;
  const path = typeof params.path === 'string' ? params.path.trim() : undefined;
  if ((name !== undefined && name !== project.name) || (path !== undefined && path !== project.path)) {
    if (!owner) throw new ApiError(403, { message: '403 Forbidden' });
  }
  if (visibility !== undefined && visibility !== project.visibility_level && !owner) throw new ApiError(403, { message: '403 Forbidden' });

  const problems: Record<string, string[]> = { ...modelErrors };
  if (name !== undefined && name !== project.name) {
    if (!NAME_RE.test(name)) problems.name = [NAME_MESSAGE];
    else if (await nameTaken(db, ns, name, project.id)) problems.name = ['has already been taken'];
    else changes.name = name;
  }
  if (path !== undefined && path !== project.path) {
    const problem = pathError(path);
    if (problem) problems.path = [problem];
    else if (await pathTaken(db, ns, path, project.id)) problems.path = ['has already been taken'];
    else changes.path = path;
  }
  if (visibility !== undefined && visibility !== project.visibility_level) {
    const problem = visibilityAllowedIn(ns, visibility);
    if (problem) problems.visibility_level = [problem];
    else changes.visibility_level = visibility;
  }
  if (params.description !== undefined) changes.description = params.description === null ? null : String(params.description);
  const topics = parseTopics(params);
  if (topics) changes.topics = topics;

  const repo = projectRepoPath(cairn, project);
  let newHead: string | null = null;
  if (typeof params.default_branch === 'string' && params.default_branch !== project.default_branch) {
    const branch = params.default_branch;
    if (!isValidBranchName(branch)) problems.default_branch = ['is invalid'];
    else if ((await hasRefs(repo)) && !(await branchExists(cairn.catfile, repo, branch))) {
      throw apiError(400, `Could not change HEAD: branch '${branch}' does not exist`);
    } else {
      changes.default_branch = branch;
      newHead = branch;
    }
  }
  if (Object.keys(problems).length) throw validationFailed(problems);

  await db
    .updateTable('projects')
    .set({
      ...changes,
      ...(Object.keys(settings).length ? { settings: sql`settings || ${JSON.stringify(settings)}::jsonb` as any } : {}),
      updated_at: new Date(),
    })
    .where('id', '=', project.id)
    .execute();
  if (newHead) await setHead(repo, newHead);
}

/**
 * DELETE /projects/:id: removes the row (and, by cascade, everything hanging off it), the
 * project's memberships, then its repositories on disk. Synchronous; the API still answers
 * 202 like GitLab, whose deletion is queued.
 */
export async function deleteProject(cairn: Cairn, project: Project): Promise<void> {
  await deleteProjects(cairn, [project]);
}

export async function deleteProjects(cairn: Cairn, projects: Pick<Project, 'id' | 'repository_storage' | 'disk_path'>[]): Promise<void> {
  if (projects.length === 0) return;
  await cairn.db.transaction().execute((trx) => deleteProjectRows(trx, projects));
}

/**
 * Deletes the projects' rows and memberships and queues their repositories' removal, inside the
 * caller's transaction (DELETE answers 202 before the repositories leave the disk, as GitLab's does).
 */
export async function deleteProjectRows(trx: Database, projects: Pick<Project, 'id' | 'repository_storage' | 'disk_path'>[]): Promise<void> {
  if (projects.length === 0) return;
  const ids = projects.map((p) => p.id);
  // Open merge requests from a deleted fork into the rest of its network are closed, as GitLab's
  // unlink does (those into it go with it); their head refs stay in the target repository.
  await transition(trx, MERGE_REQUEST_MACHINE, (qb) => qb.where('source_project_id', 'in', ids).where('target_project_id', 'not in', ids), 'close', {
    set: { closed_at: new Date(), updated_at: new Date() },
  });
  await trx.deleteFrom('members').where('source_type', '=', 'Project').where('source_id', 'in', ids).execute();
  await trx.deleteFrom('notification_settings').where('source_type', '=', 'Project').where('source_id', 'in', ids).execute();
  await deleteProjectsSnippets(trx, ids);
  // Their LFS links go with the rows (cascade); objects nobody links then leave the store.
  await scheduleLfsPrune(trx, ids);
  await trx.deleteFrom('projects').where('id', 'in', ids).execute();
  await scheduleRepositoryRemoval(trx, projects);
}

/**
 * PUT /projects/:id/transfer. Repositories live under hashed paths, so nothing moves on disk.
 * A project more visible than its new group is lowered to the group's visibility (GitLab does the same).
 */
export async function transferProject(cairn: Cairn, user: User, project: ProjectRow, target: Namespace): Promise<void> {
  const { db } = cairn;
  const fail = (message: string) => apiError(400, `Failed to transfer project ${rubyErrors({ new_namespace: [message] })}`);
  if (target.id === project.namespace_id) throw fail('Project is already in this namespace.');
  if (!(await canCreateProjectIn(db, user, target))) throw fail('You don\'t have permission to transfer projects into that namespace.');
  if ((await pathTaken(db, target, project.path)) || (await nameTaken(db, target, project.name))) {
    throw fail('Project with same name or path in target namespace already exists');
  }
  const visibility = target.type === 'Group' ? Math.min(project.visibility_level, target.visibility_level) : project.visibility_level;
  await db.transaction().execute(async (trx) => {
    await trx.updateTable('projects').set({ namespace_id: target.id, visibility_level: visibility, updated_at: new Date() }).where('id', '=', project.id).execute();
    // A shared group link to the new parent group (or its ancestors) would be redundant.
    if (target.type === 'Group') await trx.deleteFrom('project_group_links').where('project_id', '=', project.id).where('group_id', 'in', target.traversal_ids).execute();
    await notify(cairn, trx, { action: 'moved_project', target: { type: 'Project', id: project.id }, actorId: user.id, oldPath: `${project.namespace.full_path}/${project.path}` });
  });
}

/**
 * The README path at the root of each readable project's default branch (null when there is
 * none). A project whose repository could not be read has no entry. Each path is kept in the
 * process cache (src/cache/): every ref change also writes the project's row (recordPush,
 * recordRefActivity), which drops it. `since` is the cache generation when the rows were read.
 */
export async function readmePaths(cairn: Cairn, rows: ProjectRow[], accessLevels: Map<number, number>, since?: number): Promise<Map<number, string | null>> {
  const out = new Map<number, string | null>();
  const queue = rows.filter((r) => featureAvailable({ project: r, accessLevel: accessLevels.get(r.id) ?? 0 }, 'repository'));
  const worker = async () => {
    for (let r = queue.shift(); r; r = queue.shift()) {
      const gitDir = projectRepoPath(cairn, r);
      const branch = r.default_branch ?? 'main';
      try {
        out.set(r.id, await cairn.cache.load(`readme:${r.id}:${gitDir}:${branch}`, () => rootReadme(cairn.catfile, gitDir, branch), { since }));
      } catch {
        // Shown as no README; the caller may choose not to keep such an answer.
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(4, queue.length) }, worker));
  return out;
}

/** Stars a project; false when it already was. */
export async function starProject(db: Database, userId: number, projectId: number): Promise<boolean> {
  const res = await db
    .insertInto('users_star_projects')
    .values({ user_id: userId, project_id: projectId })
    .onConflict((oc) => oc.columns(['user_id', 'project_id']).doNothing())
    .executeTakeFirst();
  return Number(res.numInsertedOrUpdatedRows ?? 0) > 0;
}

export async function unstarProject(db: Database, userId: number, projectId: number): Promise<boolean> {
  const res = await db.deleteFrom('users_star_projects').where('user_id', '=', userId).where('project_id', '=', projectId).executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

/**
 * After refs moved outside a push (API commits, branches, tags): the repository is not empty when
 * a branch was written, and the project shows activity, as GitLab's push events touch it. The
 * write also drops cached reads of the project (src/cache/), such as its README path.
 */
export async function recordRefActivity(db: Database, project: { id: number; empty_repo: boolean }, opts: { branchWritten?: boolean } = {}): Promise<void> {
  const notEmpty = opts.branchWritten && project.empty_repo;
  await db
    .updateTable('projects')
    .set({ last_activity_at: new Date(), ...(notEmpty ? { empty_repo: false } : {}) })
    .where('id', '=', project.id)
    .execute();
  if (notEmpty) project.empty_repo = false;
}

export async function setProjectArchived(db: Database, projectId: number, archived: boolean): Promise<void> {
  await db.updateTable('projects').set({ archived, updated_at: new Date() }).where('id', '=', projectId).execute();
}
