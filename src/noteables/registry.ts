import type { TSchema } from 'typebox';
import type { Cairn } from '../context.js';
import type { NoteableScope, NoteableType } from '../finders/notes.js';
import type { GroupAbility, ProjectAbility } from '../policies/abilities.js';
import type { GroupAccess } from '../policies/groups.js';
import type { ProjectAccess } from '../policies/projects.js';
import type { DiffPosition } from '../db/schema/notes.js';

/**
 * Noteables: what people comment on (commits, issues, merge requests, snippets, epics). Each
 * kind registers ONCE, with one object, and src/api/notes/routes.ts serves every operation of
 * the discussions and notes APIs under its prefix (list, get, create thread, reply, edit,
 * resolve, delete; the plain Notes API), with one implementation for all of them.
 *
 * Adding a kind (say issues) is: write its registration, and add it to NOTEABLES in
 * ./index.ts. Nothing else:
 *
 *   export const issueNoteable = defineNoteable({
 *     type: 'Issue',                                  // noteable_type, as GitLab writes it
 *     parent: 'project',                              // the `:id` of the prefix: 'project' or 'group'
 *     prefix: '/projects/:id/issues/:issue_iid',      // below /api/v4
 *     params: { issue_iid: RowId },                   // the noteable's own path parameters
 *     abilities: {                                    // project (or group) abilities, checked with can()
 *       read: 'read_issue', create: 'create_note', admin: 'admin_note', setCreatedAt: 'set_note_created_at',
 *     },
 *     async find({ cairn, access, params }) {         // 404 when it is not there or not visible to access.user
 *       const issue = await findIssueOrFail(cairn, access, params.issue_iid);
 *       return { record: issue, iid: issue.iid, scope: { type: 'Issue', projectId: access.project.id, key: { column: 'noteable_id', value: issue.id } } };
 *     },
 *   });
 *
 * The route guard loads the parent for the caller first (404 when they may not see it, 403
 * without `read`; `create` for new notes and threads); only a note's author or a caller with
 * `admin` edits or deletes it; `setCreatedAt` lets a caller backdate a new note.
 */

/** Which ability of the parent allows what, for one kind. */
export interface NoteAbilities<A> {
  /** See the noteable and its notes. */
  read: A;
  /** Start threads and add notes. */
  create: A;
  /** Edit and delete anyone's notes (authors may always edit and delete their own). */
  admin: A;
  /** Give a new note its own `created_at` (otherwise the value is ignored, as GitLab does). */
  setCreatedAt: A;
  /** Resolve threads (resolvable kinds only); authors may resolve their own notes. */
  resolve?: A;
}

/** A noteable found for a caller. */
export interface FoundNoteable<R = unknown> {
  /** The kind's own record (a parsed commit, an issue row...), for kind-specific routes. */
  record: R;
  /** Which rows of `notes` are its notes. */
  scope: NoteableScope;
  /** `noteable_iid` on its notes (issues and merge requests), otherwise null. */
  iid: number | null;
  /**
   * Notes on diff lines (commits, merge requests): checks a DiffNote's position against the
   * noteable's diff and returns it normalised with its line code. Absent: positions are ignored.
   */
  checkPosition?: (position: DiffPosition) => Promise<{ position: DiffPosition; lineCode: string | null }>;
  /** The noteable's author (issues, merge requests), who may resolve its threads whatever their level. */
  authorId?: number | null;
  /** Its discussion is locked (GitLab's discussion_locked): only members of the parent may comment. */
  locked?: boolean;
}

interface KindBase<A, Access, R> {
  /** `noteable_type` of its notes, exactly as GitLab writes it. */
  type: NoteableType;
  /** Its routes' prefix below /api/v4; `:id` is the parent. */
  prefix: string;
  /** Schemas of its own path parameters (the parent's `:id` is added). */
  params: Record<string, TSchema>;
  abilities: NoteAbilities<A>;
  /** Threads can be resolved (merge requests). */
  resolvable?: boolean;
  /** Every route of the kind needs a signed-in caller, reads too (the spec: merge request calls are authenticated). */
  signedIn?: boolean;
  /** The noteable named by the path, for the caller whose parent access the guard loaded; throws 404 otherwise. */
  find(ctx: { cairn: Cairn; access: Access; params: Record<string, unknown> }): Promise<FoundNoteable<R>>;
}

/** A noteable in a project (`/projects/:id/...`): commits, issues, merge requests, project snippets. */
export type ProjectNoteableKind<R = any> = KindBase<ProjectAbility, ProjectAccess, R> & { parent: 'project' };
/** A noteable in a group (`/groups/:id/...`): epics. */
export type GroupNoteableKind<R = any> = KindBase<GroupAbility, GroupAccess, R> & { parent: 'group' };
export type NoteableKind<R = any> = ProjectNoteableKind<R> | GroupNoteableKind<R>;

/** A registration, type-checked; checks that its prefix starts with its parent's. */
export function defineNoteable<R>(kind: ProjectNoteableKind<R>): ProjectNoteableKind<R>;
export function defineNoteable<R>(kind: GroupNoteableKind<R>): GroupNoteableKind<R>;
export function defineNoteable<R>(kind: NoteableKind<R>): NoteableKind<R> {
  if (!kind.prefix.startsWith(kind.parent === 'project' ? '/projects/:id/' : '/groups/:id/')) {
    throw new Error(`noteable ${kind.type}: its prefix must start with the parent's /${kind.parent}s/:id/`);
  }
  return kind;
}
