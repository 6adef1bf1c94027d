import crypto from 'node:crypto';
import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import type { ParsedCommit } from '../git/catfile.js';
import {
  commitStats,
  deleteRef,
  diffTrees,
  fetchCommitFrom,
  lastCommitForPath,
  listHistory,
  refsContaining,
  type CommitStats,
  type LogOptions,
} from '../git/commits.js';
import { branchExists, hasNoBranches, readCommits, readRef, resolveCommit, setHead } from '../git/refs.js';
import { EMPTY_TREE_OID, isOid, isValidBranchName, ZERO_OID } from '../git/validate.js';
import { buildCommit, checkWritablePath, writeActionBlobs, commitTree, compareAndSwapRef, mergeTrees, TreeActionError, type Identity, type TreeAction } from '../git/write.js';
import { assertCanPushToBranch, assertRepositoryWritable } from '../policies/code.js';
import { ApiError, apiError, forbidden, invalidParam, missingParam, notFound } from '../plugins/errors.js';
import { endRefJournal, journalRefUpdates, runPostReceiveHooks } from './post_receive.js';
import { refusesInitialPush } from './push_rules.js';
import { projectRepoPath, recordRefActivity } from './projects.js';

/**
 * Commits: reading history, creating commits from file actions (the commits and files APIs),
 * cherry-pick and revert. Branch updates are compare-and-swap; see createCommit for what
 * happens when two writers race. Commit comments are notes: services/notes.ts.
 */

export async function findCommit(cairn: Cairn, project: ProjectWithNamespace, rev: string): Promise<ParsedCommit | null> {
  return resolveCommit(cairn.catfile, projectRepoPath(cairn, project), rev);
}

export async function findCommitOrFail(cairn: Cairn, project: ProjectWithNamespace, rev: string): Promise<ParsedCommit> {
  const commit = await findCommit(cairn, project, rev);
  if (!commit) throw notFound('Commit');
  return commit;
}

export async function statsFor(cairn: Cairn, project: ProjectWithNamespace, commits: ParsedCommit[]): Promise<Map<string, CommitStats>> {
  return commitStats(projectRepoPath(cairn, project), commits);
}

/** One page of history and the number of commits in all of it. */
export async function listCommits(cairn: Cairn, project: ProjectWithNamespace, opts: LogOptions, page: { offset: number; limit: number }) {
  const gitDir = projectRepoPath(cairn, project);
  const { oids, total } = await listHistory(cairn.catfile, gitDir, opts, page);
  const byOid = await readCommits(cairn.catfile, gitDir, oids);
  const commits = oids.flatMap((oid) => byOid.get(oid) ?? []);
  return { commits, total };
}

export async function commitRefs(cairn: Cairn, project: ProjectWithNamespace, commit: ParsedCommit, type: 'branch' | 'tag' | 'all') {
  return refsContaining(projectRepoPath(cairn, project), commit.oid, type);
}

export async function commitDiff(cairn: Cairn, project: ProjectWithNamespace, commit: ParsedCommit) {
  return diffTrees(projectRepoPath(cairn, project), commit.parents[0] ?? null, commit.oid);
}

// ---------------------------------------------------------------------------------------------
// Creating commits

export interface ActionInput {
  action?: unknown;
  file_path?: unknown;
  previous_path?: unknown;
  content?: unknown;
  encoding?: unknown;
  last_commit_id?: unknown;
  execute_filemode?: unknown;
}

export interface CreateCommitInput {
  project: ProjectWithNamespace;
  user: User;
  accessLevel: number;
  branch: string;
  startBranch?: string | null;
  startSha?: string | null;
  /** Another project whose branch or commit the new commit starts from. */
  startProject?: ProjectWithNamespace | null;
  message: string;
  actions: ActionInput[];
  authorName?: string | null;
  authorEmail?: string | null;
  force?: boolean;
  /** The message when an action's last_commit_id is stale (the files API words it differently). */
  staleMessage?: (path: string, action: string) => string;
}

const ACTIONS = ['create', 'delete', 'move', 'update', 'chmod'];
const CAS_ATTEMPTS = 30;

function userIdentity(user: User): Identity {
  return { name: user.name || user.username, email: user.commit_email || user.email };
}

function decodeContent(a: ActionInput, index: number, maxBytes: number, path: string): Buffer | null {
  if (a.content === undefined || a.content === null) return null;
  const text = typeof a.content === 'string' ? a.content : String(a.content);
  let buf: Buffer;
  if (a.encoding === 'base64') {
    if (!/^[A-Za-z0-9+/=\s_-]*$/.test(text)) throw invalidParam(`actions[${index}][content]`, 'is not valid base64');
    buf = Buffer.from(text, 'base64');
  } else buf = Buffer.from(text, 'utf8');
  if (buf.length > maxBytes) {
    throw apiError(400, `File "${path}" is larger than the allowed size of ${Math.round((maxBytes / 1024 / 1024) * 100) / 100} MiB`);
  }
  return buf;
}

interface CheckedAction extends TreeAction {
  lastCommitId?: string;
}

/** Grape-level checks of the actions array, with Grape's wording. */
function checkActions(actions: ActionInput[] | undefined, maxBytes: number): CheckedAction[] {
  if (actions === undefined || actions === null) throw missingParam('actions');
  if (!Array.isArray(actions)) throw invalidParam('actions');
  if (!actions.length) throw new ApiError(400, { error: 'actions is empty' });
  return actions.map((a, i) => {
    if (!a || typeof a !== 'object') throw invalidParam(`actions[${i}]`);
    if (a.action === undefined || a.action === null || a.action === '') throw missingParam(`actions[${i}][action]`);
    if (typeof a.action !== 'string' || !ACTIONS.includes(a.action)) throw invalidParam(`actions[${i}][action]`, 'does not have a valid value');
    if (a.file_path === undefined || a.file_path === null) throw missingParam(`actions[${i}][file_path]`);
    if (a.encoding !== undefined && a.encoding !== null && a.encoding !== 'text' && a.encoding !== 'base64') {
      throw invalidParam(`actions[${i}][encoding]`, 'does not have a valid value');
    }
    const path = String(a.file_path);
    const kind = a.action as TreeAction['action'];
    let content = decodeContent(a, i, maxBytes, path);
    if ((kind === 'create' || kind === 'update') && content === null) content = Buffer.alloc(0);
    const exec = a.execute_filemode;
    return {
      action: kind,
      path,
      previousPath: a.previous_path === undefined || a.previous_path === null ? undefined : String(a.previous_path),
      content: kind === 'delete' || kind === 'chmod' ? null : content,
      executable: typeof exec === 'boolean' ? exec : kind === 'chmod' ? false : undefined,
      lastCommitId: a.last_commit_id === undefined || a.last_commit_id === null || a.last_commit_id === '' ? undefined : String(a.last_commit_id),
    };
  });
}

const defaultStale = (path: string) => `The file has changed since you started editing it: ${path}`;

async function notifyPush(cairn: Cairn, project: ProjectWithNamespace, user: User, ref: string, oldSha: string | null, newSha: string) {
  await recordRefActivity(cairn.db, project, { branchWritten: true });
  const event = { projectId: project.id, userId: user.id, changes: [{ ref, oldSha: oldSha ?? ZERO_OID, newSha }], pushOptions: [] };
  await runPostReceiveHooks(cairn, event);
}

/** After the first branch of an empty repository is created elsewhere than HEAD, HEAD follows it. */
async function adoptFirstBranch(cairn: Cairn, project: ProjectWithNamespace, gitDir: string, branch: string) {
  const def = project.default_branch ?? 'main';
  if (def === branch || (await branchExists(cairn.catfile, gitDir, def))) return;
  await setHead(gitDir, branch);
  await cairn.db.updateTable('projects').set({ default_branch: branch }).where('id', '=', project.id).execute();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Randomised exponential backoff after a lost compare-and-swap race. */
const backoff = (attempt: number) => sleep(Math.random() * Math.min(200, 5 * 2 ** attempt));

/**
 * Writers of one branch in this process take turns. This is only about throughput: without it
 * N simultaneous requests build N commits of which one wins each round. Correctness never
 * depends on it: other processes are not covered, and every ref update is compare-and-swap.
 */
const branchQueues = new Map<string, Promise<unknown>>();
async function inTurn<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const previous = branchQueues.get(key) ?? Promise.resolve();
  const run = previous.then(fn, fn);
  const tail = run.then(
    () => undefined,
    () => undefined,
  );
  branchQueues.set(key, tail);
  try {
    return await run;
  } finally {
    if (branchQueues.get(key) === tail) branchQueues.delete(key);
  }
}

/**
 * Creates one commit from file actions and moves `branch` to it, the way GitLab's
 * Commits::CreateService / Files::MultiService do.
 *
 * Races: the branch moves only by `update-ref <ref> <new> <old>`. When another writer moved it
 * first, every check (branch existence, start branch, each action's last_commit_id, file
 * existence) is redone against the new tip and the commit is rebuilt. So a request whose
 * last_commit_id went stale gets GitLab's "has changed" error, a create whose file appeared
 * gets "already exists", and independent edits both land; no update is ever lost. Only after
 * CAS_ATTEMPTS lost races does the caller see GitLab's "Could not update ... Please refresh".
 */
export async function createCommit(cairn: Cairn, input: CreateCommitInput): Promise<ParsedCommit> {
  const { project, user, branch } = input;
  const gitDir = projectRepoPath(cairn, project);
  const startProject = input.startProject ?? project;
  const crossProject = startProject.id !== project.id;
  const startDir = crossProject ? projectRepoPath(cairn, startProject) : gitDir;
  const startSha = input.startSha || null;
  const startBranch = input.startBranch || (startSha ? null : branch);
  const stale = input.staleMessage ?? defaultStale;
  const fail = (message: string) => apiError(400, message);

  assertRepositoryWritable(project);
  if (!isValidBranchName(branch)) throw fail(`Something went wrong when we tried to create '${branch}' for you: Branch name is invalid`);
  if (input.startBranch && !isValidBranchName(input.startBranch)) throw fail('You can only create or edit files when you are on a branch');
  const targetAtStart = await readRef(cairn.catfile, gitDir, `refs/heads/${branch}`);
  await assertCanPushToBranch(cairn.db, project, user, input.accessLevel, branch, { force: Boolean(input.force && targetAtStart) });
  if (!targetAtStart && (await refusesInitialPush(cairn, project, user, input.accessLevel))) throw forbidden('You are not allowed to push into this branch');
  if (!input.message) throw missingParam('commit_message');
  const actions = checkActions(input.actions, cairn.config.maxFileSize);
  try {
    for (const a of actions) {
      checkWritablePath(a.path);
      if (a.action === 'move' && a.previousPath !== undefined) checkWritablePath(a.previousPath);
    }
  } catch (e) {
    if (e instanceof TreeActionError) throw fail(e.message);
    throw e;
  }


  if (startSha && input.startBranch) throw fail("You can't pass both start_branch and start_sha");
  if (startSha && !isOid(startSha)) throw fail(`Invalid start_sha '${startSha}'`);
  if (startSha && !(await resolveCommit(cairn.catfile, startDir, startSha))) throw fail(`Cannot find start_sha '${startSha}'`);
  const different = startSha !== null || startBranch !== branch || crossProject;

  const committer = userIdentity(user);
  const author: Identity = { name: input.authorName || committer.name, email: input.authorEmail || committer.email };
  const tmpRef = crossProject ? `refs/tmp/cairn-start-${crypto.randomBytes(10).toString('hex')}` : null;
  const blobs = await writeActionBlobs(gitDir, actions);

  return inTurn(`${gitDir}\0${branch}`, async () => {
    try {
      for (let attempt = 1; ; attempt++) {
        const target = await readRef(cairn.catfile, gitDir, `refs/heads/${branch}`);
        let parent: string | null;
        if (startSha) parent = startSha;
        else {
          parent = startBranch === branch && !crossProject ? target : await readRef(cairn.catfile, startDir, `refs/heads/${startBranch}`);
          if (!parent && !(await hasNoBranches(startDir))) throw fail('You can only create or edit files when you are on a branch');
        }
        if (different && target && !input.force) {
          throw fail(`A branch called '${branch}' already exists. Switch to that branch in order to make changes`);
        }
        if (parent && crossProject) await fetchCommitFrom(gitDir, startDir, parent, tmpRef!);

        if (parent) {
          for (const a of actions) {
            if (!a.lastCommitId || !['update', 'move', 'delete'].includes(a.action)) continue;
            const path = a.previousPath ?? a.path;
            const last = await lastCommitForPath(gitDir, parent, path);
            if (last && last !== a.lastCommitId) throw fail(stale(path, a.action));
          }
        }

        let built: { commit: string };
        try {
          built = await buildCommit(gitDir, { parent, actions, message: input.message, author, committer, blobs });
        } catch (e) {
          if (e instanceof TreeActionError) throw fail(e.message);
          throw e;
        }
        const journal = await journalRefUpdates(cairn, project.id, user.id, [{ ref: `refs/heads/${branch}`, oldSha: target ?? ZERO_OID, newSha: built.commit }]);
        try {
          if (await compareAndSwapRef(gitDir, `refs/heads/${branch}`, built.commit, target)) {
            if (!target) await adoptFirstBranch(cairn, project, gitDir, branch);
            await notifyPush(cairn, project, user, `refs/heads/${branch}`, target, built.commit);
            return (await resolveCommit(cairn.catfile, gitDir, built.commit))!;
          }
        } finally {
          await endRefJournal(cairn, journal);
        }
        if (attempt >= CAS_ATTEMPTS) throw fail(`Could not update refs/heads/${branch}. Please refresh and try again.`);
        await backoff(attempt);
      }
    } finally {
      if (tmpRef) await deleteRef(gitDir, tmpRef);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Cherry-pick and revert

export interface PickInput {
  project: ProjectWithNamespace;
  user: User;
  accessLevel: number;
  commit: ParsedCommit;
  branch: string;
  dryRun: boolean;
  message?: string | null;
}

export type PickOutcome = { dryRun: true } | { dryRun: false; commit: ParsedCommit };

/**
 * The service's own failure (GitLab's CherryPickService/RevertService error result): on a dry
 * run the same body plus `dry_run: "error"`, as GitLab's API adds. Failures found before the
 * service runs (no such branch or commit, no push rights) are answered alike either way.
 */
function pickError(kind: 'cherry_pick' | 'revert', code: 'empty' | 'conflict', dryRun: boolean) {
  const act = kind === 'cherry_pick' ? 'cherry-pick' : 'revert';
  return new ApiError(400, {
    message: `Sorry, we cannot ${act} this commit automatically. This commit may already have been ${act}ed, or a more recent commit may have updated some of its content.`,
    error_code: code,
    ...(dryRun ? { dry_run: 'error' } : {}),
  });
}

/**
 * Applies a commit (cherry-pick) or its inverse (revert) on top of a branch: a three-way
 * merge of the branch tip with the commit over the right base, then a CAS branch update
 * (retried from the new tip when another writer got there first).
 */
export async function pickCommit(cairn: Cairn, kind: 'cherry_pick' | 'revert', input: PickInput): Promise<PickOutcome> {
  const { project, user, commit, branch } = input;
  const gitDir = projectRepoPath(cairn, project);
  if (!isValidBranchName(branch) || !(await readRef(cairn.catfile, gitDir, `refs/heads/${branch}`))) throw notFound('Branch');
  assertRepositoryWritable(project);
  await assertCanPushToBranch(cairn.db, project, user, input.accessLevel, branch);

  const parent = commit.parents[0] ? await resolveCommit(cairn.catfile, gitDir, commit.parents[0]) : null;
  const parentTree = parent ? parent.tree : null;
  const base = kind === 'cherry_pick' ? parentTree : commit.tree;
  const committer = userIdentity(user);
  const emptyTree = parentTree ?? EMPTY_TREE_OID;
  const theirs = kind === 'cherry_pick' ? commit.tree : emptyTree;

  return inTurn(`${gitDir}\0${branch}`, async (): Promise<PickOutcome> => {
    for (let attempt = 1; ; attempt++) {
      const tipOid = await readRef(cairn.catfile, gitDir, `refs/heads/${branch}`);
      if (!tipOid) throw notFound('Branch');
      const tip = (await resolveCommit(cairn.catfile, gitDir, tipOid))!;
      const merged = await mergeTrees(gitDir, base, tip.tree, theirs);
      if (merged.status !== 'ok') throw pickError(kind, merged.status, input.dryRun);
      if (input.dryRun) return { dryRun: true };
      let message: string;
      let author: Identity;
      if (kind === 'cherry_pick') {
        message = input.message || `${commit.message.replace(/\s+$/, '')}\n\n(cherry picked from commit ${commit.oid})`;
        author = { name: commit.author.name, email: commit.author.email, time: commit.author.time, tz: commit.author.tz };
      } else {
        message = input.message || `Revert "${commitTitleOf(commit)}"\n\nThis reverts commit ${commit.oid}`;
        author = committer;
      }
      const oid = await commitTree(gitDir, merged.tree!, [tipOid], message, author, committer);
      if (await compareAndSwapRef(gitDir, `refs/heads/${branch}`, oid, tipOid)) {
        await notifyPush(cairn, project, user, `refs/heads/${branch}`, tipOid, oid);
        return { dryRun: false, commit: (await resolveCommit(cairn.catfile, gitDir, oid))! };
      }
      if (attempt >= CAS_ATTEMPTS) throw apiError(400, `Could not update refs/heads/${branch}. Please refresh and try again.`);
      await backoff(attempt);
    }
  });
}

function commitTitleOf(c: ParsedCommit): string {
  return (c.message.split(/[\r\n]/, 1)[0] ?? '').trim();
}
