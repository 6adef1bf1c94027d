import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import { listRefs, readCommits, readRef, RefUpdateConflict, resolveCommit, setHead, updateRef } from '../git/refs.js';
import { isValidBranchName, ZERO_OID } from '../git/validate.js';
import { apiError, ApiError, forbidden, notFound } from '../plugins/errors.js';
import { can } from '../policies/abilities.js';
import { developersCan, groupGrantCheck, projectProtection, protectionOf, pushDecision, type BranchProtection, type GroupGrantCheck } from '../policies/branches.js';
import { assertRepositoryWritable } from '../policies/code.js';
import type { BranchView } from '../presenters/branches.js';
import { mergedInto } from '../git/commits.js';
import { endRefJournal, journalRefUpdates, runPostReceiveHooks } from './post_receive.js';
import { projectRepoPath, recordRefActivity } from './projects.js';

export interface Caller {
  user: User | null;
  accessLevel: number;
}

/** GitLab's branch search: `^prefix`, `suffix$`, `^exact$`, else a substring; case-insensitive. */
export function matchesSearch(name: string, search: string | undefined): boolean {
  if (!search) return true;
  const n = name.toLowerCase();
  let s = search.toLowerCase();
  const prefix = s.startsWith('^');
  const suffix = s.endsWith('$');
  if (prefix) s = s.slice(1);
  if (suffix) s = s.slice(0, -1);
  if (prefix && suffix) return n === s;
  if (prefix) return n.startsWith(s);
  if (suffix) return n.endsWith(s);
  return n.includes(s);
}

/** A project's protection rules, through the cache (read for every branch listing). */
function cachedProtection(cairn: Cairn, projectId: number): Promise<BranchProtection> {
  return cairn.cache.load(`protection:${projectId}`, () => projectProtection(cairn.db, projectId));
}

async function views(cairn: Cairn, project: ProjectWithNamespace, caller: Caller, refs: { name: string; oid: string }[]): Promise<BranchView[]> {
  const gitDir = projectRepoPath(cairn, project);
  const [protection, commits, merged] = await Promise.all([
    cachedProtection(cairn, project.id),
    readCommits(cairn.catfile, gitDir, refs.map((r) => r.oid)),
    mergedNames(cairn, project, refs),
  ]);
  // One check of the caller's groups for every branch's group grants.
  const inGroup = caller.user ? groupGrantCheck(cairn.db, caller.user.id, protection.levels) : undefined;
  const out: BranchView[] = [];
  for (const ref of refs) {
    const commit = commits.get(ref.oid);
    if (!commit) continue;
    out.push(await branchView(cairn, project, caller, protection, ref.name, commit, merged.has(ref.name), inGroup));
  }
  return out;
}

async function branchView(
  cairn: Cairn,
  project: ProjectWithNamespace,
  caller: Caller,
  all: BranchProtection,
  name: string,
  commit: BranchView['commit'],
  merged: boolean,
  inGroup?: GroupGrantCheck,
): Promise<BranchView> {
  const own = protectionOf(all, name);
  const canPush = caller.user ? (await pushDecision(cairn.db, own, caller.user, { project, accessLevel: caller.accessLevel }, {}, inGroup)).allowed : false;
  return {
    name,
    commit,
    merged,
    protected: own.rules.length > 0,
    developersCanPush: developersCan(own, 'push'),
    developersCanMerge: developersCan(own, 'merge'),
    canPush,
    isDefault: name === project.default_branch,
  };
}

/** The names among `refs` (other than the default branch) whose tip the default branch reaches. */
async function mergedNames(cairn: Cairn, project: ProjectWithNamespace, refs: { name: string; oid: string }[]): Promise<Set<string>> {
  const others = refs.filter((r) => r.name !== project.default_branch);
  if (!others.length || !project.default_branch) return new Set();
  const gitDir = projectRepoPath(cairn, project);
  const target = await readRef(cairn.catfile, gitDir, `refs/heads/${project.default_branch}`);
  if (!target) return new Set();
  const merged = await mergedInto(gitDir, target, others.map((r) => r.oid));
  return new Set(others.filter((r) => merged.has(r.oid)).map((r) => r.name));
}

export type BranchSort = 'name_asc' | 'updated_asc' | 'updated_desc';

export async function listBranches(cairn: Cairn, project: ProjectWithNamespace, caller: Caller, opts: { search?: string; sort?: BranchSort }): Promise<BranchView[]> {
  const refs = (await listRefs(projectRepoPath(cairn, project), 'refs/heads/')).filter((r) => matchesSearch(r.name, opts.search));
  const list = await views(cairn, project, caller, refs);
  const sort = opts.sort ?? 'name_asc';
  if (sort !== 'name_asc') {
    const dir = sort === 'updated_asc' ? 1 : -1;
    list.sort((a, b) => (a.commit.committer.time - b.commit.committer.time) * dir || (a.name < b.name ? -1 : 1));
  }
  return list;
}

/** One branch by name, or 404 Branch Not Found. */
export async function findBranch(cairn: Cairn, project: ProjectWithNamespace, caller: Caller, name: string): Promise<BranchView> {
  const gitDir = projectRepoPath(cairn, project);
  const oid = await readRef(cairn.catfile, gitDir, `refs/heads/${name}`);
  if (!oid) throw notFound('Branch');
  const [view] = await views(cairn, project, caller, [{ name, oid }]);
  if (!view) throw notFound('Branch');
  return view;
}

async function assertCanPush(cairn: Cairn, project: ProjectWithNamespace, caller: Caller, branch: string) {
  if (!caller.user) throw forbidden();
  const all = await projectProtection(cairn.db, project.id);
  const decision = await pushDecision(cairn.db, protectionOf(all, branch), caller.user, { project, accessLevel: caller.accessLevel });
  if (!decision.allowed) throw forbidden('You are not allowed to push into this branch');
}

export async function createBranch(cairn: Cairn, project: ProjectWithNamespace, caller: Caller, name: string, ref: string): Promise<BranchView> {
  assertRepositoryWritable(project);
  await assertCanPush(cairn, project, caller, name);
  if (!isValidBranchName(name)) throw apiError(400, 'Branch name is invalid');
  const gitDir = projectRepoPath(cairn, project);
  if (await readRef(cairn.catfile, gitDir, `refs/heads/${name}`)) throw apiError(400, 'Branch already exists');
  const target = await resolveCommit(cairn.catfile, gitDir, ref);
  if (!target) throw apiError(400, `Invalid reference name: ${ref}`);
  const journal = await journalRefUpdates(cairn, project.id, caller.user?.id ?? null, [{ ref: `refs/heads/${name}`, oldSha: ZERO_OID, newSha: target.oid }]);
  try {
    try {
      await updateRef(gitDir, `refs/heads/${name}`, target.oid, ZERO_OID, 'branch: created through the API');
    } catch (e) {
      if (e instanceof RefUpdateConflict) throw apiError(400, 'Branch already exists');
      throw e;
    }
    await recordRefActivity(cairn.db, project, { branchWritten: true });
    await runPostReceiveHooks(cairn, { projectId: project.id, userId: caller.user?.id ?? null, changes: [{ ref: `refs/heads/${name}`, oldSha: ZERO_OID, newSha: target.oid }], pushOptions: [] });
  } finally {
    await endRefJournal(cairn, journal);
  }
  return findBranch(cairn, project, caller, name);
}

export async function deleteBranch(cairn: Cairn, project: ProjectWithNamespace, caller: Caller, name: string): Promise<void> {
  assertRepositoryWritable(project);
  const gitDir = projectRepoPath(cairn, project);
  const oid = await readRef(cairn.catfile, gitDir, `refs/heads/${name}`);
  if (!oid) throw notFound('Branch');
  if (name === project.default_branch) throw apiError(405, 'The default branch of a project cannot be deleted.');
  const own = protectionOf(await projectProtection(cairn.db, project.id), name);
  if (own.rules.length) {
    // Protected branches go only through the API/web, and only for maintainers.
    if (!can(caller.user, 'delete_protected_branch', { project, accessLevel: caller.accessLevel })) {
      throw forbidden('You are not allowed to delete protected branches from this project. Only a project maintainer or owner can delete a protected branch.');
    }
  } else {
    await assertCanPush(cairn, project, caller, name);
  }
  try {
    await updateRef(gitDir, `refs/heads/${name}`, ZERO_OID, oid, 'branch: deleted through the API');
  } catch (e) {
    if (e instanceof RefUpdateConflict) throw apiError(409, 'Branch was changed while it was being deleted; try again');
    throw e;
  }
  await recordRefActivity(cairn.db, project);
}

/**
 * Deletes every branch merged into the default branch, except the default branch and
 * protected ones (what GitLab's delete-merged-branches worker does).
 */
export async function deleteMergedBranches(cairn: Cairn, project: ProjectWithNamespace, caller: Caller): Promise<string[]> {
  assertRepositoryWritable(project);
  if (!can(caller.user, 'push_code', { project, accessLevel: caller.accessLevel })) throw forbidden();
  const gitDir = projectRepoPath(cairn, project);
  const target = project.default_branch ? await readRef(cairn.catfile, gitDir, `refs/heads/${project.default_branch}`) : null;
  if (!target) return [];
  const all = await projectProtection(cairn.db, project.id);
  const merged = await listRefs(gitDir, 'refs/heads/', { mergedInto: target });
  const deleted: string[] = [];
  for (const ref of merged) {
    if (ref.name === project.default_branch || protectionOf(all, ref.name).rules.length) continue;
    try {
      await updateRef(gitDir, `refs/heads/${ref.name}`, ZERO_OID, ref.oid, 'branch: deleted as merged');
      deleted.push(ref.name);
    } catch (e) {
      // A branch that moved since the listing is no longer known to be merged: keep it.
      if (!(e instanceof RefUpdateConflict)) throw e;
    }
  }
  if (deleted.length) await recordRefActivity(cairn.db, project);
  return deleted;
}

/**
 * Makes `branch` the default: HEAD of the repository and projects.default_branch. The
 * branch must exist unless the repository is still empty.
 */
export async function setDefaultBranch(cairn: Cairn, project: ProjectWithNamespace, branch: string): Promise<void> {
  assertRepositoryWritable(project);
  const gitDir = projectRepoPath(cairn, project);
  if (!isValidBranchName(branch)) throw apiError(400, 'Branch name is invalid');
  const exists = await readRef(cairn.catfile, gitDir, `refs/heads/${branch}`);
  const anyBranch = (await listRefs(gitDir, 'refs/heads/')).length > 0;
  if (!exists && anyBranch) throw new ApiError(400, { message: { base: [`Could not change HEAD: branch '${branch}' does not exist`] } });
  await setHead(gitDir, branch);
  await cairn.db.updateTable('projects').set({ default_branch: branch, updated_at: new Date() }).where('id', '=', project.id).execute();
  project.default_branch = branch;
}

