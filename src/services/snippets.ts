import crypto from 'node:crypto';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { Project, User } from '../db/schema/core.js';
import type { Snippet } from '../db/schema/snippets.js';
import { pathEntry } from '../git/commits.js';
import type { RefUpdate } from '../git/http.js';
import { initBareRepository, removeRepository, repositoryPath } from '../git/repository.js';
import { listTree, readBlob, readRef, resolveCommit } from '../git/refs.js';
import { isZeroOid } from '../git/validate.js';
import { buildCommit, checkWritablePath, compareAndSwapRef, TreeActionError, type Identity, type TreeAction } from '../git/write.js';
import { ApiError, notFound } from '../plugins/errors.js';
import { storageRoot } from './storages.js';
import { scheduleRepositoryRemoval } from './repository_removal.js';
import { deleteWorkItemDependents } from './work_items.js';

/**
 * Snippets and their repositories. Every snippet has a bare repository on a named storage
 * (`repository_storage`), at a hashed path under `@snippets/` (`disk_path`), whose default
 * branch holds its files; the row holds the title, description and visibility. API writes are
 * commits made without a work tree (git/write.ts), the branch moved by compare-and-swap.
 *
 * Order of writes: creation inserts the row and builds the repository inside one transaction
 * (a failure rolls the row back and removes the directory; a crash leaves at most a directory
 * no row points to, under a path never handed out again). Updates commit to the repository
 * while holding the row's lock, then write the row. Deletion removes the row and queues the
 * repository's removal in one transaction (services/repository_removal.ts).
 */

export const SNIPPET_DEFAULT_BRANCH = 'main';
const HEAD_REF = `refs/heads/${SNIPPET_DEFAULT_BRANCH}`;
/** GitLab's Snippet.max_file_limit. */
export const MAX_SNIPPET_FILES = 10;

/** Where a snippet's repository lives inside its storage (GitLab's hashed storage for snippets). */
export function snippetDiskPath(id: number): string {
  const hash = crypto.createHash('sha256').update(String(id)).digest('hex');
  return `@snippets/${hash.slice(0, 2)}/${hash.slice(2, 4)}/${hash}.git`;
}

/**
 * THE path of a snippet's repository, from its row (storage name + disk path). Everything that
 * touches a snippet's repository goes through this (a storage move changes the row only).
 */
export function snippetRepoPath(cairn: Cairn, snippet: Pick<Snippet, 'repository_storage' | 'disk_path'>): string {
  return repositoryPath(storageRoot(cairn, snippet.repository_storage), snippet.disk_path);
}

/** May a snippet file have this path (relative, no traversal, no `.git`, nothing git reads as an option)? */
export function validSnippetPath(p: string): boolean {
  try {
    checkWritablePath(p);
    return true;
  } catch (err) {
    if (err instanceof TreeActionError) return false;
    throw err;
  }
}

/** `{message: {error}}`: how GitLab's snippet services report a failed write. */
export function snippetError(status: number, error: string): ApiError {
  return new ApiError(status, { message: { error } });
}

function identityOf(user: User): Identity {
  return { name: user.name || user.username, email: user.commit_email || user.email };
}

// ---------------------------------------------------------------------------------------------
// Reading

/** The commit a snippet's files are read at: its default branch, or null for an empty repository. */
async function headOf(cairn: Cairn, gitDir: string): Promise<string | null> {
  return readRef(cairn.catfile, gitDir, HEAD_REF);
}

/** The paths of the snippet's files (blobs, any depth) at its default branch, in git's order. */
export async function snippetFiles(cairn: Cairn, snippet: Pick<Snippet, 'repository_storage' | 'disk_path'>): Promise<string[]> {
  const gitDir = snippetRepoPath(cairn, snippet);
  const head = await headOf(cairn, gitDir).catch(() => null);
  if (!head) return [];
  const entries = await listTree(cairn.catfile, gitDir, head, '', true).catch(() => null);
  return (entries ?? []).filter((e) => e.type === 'blob').map((e) => e.path);
}

/** Files of many snippets (a list page), by snippet id. */
export async function snippetFilesOf(cairn: Cairn, snippets: Pick<Snippet, 'id' | 'repository_storage' | 'disk_path'>[]): Promise<Map<number, string[]>> {
  const lists = await Promise.all(snippets.map((s) => snippetFiles(cairn, s)));
  return new Map(snippets.map((s, i) => [s.id, lists[i]]));
}

export interface SnippetBlob {
  path: string;
  content: Buffer;
}

/** The snippet's first file (what GET .../raw answers), or null when it has none. */
export async function firstSnippetFile(cairn: Cairn, snippet: Pick<Snippet, 'repository_storage' | 'disk_path'>): Promise<SnippetBlob | null> {
  const files = await snippetFiles(cairn, snippet);
  if (!files.length) return null;
  return readSnippetFile(cairn, snippet, SNIPPET_DEFAULT_BRANCH, files[0]);
}

/** A file of the snippet at a branch, tag or commit; 404 Reference / 404 File as GitLab answers. */
export async function readSnippetFile(cairn: Cairn, snippet: Pick<Snippet, 'repository_storage' | 'disk_path'>, ref: string, path: string): Promise<SnippetBlob> {
  const gitDir = snippetRepoPath(cairn, snippet);
  const commit = await resolveCommit(cairn.catfile, gitDir, ref);
  if (!commit) throw notFound('Reference');
  const entry = await pathEntry(cairn.catfile, gitDir, commit.oid, path);
  if (!entry || entry.type !== 'blob') throw notFound('File');
  const blob = await readBlob(cairn.catfile, gitDir, entry.oid);
  if (!blob) throw notFound('File');
  return { path, content: blob.data };
}

// ---------------------------------------------------------------------------------------------
// Writing

export interface SnippetFileInput {
  path: string;
  content: string;
}

export interface CreateSnippetInput {
  author: User;
  project: Pick<Project, 'id'> | null;
  title: string;
  description: string | null;
  visibilityLevel: number;
  files: SnippetFileInput[];
  userAgent: string | null;
  ipAddress: string | null;
}

/** A file named by no path gets GitLab's generated name (snippetfile1.txt, ...). */
function generatedName(used: Set<string>): string {
  for (let i = 1; ; i++) {
    const name = `snippetfile${i}.txt`;
    if (!used.has(name)) return name;
  }
}

function checkSize(cairn: Cairn, actions: TreeAction[]) {
  const max = cairn.config.maxFileSize;
  const total = actions.reduce((n, a) => n + (a.content?.length ?? 0), 0);
  if (total > max) {
    const mb = (n: number) => Math.round((n / 1024 / 1024) * 100) / 100;
    throw snippetError(400, `Content is too long (${mb(total)} MB). The maximum size is ${mb(max)} MB.`);
  }
}

/** Builds the commit that applies `actions` on `parent` and moves the default branch to it; false when the branch moved meanwhile. */
async function commitActions(cairn: Cairn, gitDir: string, parent: string | null, actions: TreeAction[], message: string, user: User): Promise<{ moved: boolean; files: number }> {
  const who = identityOf(user);
  const { commit } = await buildCommit(gitDir, { parent, actions, message, author: who, committer: who });
  const files = ((await listTree(cairn.catfile, gitDir, commit, '', true)) ?? []).filter((e) => e.type === 'blob').length;
  if (files > MAX_SNIPPET_FILES) throw new TreeActionError(`Snippets can't contain more than ${MAX_SNIPPET_FILES} files`);
  if (files === 0) throw new TreeActionError("Snippets can't be empty");
  return { moved: await compareAndSwapRef(gitDir, HEAD_REF, commit, parent), files };
}

/**
 * POST /snippets, POST /projects/:id/snippets: the row and its repository with the files as
 * the first commit, or nothing at all.
 */
export async function createSnippet(cairn: Cairn, input: CreateSnippetInput): Promise<Snippet> {
  const used = new Set(input.files.map((f) => f.path).filter(Boolean));
  const actions: TreeAction[] = input.files.map((f) => {
    const path = f.path || generatedName(used);
    used.add(path);
    return { action: 'create', path, content: Buffer.from(f.content, 'utf8') };
  });
  checkSize(cairn, actions);
  let gitDir: string | null = null;
  try {
    return await cairn.db.transaction().execute(async (trx) => {
      const inserted = await trx
        .insertInto('snippets')
        .values({
          title: input.title,
          description: input.description,
          author_id: input.author.id,
          project_id: input.project?.id ?? null,
          visibility_level: input.visibilityLevel,
          repository_storage: 'default',
          user_agent: input.userAgent,
          ip_address: input.ipAddress,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      const snippet = await trx
        .updateTable('snippets')
        .set({ disk_path: snippetDiskPath(inserted.id) })
        .where('id', '=', inserted.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      gitDir = snippetRepoPath(cairn, snippet);
      await initBareRepository(gitDir, SNIPPET_DEFAULT_BRANCH);
      try {
        const { moved } = await commitActions(cairn, gitDir, null, actions, 'Initial commit', input.author);
        if (!moved) throw new Error('the new snippet repository changed while it was being created');
      } catch (err) {
        if (err instanceof TreeActionError) throw snippetError(400, `Error creating the snippet - ${err.message}`);
        throw err;
      }
      return snippet;
    });
  } catch (err) {
    if (gitDir) await removeRepository(gitDir).catch(() => {});
    throw err;
  }
}

export interface UpdateSnippetInput {
  title?: string;
  description?: string | null;
  visibilityLevel?: number;
  /** File actions (create, update, delete, move), applied in order on the default branch. */
  actions?: { action: 'create' | 'update' | 'delete' | 'move'; path: string | null; previousPath: string | null; content: string | null }[];
  /** The deprecated single-file form: the one file's new name and/or content. */
  single?: { fileName?: string; content?: string };
}

const CAS_ATTEMPTS = 10;

/** The file actions of an update, against the files the snippet has now. */
function treeActionsFor(input: UpdateSnippetInput, current: string[]): TreeAction[] {
  if (input.single) {
    const first = current[0];
    const { fileName, content } = input.single;
    if (!first) return [{ action: 'create', path: fileName || 'snippetfile1.txt', content: Buffer.from(content ?? '', 'utf8') }];
    const target = fileName || first;
    const data = content === undefined ? null : Buffer.from(content, 'utf8');
    if (target !== first) return [{ action: 'move', path: target, previousPath: first, content: data }];
    return data ? [{ action: 'update', path: first, content: data }] : [];
  }
  const used = new Set(current);
  return (input.actions ?? []).map((a): TreeAction => {
    const content = a.content === null ? null : Buffer.from(a.content, 'utf8');
    switch (a.action) {
      case 'create': {
        const path = a.path || generatedName(used);
        used.add(path);
        return { action: 'create', path, content: content ?? Buffer.alloc(0) };
      }
      case 'update':
        return { action: 'update', path: a.path ?? '', content: content ?? Buffer.alloc(0) };
      case 'delete':
        return { action: 'delete', path: a.path ?? '' };
      case 'move':
        return { action: 'move', path: a.path ?? '', previousPath: a.previousPath ?? undefined, content };
    }
  });
}

/**
 * PUT /snippets/:id, PUT /projects/:id/snippets/:snippet_id. The row is locked for the whole
 * update, so two updates of one snippet (in any process) take turns; a push that moves the
 * branch meanwhile makes the commit be rebuilt on the new tip.
 */
export async function updateSnippet(cairn: Cairn, snippet: Snippet, user: User, input: UpdateSnippetInput): Promise<Snippet> {
  return cairn.db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('snippets').selectAll().where('id', '=', snippet.id).forUpdate().executeTakeFirst();
    if (!row) throw notFound('Snippet');
    if (row.repository_read_only) throw snippetError(400, 'Error updating the snippet - The repository is temporarily read-only. Please try again later.');
    const gitDir = snippetRepoPath(cairn, row);
    let changedFiles = false;
    if (input.single || input.actions?.length) {
      for (let attempt = 0; ; attempt++) {
        const head = await headOf(cairn, gitDir);
        const actions = treeActionsFor(input, await snippetFiles(cairn, row));
        if (!actions.length) break;
        checkSize(cairn, actions);
        let moved: boolean;
        try {
          ({ moved } = await commitActions(cairn, gitDir, head, actions, 'Update snippet', user));
        } catch (err) {
          if (err instanceof TreeActionError) throw snippetError(400, `Error updating the snippet - ${err.message}`);
          throw err;
        }
        if (moved) {
          changedFiles = true;
          break;
        }
        if (attempt + 1 >= CAS_ATTEMPTS) throw snippetError(409, 'Error updating the snippet - the repository changed meanwhile, please try again');
      }
    }
    const changes: Partial<Pick<Snippet, 'title' | 'description' | 'visibility_level'>> = {};
    if (input.title !== undefined) changes.title = input.title;
    if (input.description !== undefined) changes.description = input.description;
    if (input.visibilityLevel !== undefined) changes.visibility_level = input.visibilityLevel;
    if (!changedFiles && !Object.keys(changes).length) return row;
    return trx.updateTable('snippets').set({ ...changes, updated_at: new Date() }).where('id', '=', row.id).returningAll().executeTakeFirstOrThrow();
  });
}

/**
 * Deletes snippets' rows and what hangs off them (notes, awards, subscriptions), and queues
 * their repositories' removal, inside the caller's transaction.
 */
export async function deleteSnippetRows(trx: Database, snippets: Pick<Snippet, 'id' | 'repository_storage' | 'disk_path'>[]): Promise<void> {
  if (!snippets.length) return;
  for (const s of snippets) await deleteWorkItemDependents(trx, 'Snippet', s.id);
  await trx.deleteFrom('snippets').where('id', 'in', snippets.map((s) => s.id)).execute();
  await scheduleRepositoryRemoval(trx, snippets);
}

/** DELETE /snippets/:id and DELETE /projects/:id/snippets/:snippet_id. */
export async function deleteSnippet(cairn: Cairn, snippet: Snippet): Promise<void> {
  await cairn.db.transaction().execute((trx) => deleteSnippetRows(trx, [snippet]));
}

/** In the transaction that deletes these projects: their snippets go too. */
export async function deleteProjectsSnippets(trx: Database, projectIds: number[]): Promise<void> {
  if (!projectIds.length) return;
  const rows = await trx.selectFrom('snippets').select(['id', 'repository_storage', 'disk_path']).where('project_id', 'in', projectIds).execute();
  await deleteSnippetRows(trx, rows);
}

/** In the transaction that deletes a user: every snippet they wrote goes too (GitLab's Users::DestroyService). */
export async function deleteAuthorSnippets(trx: Database, userId: number): Promise<void> {
  const rows = await trx.selectFrom('snippets').select(['id', 'repository_storage', 'disk_path']).where('author_id', '=', userId).execute();
  await deleteSnippetRows(trx, rows);
}

// ---------------------------------------------------------------------------------------------
// Pushes over HTTP

export const SNIPPET_PUSH_MESSAGE = 'You can not create or delete branches.';

/**
 * GitLab's snippet push check: only the default branch may be updated; creating or deleting a
 * branch, and any other ref (tags), are refused. Returns the refused refs with the reason.
 */
export function checkSnippetRefUpdates(updates: RefUpdate[]): Map<string, string> {
  const refusals = new Map<string, string>();
  for (const u of updates) {
    if (u.ref !== HEAD_REF || isZeroOid(u.oldSha) || isZeroOid(u.newSha)) refusals.set(u.ref, SNIPPET_PUSH_MESSAGE);
  }
  return refusals;
}

/** After a push that moved the snippet's branch: the snippet shows the change (updated_at). */
export async function recordSnippetPush(cairn: Cairn, snippet: Pick<Snippet, 'id' | 'repository_storage' | 'disk_path'>, updates: RefUpdate[]): Promise<void> {
  const head = await headOf(cairn, snippetRepoPath(cairn, snippet));
  if (!updates.some((u) => u.ref === HEAD_REF && u.newSha === head)) return;
  await cairn.db.updateTable('snippets').set({ updated_at: sql`now()` as any }).where('id', '=', snippet.id).execute();
}
