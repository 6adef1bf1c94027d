import type { FastifyRequest } from 'fastify';
import type { TSchema } from 'typebox';
import type { Cairn } from '../context.js';
import type { NoteableScope, NoteableType } from '../finders/notes.js';
import type { GroupAbility, ProjectAbility } from '../policies/abilities.js';
import type { GroupAccess } from '../policies/groups.js';
import type { ProjectAccess } from '../policies/projects.js';
import type { DiffPosition } from '../db/schema/notes.js';

/**
 * The issuable registry: what people comment on, react to, subscribe to and label (commits,
 * issues, merge requests, snippets, epics). Each kind registers ONCE, with one object, and one
 * implementation of each API serves every kind that takes it, under the kind's prefix:
 *
 * - discussions and notes (src/api/notes/routes.ts): every kind (list, get, create thread,
 *   reply, edit, resolve, delete; the plain Notes API); who may comment on a locked thread and
 *   who resolves is src/policies/notes.ts, for the API and the web pages alike;
 * - award emoji (src/api/award_emoji/routes.ts), with `awards`: on the thing and on its notes;
 * - subscriptions (src/api/subscriptions/routes.ts), with `subscriptions`: POST subscribe and
 *   unsubscribe, answered with the kind's single form;
 * - resource label events (src/api/resource_label_events/routes.ts), with `labelEvents`;
 * - webhooks' payloads, when webhooks come (src/hooks/): `webhookPayload`, nothing reads it yet.
 *
 * Cairn keeps no todos yet; when it does, they are served for the kinds registered here.
 *
 * Adding a kind (say issues) is: write its registration, and add it to NOTEABLES in
 * ./index.ts. Nothing else:
 *
 *   export const issueNoteable = defineNoteable({
 *     type: 'Issue',                                  // noteable_type (awardable_type...), as GitLab writes it
 *     parent: 'project',                              // the `:id` of the prefix: 'project' or 'group'
 *     prefix: '/projects/:id/issues/:issue_iid',      // below /api/v4
 *     params: { issue_iid: RowId },                   // the noteable's own path parameters
 *     abilities: {                                    // project (or group) abilities, checked with can()
 *       read: 'read_issue', create: 'create_note', admin: 'admin_note', setCreatedAt: 'set_note_created_at',
 *     },
 *     awards: true, labelEvents: true,                // the optional APIs it takes
 *     subscriptions: { response: IssueSingleSchema, participants, present },
 *     async find({ cairn, access, params }) {         // 404 when it is not there or not visible to access.user
 *       const issue = await findIssueOrFail(cairn, access, params.issue_iid);
 *       return { record: issue, id: issue.id, iid: issue.iid, scope: { type: 'Issue', projectId: access.project.id, key: { column: 'noteable_id', value: issue.id } } };
 *     },
 *   });
 *
 * The route guard loads the parent for the caller first (404 when they may not see it, 403
 * without `read`; `create` for new notes and threads); only a note's author or a caller with
 * `admin` edits or deletes it; `setCreatedAt` lets a caller backdate a new note. Awards,
 * subscriptions and label events are guarded by `read` (writes signed in).
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
  /** Its row id (awardable_id, subscribable_id, the label events' target): kinds with awards, subscriptions or label events. */
  id?: number;
}

/** Subscriptions (GitLab's subscribe / unsubscribe): who counts as subscribed without a row, and the answer. */
export interface Subscribable<R, Access> {
  /** The kind's single form, the answer of a change (201); an unchanged subscription is a 304. */
  response: TSchema;
  /** Who takes part through the thing itself (author, assignees, reviewers): subscribed until they unsubscribe. */
  participants(ctx: { cairn: Cairn; found: FoundNoteable<R> }): Promise<(number | null)[]>;
  /** The single form for the caller. */
  present(request: FastifyRequest, access: Access, found: FoundNoteable<R>): Promise<unknown>;
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
  /** Takes emoji reactions, itself and its notes (project kinds; `find` answers its `id`). */
  awards?: boolean;
  /** Has resource label events (`find` answers its `id`; the events' type is `type`). */
  labelEvents?: boolean;
  /** Takes subscriptions (project kinds; `find` answers its `id`). */
  subscriptions?: Subscribable<R, Access>;
  /**
   * Its webhook payload's object_attributes, when webhooks exist (a later issue): the one place a
   * kind's payload plugs in. Nothing calls it yet.
   */
  webhookPayload?: (ctx: { cairn: Cairn; found: FoundNoteable<R> }) => Promise<Record<string, unknown>>;
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
  if ((kind.awards || kind.subscriptions) && kind.parent !== 'project') throw new Error(`noteable ${kind.type}: awards and subscriptions are for project kinds`);
  if (kind.labelEvents && !['Issue', 'MergeRequest', 'Epic'].includes(kind.type)) throw new Error(`noteable ${kind.type}: label events are kept for issues, merge requests and epics`);
  return kind;
}
