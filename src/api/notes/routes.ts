import { contributePreset, readPreset } from '../permissions.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type Static, type TSchema } from 'typebox';
import type { User } from '../../db/schema/core.js';
import type { DiffPosition, NoteWithAuthor } from '../../db/schema/notes.js';
import { discussionNotes, discussionPage, findNote, listNotes, notesOfDiscussions } from '../../finders/notes.js';
import { NOTEABLES } from '../../noteables/index.js';
import type { FoundNoteable, NoteableKind } from '../../noteables/registry.js';
import { badRequest, forbidden, invalidParam, missingParam, notFound, unauthorized } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { mayCommentDespiteLock, mayResolveNote, mayResolveThread, type ResolveRights } from '../../policies/notes.js';
import { presentDiscussion, presentNote, type NoteForm } from '../../presenters/notes.js';
import { DiscussionSchema, NoteSchema } from '../../presenters/schemas/notes.js';
import {
  createNote,
  deleteNote,
  noteInvalid,
  noteText,
  isResolvableNote,
  replyToDiscussion,
  setDiscussionResolved,
  setNoteResolved,
  updateNoteBody,
} from '../../services/notes.js';
import { RowId, timestampParam } from '../params.js';
import { findNoteableFor, noteableGuard, type AbilityKey } from '../noteables.js';
import { NoContent, route } from '../route.js';
import commitCommentRoutes from './commit_comments.js';

/**
 * Discussions and notes of every registered noteable (src/noteables/): one implementation of
 * each operation, registered under each kind's prefix. GitLab's Discussions API (list, get,
 * create a thread, reply, list/get/edit/delete a thread's notes) and its Notes API (list with
 * order_by/sort, get, create, edit, delete).
 */

/** The noteable of the request, found for the caller, and what the caller may do to its notes. */
interface Loaded {
  found: FoundNoteable;
  user: User | null;
  form: NoteForm;
  allowed: (ability: AbilityKey) => boolean;
  /** The caller's access level on the parent (project or group). */
  accessLevel: number;
}

/** Loads the noteable named by the path under the parent that the route's guard loaded. */
async function loadNoteable(kind: NoteableKind, request: FastifyRequest): Promise<Loaded> {
  const { found, access, allowed } = await findNoteableFor(kind, request);
  return { found, user: access.user, allowed, accessLevel: access.accessLevel, form: { resolvable: !!kind.resolvable, noteableIid: found.iid } };
}

/** A new note or reply: on a locked discussion only members of the parent may add one (GitLab's IssuablePolicy). */
function assertMayComment(loaded: Loaded): void {
  if (!mayCommentDespiteLock(loaded.user, loaded.accessLevel, loaded.found.locked === true)) throw forbidden();
}

/** Who resolves the noteable's threads: its author and the kind's resolve ability. */
const resolveRights = (loaded: Loaded): ResolveRights => ({ noteableAuthorId: loaded.found.authorId, resolveAny: loaded.allowed('resolve') });

function signedInUser(loaded: Loaded): User {
  if (!loaded.user) throw unauthorized();
  return loaded.user;
}

/** `created_at` counts only for callers who may backdate notes; for others GitLab drops it silently. */
function backdate(loaded: Loaded, value: string | undefined): Date | null {
  if (value === undefined || value === '' || !loaded.allowed('setCreatedAt')) return null;
  return timestampParam('created_at', value) ?? null;
}

/** Only the author, or a caller who administers notes, edits or deletes a note; nobody edits a system note. */
function assertMayChange(loaded: Loaded, note: NoteWithAuthor): User {
  const user = signedInUser(loaded);
  if (note.system) throw forbidden();
  if (note.author_id !== user.id && !loaded.allowed('admin')) throw forbidden();
  return user;
}

async function noteOf(request: FastifyRequest, loaded: Loaded, noteId: number, discussionId?: string): Promise<NoteWithAuthor> {
  const note = await findNote(request.server.cairn.db, loaded.found.scope, noteId);
  if (!note || (discussionId !== undefined && note.discussion_id !== discussionId)) throw notFound('Note');
  return note;
}

const NullableInt = Type.Union([Type.Null(), Type.Integer()]);
const NullableString = Type.Union([Type.Null(), Type.String()]);

/** position[...] of a new diff thread; required members are checked by hand, in Grape's words (position[base_sha] is missing). */
const PositionInput = Type.Object({
  base_sha: Type.Optional(NullableString),
  start_sha: Type.Optional(NullableString),
  head_sha: Type.Optional(NullableString),
  position_type: Type.Optional(NullableString),
  new_path: Type.Optional(NullableString),
  old_path: Type.Optional(NullableString),
  new_line: Type.Optional(NullableInt),
  old_line: Type.Optional(NullableInt),
  width: Type.Optional(NullableInt),
  height: Type.Optional(NullableInt),
  x: Type.Optional(NullableInt),
  y: Type.Optional(NullableInt),
});
type PositionInput = Static<typeof PositionInput>;

function diffPosition(p: PositionInput): DiffPosition {
  for (const name of ['base_sha', 'start_sha', 'head_sha', 'position_type'] as const) {
    if (p[name] === undefined || p[name] === null || p[name] === '') throw missingParam(`position[${name}]`);
  }
  const paths = { base_sha: p.base_sha!, start_sha: p.start_sha!, head_sha: p.head_sha!, old_path: p.old_path || null, new_path: p.new_path || null };
  if (p.position_type === 'text') return { ...paths, position_type: 'text', old_line: p.old_line ?? null, new_line: p.new_line ?? null };
  if (p.position_type === 'image') {
    return { ...paths, position_type: 'image', width: p.width ?? undefined, height: p.height ?? undefined, x: p.x ?? undefined, y: p.y ?? undefined };
  }
  throw invalidParam('position[position_type]', 'does not have a valid value');
}

const CreateThreadBody = Type.Object({
  body: Type.String(),
  created_at: Type.Optional(Type.String()),
  position: Type.Optional(PositionInput),
});

const ReplyBody = Type.Object({
  body: Type.String(),
  created_at: Type.Optional(Type.String()),
  // Listed by GitLab's documentation, unused by its code.
  note_id: Type.Optional(Type.Union([Type.Integer(), Type.String()])),
});

const EditThreadNoteBody = Type.Object({
  body: Type.Optional(Type.String()),
  resolved: Type.Optional(Type.Boolean()),
});

const CreateNoteBody = Type.Object({
  body: Type.String(),
  created_at: Type.Optional(Type.String()),
  internal: Type.Optional(Type.Boolean()),
  confidential: Type.Optional(Type.Boolean()),
});

const EditNoteBody = Type.Object({ body: Type.String() });

const NotesQuery = Type.Object({
  order_by: Type.Optional(Type.Union([Type.Literal('created_at'), Type.Literal('updated_at')])),
  sort: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
  activity_filter: Type.Optional(Type.Union([Type.Literal('all_notes'), Type.Literal('only_comments'), Type.Literal('only_activity')])),
});

function registerNoteable(fastify: FastifyInstance, kind: NoteableKind) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = fastify.cairn;
  const ctx = { baseUrl: cairn.config.externalUrl };
  const base = `/api/v4${kind.prefix}`;
  const own: Record<string, TSchema> = { id: Type.String(), ...kind.params };
  const Params = Type.Object(own);
  const ThreadParams = Type.Object({ ...own, discussion_id: Type.String() });
  const ThreadNoteParams = Type.Object({ ...own, discussion_id: Type.String(), note_id: RowId });
  const NoteParams = Type.Object({ ...own, note_id: RowId });
  const read = noteableGuard(kind, 'read');
  const create = noteableGuard(kind, 'create', true);
  const change = noteableGuard(kind, 'read', true);

  /** The thread `discussion_id` of the noteable, oldest note first; 404 when it has none by that id. */
  const threadOf = async (loaded: Loaded, discussionId: string, what = 'Discussion') => {
    const notes = await discussionNotes(cairn.db, loaded.found.scope, discussionId);
    if (notes.length === 0) throw notFound(what);
    return notes;
  };

  // ---- Discussions API

  app.get(`${base}/discussions`, route({ matrix: readPreset(kind.abilities.read),
    access: read,
    paginated: true,
    schema: { params: Params, response: { 200: Type.Array(DiscussionSchema) } },
  }), async (request, reply) => {
    const loaded = await loadNoteable(kind, request);
    const page = pageParams(request);
    const { ids, total } = await discussionPage(cairn.db, loaded.found.scope, { offset: page.offset, limit: page.perPage });
    setPaginationHeaders(request, reply, page, total);
    const byThread = new Map<string, NoteWithAuthor[]>(ids.map((id) => [id, []]));
    for (const n of await notesOfDiscussions(cairn.db, loaded.found.scope, ids)) byThread.get(n.discussion_id)!.push(n);
    // In the page's order (threads by their first note); a thread deleted meanwhile is left out.
    return ids.filter((id) => byThread.get(id)!.length > 0).map((id) => presentDiscussion(ctx, byThread.get(id)!, loaded.form));
  });

  app.get(`${base}/discussions/:discussion_id`, route({ matrix: readPreset(kind.abilities.read),
    access: read,
    schema: { params: ThreadParams, response: { 200: DiscussionSchema } },
  }), async (request) => {
    const loaded = await loadNoteable(kind, request);
    return presentDiscussion(ctx, await threadOf(loaded, request.params.discussion_id as string), loaded.form);
  });

  app.post(`${base}/discussions`, route({ matrix: contributePreset(kind.abilities.read),
    access: create,
    schema: { params: Params, body: CreateThreadBody, response: { 201: DiscussionSchema } },
  }), async (request, reply) => {
    const loaded = await loadNoteable(kind, request);
    const { body, created_at, position } = request.body;
    const text = noteText(body);
    const createdAt = backdate(loaded, created_at);
    const onDiff = position && loaded.found.checkPosition ? await loaded.found.checkPosition(diffPosition(position)) : null;
    assertMayComment(loaded);
    const note = await createNote(cairn, loaded.found.scope, {
      author: signedInUser(loaded),
      body: text,
      createdAt,
      type: onDiff ? 'DiffNote' : 'DiscussionNote',
      position: onDiff?.position ?? null,
      lineCode: onDiff?.lineCode ?? null,
    });
    return reply.code(201).send(presentDiscussion(ctx, [note], loaded.form));
  });

  if (kind.resolvable) {
    // Resolves or unresolves every note of a thread (GitLab's Discussion#can_resolve?: the noteable's author or the resolve ability).
    app.put(`${base}/discussions/:discussion_id`, route({ matrix: 'readCode',
      access: change,
      schema: { params: ThreadParams, body: Type.Object({ resolved: Type.Boolean() }), response: { 200: DiscussionSchema } },
    }), async (request) => {
      const loaded = await loadNoteable(kind, request);
      const user = signedInUser(loaded);
      const thread = await threadOf(loaded, request.params.discussion_id as string);
      if (!mayResolveThread(user, thread.some((n) => isResolvableNote(n)), resolveRights(loaded))) throw forbidden();
      const notes = await setDiscussionResolved(cairn, loaded.found.scope, thread[0].discussion_id, user, request.body.resolved);
      return presentDiscussion(ctx, notes, loaded.form);
    });
  }

  app.get(`${base}/discussions/:discussion_id/notes`, route({ matrix: readPreset(kind.abilities.read),
    access: read,
    schema: { params: ThreadParams, response: { 200: Type.Array(NoteSchema) } },
  }), async (request) => {
    const loaded = await loadNoteable(kind, request);
    const notes = await threadOf(loaded, request.params.discussion_id as string, 'Notes');
    return notes.map((n) => presentNote(ctx, n, loaded.form));
  });

  app.post(`${base}/discussions/:discussion_id/notes`, route({ matrix: contributePreset(kind.abilities.read),
    access: create,
    schema: { params: ThreadParams, body: ReplyBody, response: { 201: NoteSchema } },
  }), async (request, reply) => {
    const loaded = await loadNoteable(kind, request);
    const text = noteText(request.body.body);
    const createdAt = backdate(loaded, request.body.created_at);
    const thread = await threadOf(loaded, request.params.discussion_id as string);
    assertMayComment(loaded);
    const note = await replyToDiscussion(cairn, loaded.found.scope, thread, { author: signedInUser(loaded), body: text, createdAt });
    return reply.code(201).send(presentNote(ctx, note, loaded.form));
  });

  app.get(`${base}/discussions/:discussion_id/notes/:note_id`, route({ matrix: readPreset(kind.abilities.read),
    access: read,
    schema: { params: ThreadNoteParams, response: { 200: NoteSchema } },
  }), async (request) => {
    const loaded = await loadNoteable(kind, request);
    return presentNote(ctx, await noteOf(request, loaded, request.params.note_id as number, request.params.discussion_id as string), loaded.form);
  });

  app.put(`${base}/discussions/:discussion_id/notes/:note_id`, route({ matrix: 'maintainer',
    access: change,
    schema: { params: ThreadNoteParams, body: EditThreadNoteBody, response: { 200: NoteSchema } },
  }), async (request) => {
    const { body, resolved } = request.body;
    // Grape's exactly_one_of, in its words.
    if (body === undefined && resolved === undefined) throw invalidParam('body, resolved', 'are missing, exactly one parameter must be provided');
    if (body !== undefined && resolved !== undefined) throw invalidParam('body, resolved', 'are mutually exclusive');
    const loaded = await loadNoteable(kind, request);
    const note = await noteOf(request, loaded, request.params.note_id as number, request.params.discussion_id as string);
    if (resolved !== undefined) {
      const user = signedInUser(loaded);
      // GitLab's resolve_note on a note: its author, the noteable's author, or the kind's resolve ability.
      if (!mayResolveNote(user, note.author_id, resolveRights(loaded))) throw forbidden();
      const resolvable = kind.resolvable && isResolvableNote(note);
      if (!resolvable) throw badRequest('Note is not resolvable');
      return presentNote(ctx, await setNoteResolved(cairn, loaded.found.scope, note, user, resolved), loaded.form);
    }
    const text = noteText(body);
    assertMayChange(loaded, note);
    return presentNote(ctx, await updateNoteBody(cairn, loaded.found.scope, note, text), loaded.form);
  });

  app.delete(`${base}/discussions/:discussion_id/notes/:note_id`, route({ matrix: 'maintainer',
    access: change,
    schema: { params: ThreadNoteParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const loaded = await loadNoteable(kind, request);
    const note = await noteOf(request, loaded, request.params.note_id as number, request.params.discussion_id as string);
    assertMayChange(loaded, note);
    await deleteNote(cairn, note);
    return reply.code(204).send();
  });

  // ---- Notes API

  app.get(`${base}/notes`, route({ matrix: readPreset(kind.abilities.read),
    access: read,
    paginated: true,
    schema: { params: Params, querystring: NotesQuery, response: { 200: Type.Array(NoteSchema) } },
  }), async (request, reply) => {
    const loaded = await loadNoteable(kind, request);
    const page = pageParams(request);
    const q = request.query;
    const { notes, total } = await listNotes(
      cairn.db,
      loaded.found.scope,
      { orderBy: q.order_by ?? 'created_at', sort: q.sort ?? 'desc', activity: q.activity_filter ?? 'all_notes' },
      { offset: page.offset, limit: page.perPage },
    );
    setPaginationHeaders(request, reply, page, total);
    return notes.map((n) => presentNote(ctx, n, loaded.form));
  });

  app.get(`${base}/notes/:note_id`, route({ matrix: readPreset(kind.abilities.read),
    access: read,
    schema: { params: NoteParams, response: { 200: NoteSchema } },
  }), async (request) => {
    const loaded = await loadNoteable(kind, request);
    return presentNote(ctx, await noteOf(request, loaded, request.params.note_id as number), loaded.form);
  });

  app.post(`${base}/notes`, route({ matrix: contributePreset(kind.abilities.read),
    access: create,
    schema: { params: Params, body: CreateNoteBody, response: { 201: NoteSchema } },
  }), async (request, reply) => {
    const loaded = await loadNoteable(kind, request);
    const text = noteText(request.body.body);
    const createdAt = backdate(loaded, request.body.created_at);
    // Internal (confidential) notes are for issues and epics, which do not keep them yet.
    if (request.body.internal || request.body.confidential) throw noteInvalid({ confidential: ['can not be set for this resource'] });
    assertMayComment(loaded);
    const note = await createNote(cairn, loaded.found.scope, { author: signedInUser(loaded), body: text, createdAt, type: null });
    return reply.code(201).send(presentNote(ctx, note, loaded.form));
  });

  app.put(`${base}/notes/:note_id`, route({ matrix: 'maintainer',
    access: change,
    schema: { params: NoteParams, body: EditNoteBody, response: { 200: NoteSchema } },
  }), async (request) => {
    const text = noteText(request.body.body);
    const loaded = await loadNoteable(kind, request);
    const note = await noteOf(request, loaded, request.params.note_id as number);
    assertMayChange(loaded, note);
    return presentNote(ctx, await updateNoteBody(cairn, loaded.found.scope, note, text), loaded.form);
  });

  app.delete(`${base}/notes/:note_id`, route({ matrix: 'maintainer',
    access: change,
    schema: { params: NoteParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const loaded = await loadNoteable(kind, request);
    const note = await noteOf(request, loaded, request.params.note_id as number);
    assertMayChange(loaded, note);
    await deleteNote(cairn, note);
    return reply.code(204).send();
  });
}

export default async function noteRoutes(fastify: FastifyInstance) {
  for (const kind of NOTEABLES) registerNoteable(fastify, kind);
  await fastify.register(commitCommentRoutes);
}
