import type { User } from '../../db/schema/core.js';
import type { DiffPosition, NoteWithAuthor } from '../../db/schema/notes.js';
import { listNotes, discussionNotes, type NoteableScope } from '../../finders/notes.js';
import { renderMarkdown } from '../../lib/markdown.js';
import type { FoundNoteable, ProjectNoteableKind } from '../../noteables/registry.js';
import { ApiError } from '../../plugins/errors.js';
import { mayCommentDespiteLock, mayResolveThread } from '../../policies/notes.js';
import { createNote, isResolvableNote, noteText, replyToDiscussion, setDiscussionResolved } from '../../services/notes.js';
import { field, pageNotFound, PageRedirect, requireCsrf, signInLocation, PageError, type PageContext, type ProjectPage } from '../context.js';
import { html, pathUrl, timeAgo, trusted, type SafeHtml } from '../html.js';
import { avatar } from '../layout.js';
import type { PageRegistry } from '../router.js';

/**
 * Discussions (notes and threads) of any noteable — issues, merge requests, snippets — as the
 * pages show them, and the forms that add to them. The same rules and services as the API's
 * discussions and notes endpoints (src/api/notes/routes.ts): who may comment is the kind's
 * `create` ability (signed in; on a locked discussion members only), who may resolve a thread
 * is the noteable's author or the kind's `resolve` ability (resolvable kinds only), both decided
 * by src/policies/notes.ts as the API decides them, and writes
 * go through createNote / replyToDiscussion / setDiscussionResolved of src/services/notes.ts.
 *
 * Use (a merge request page, say):
 *
 *   const target = noteTargetOf(ctx, page, mergeRequestNoteable, found, `${projectPath(page)}/-/merge_requests/${iid}`);
 *   const discussions = await loadDiscussions(ctx, target.scope);
 *   html`${renderDiscussions(ctx, discussions, { target })}${renderCommentForm(ctx, target)}`
 *
 * and register the form actions once: `registerNoteActions(pages, 'merge_requests/:iid', load)`
 * where `load(ctx, page)` answers the NoteTarget (POST `<url>/notes`, with `note`, an optional
 * `in_reply_to_discussion_id`, `type=DiscussionNote` to start a thread, and `position[...]`
 * fields for a note on a diff line; POST `<url>/discussions/:discussion_id/resolve` and
 * `.../unresolve`). Diff notes shown inline: renderDiscussion(ctx, d, { target, showPosition: false }),
 * and a form on a line: renderCommentForm(ctx, target, { hidden: positionFields(position), thread: true }).
 */

/** A noteable as the discussions component sees it, with what the visitor may do to its notes. */
export interface NoteTarget {
  /** Which rows of `notes` are its notes. */
  scope: NoteableScope;
  /** The noteable's page (`/group/project/-/issues/3`); forms post below it. */
  url: string;
  user: User | null;
  /** Start threads, comment and reply (the kind's create ability, signed in, the lock rule). */
  mayComment: boolean;
  /** Its threads can be resolved (merge requests). */
  resolvable: boolean;
  /** The kind's resolve ability (resolves anyone's threads). */
  mayResolveAny: boolean;
  /** The noteable's author, who resolves its threads whatever their level. */
  authorId: number | null;
  /** Its discussion is locked (only members comment). */
  locked: boolean;
  /** Notes on diff lines: checks a posted position (merge requests, commits). */
  checkPosition?: FoundNoteable['checkPosition'];
}

/** One thread (or individual note): its notes, oldest first. */
export interface Discussion {
  id: string;
  notes: NoteWithAuthor[];
}

/** Award emoji on notes: name and count, per note id. */
export type NoteAwards = Map<number, { name: string; count: number }[]>;

export interface DiscussionOptions {
  target: NoteTarget;
  awards?: NoteAwards;
  /** Say where a diff note sits ("on file.ts line 4"); false where it is shown on its line. Default true. */
  showPosition?: boolean;
}

// ---------------------------------------------------------------------------------------------
// Targets

/**
 * The target of a project noteable found for the visitor (`found` from `kind.find`, or built the
 * same way), with the kind's abilities checked on the page's project as the API checks them.
 */
export function noteTargetOf(ctx: PageContext, page: ProjectPage, kind: ProjectNoteableKind, found: FoundNoteable, url: string): NoteTarget {
  const user = ctx.user;
  const locked = found.locked === true;
  const resolveAbility = kind.abilities.resolve;
  return {
    scope: found.scope,
    url,
    user,
    mayComment: !!user && page.can(kind.abilities.create) && mayCommentDespiteLock(user, page.subject.accessLevel, locked),
    resolvable: !!kind.resolvable,
    mayResolveAny: !!user && !!resolveAbility && page.can(resolveAbility),
    authorId: found.authorId ?? null,
    locked,
    checkPosition: found.checkPosition,
  };
}

/**
 * Finds the noteable named by `params` with the kind's own finder (its 404 rules: confidential
 * issues, snippet visibility) and answers its target; hidden → 404 page (anonymous: sign in).
 */
export async function loadNoteTarget<R>(
  ctx: PageContext,
  page: ProjectPage,
  kind: ProjectNoteableKind<R>,
  params: Record<string, unknown>,
  url: string,
): Promise<{ target: NoteTarget; found: FoundNoteable<R> }> {
  if (!page.can(kind.abilities.read) || (kind.signedIn && !ctx.user)) throw hidden(ctx);
  let found: FoundNoteable<R>;
  try {
    found = await kind.find({ cairn: ctx.cairn, access: { project: page.project, accessLevel: page.subject.accessLevel, user: ctx.user }, params });
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) throw hidden(ctx);
    throw e;
  }
  return { target: noteTargetOf(ctx, page, kind, found, url), found };
}

/** What a visitor may not see: a 404, or the sign-in page for anonymous visitors. */
export function hidden(ctx: PageContext): Error {
  return ctx.user ? pageNotFound() : new PageRedirect(signInLocation(ctx));
}

// ---------------------------------------------------------------------------------------------
// Loading

/** GitLab shows at most this many notes on a page; a noteable with more shows its first ones. */
export const MAX_NOTES = 2000;

/** Every thread of the noteable in order of its first note, each with its notes (one statement). */
export async function loadDiscussions(ctx: PageContext, scope: NoteableScope): Promise<Discussion[]> {
  const { notes } = await listNotes(ctx.cairn.db, scope, { orderBy: 'created_at', sort: 'asc', activity: 'all_notes' }, { offset: 0, limit: MAX_NOTES });
  return groupDiscussions(notes);
}

/** Notes (oldest first) grouped into threads, threads in order of their first note. */
export function groupDiscussions(notes: NoteWithAuthor[]): Discussion[] {
  const byId = new Map<string, Discussion>();
  for (const n of notes) {
    let d = byId.get(n.discussion_id);
    if (!d) byId.set(n.discussion_id, (d = { id: n.discussion_id, notes: [] }));
    d.notes.push(n);
  }
  return [...byId.values()];
}

/** Award emoji counts of these notes (one statement). */
export async function loadNoteAwards(ctx: PageContext, discussions: Discussion[]): Promise<NoteAwards> {
  const ids = discussions.flatMap((d) => d.notes.map((n) => n.id));
  const out: NoteAwards = new Map();
  if (!ids.length) return out;
  const rows = await ctx.cairn.db
    .selectFrom('award_emoji')
    .select(['awardable_id', 'name', (eb) => eb.fn.countAll<string>().as('n')])
    .where('awardable_type', '=', 'Note')
    .where('awardable_id', 'in', ids)
    .groupBy(['awardable_id', 'name'])
    .orderBy('name')
    .execute();
  for (const r of rows) {
    const list = out.get(r.awardable_id) ?? [];
    list.push({ name: r.name, count: Number(r.n) });
    out.set(r.awardable_id, list);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Rules

/** A thread with a resolvable note (GitLab's Discussion#resolvable?) on a kind whose threads resolve. */
export function isResolvableDiscussion(target: NoteTarget, d: Discussion): boolean {
  return target.resolvable && d.notes.some((n) => isResolvableNote(n));
}

/** Every resolvable note of the thread is resolved. */
export function isResolvedDiscussion(d: Discussion): boolean {
  const notes = d.notes.filter((n) => isResolvableNote(n));
  return notes.length > 0 && notes.every((n) => n.resolved_at !== null);
}

/** The API's rule for PUT .../discussions/:id: a resolvable thread, and the noteable's author or the resolve ability. */
export function mayResolveDiscussion(target: NoteTarget, d: Discussion): boolean {
  return mayResolveThread(target.user, isResolvableDiscussion(target, d), { noteableAuthorId: target.authorId, resolveAny: target.mayResolveAny });
}

/** Replies go to threads that are not system notes, from whoever may comment. */
export function mayReply(target: NoteTarget, d: Discussion): boolean {
  return target.mayComment && !d.notes[0].system;
}

// ---------------------------------------------------------------------------------------------
// Rendering

/** The anchor of a note on its page (`#note_12`). */
export const noteAnchor = (note: { id: number }) => `note_${note.id}`;

/** Where a diff note sits: its file and line. */
export function positionText(note: NoteWithAuthor): string | null {
  const p = note.position as (Partial<DiffPosition> & { path?: string | null; line?: number | null }) | null;
  if (!p) return null;
  const path = p.new_path ?? p.old_path ?? p.path;
  if (!path) return null;
  const line = p.new_line ?? p.old_line ?? p.line;
  return line ? `${path} line ${line}` : path;
}

function authorLink(user: User | null): SafeHtml {
  if (!user) return html`<span class="who">Ghost user</span>`;
  return html`<a class="who" href="/${pathUrl(user.username)}">${user.name || user.username}</a> <span class="muted small">@${user.username}</span>`;
}

function awardsOf(note: NoteWithAuthor, awards: NoteAwards | undefined): SafeHtml {
  const list = awards?.get(note.id);
  if (!list?.length) return html``;
  return html`<ul class="awards" aria-label="Reactions">${list.map((a) => html`<li><span class="mono">:${a.name}:</span> ${a.count}</li>`)}</ul>`;
}

/** One note: who, when, its Markdown body; a system note as one muted line. */
export function renderNote(ctx: PageContext, note: NoteWithAuthor, opts: { awards?: NoteAwards; showPosition?: boolean } = {}): SafeHtml {
  if (note.system) {
    return html`<li class="note system" id="${noteAnchor(note)}">${note.author ? html`<span class="who">${note.author.name || note.author.username}</span>` : ''}
<div class="md inline-md">${trusted(renderMarkdown(note.body))}</div> ${timeAgo(note.created_at)}</li>`;
  }
  const where = opts.showPosition !== false ? positionText(note) : null;
  const edited = note.updated_at && note.created_at && new Date(note.updated_at).getTime() - new Date(note.created_at).getTime() > 1000;
  return html`<li class="note" id="${noteAnchor(note)}"><div class="note-head">${note.author ? avatar(note.author) : ''} ${authorLink(note.author)}
<span class="muted small">${where ? html`commented on <span class="mono">${where}</span> ` : ''}<a href="#${noteAnchor(note)}">${timeAgo(note.created_at)}</a>${edited ? ' · edited' : ''}</span></div>
<div class="md note-body">${trusted(renderMarkdown(note.body))}</div>${awardsOf(note, opts.awards)}</li>`;
}

/** The authenticity token field of every form. */
export function csrfField(ctx: PageContext): SafeHtml {
  return html`<input type="hidden" name="authenticity_token" value="${ctx.csrfToken}">`;
}

/** "Resolve thread" / "Unresolve thread", for a visitor who may (else nothing). */
export function renderResolveButton(ctx: PageContext, target: NoteTarget, d: Discussion): SafeHtml {
  if (!mayResolveDiscussion(target, d)) return html``;
  const resolved = isResolvedDiscussion(d);
  const action = `${target.url}/discussions/${pathUrl(d.id)}/${resolved ? 'unresolve' : 'resolve'}`;
  return html`<form method="post" action="${action}" class="inline">${csrfField(ctx)}<button type="submit" class="secondary small">${resolved ? 'Unresolve thread' : 'Resolve thread'}</button></form>`;
}

/** A reply form for the thread (inside a <details>, so it needs no script), for a visitor who may reply. */
export function renderReplyForm(ctx: PageContext, target: NoteTarget, d: Discussion): SafeHtml {
  if (!mayReply(target, d)) return html``;
  const id = `reply-${d.id}`;
  return html`<details class="reply"><summary>Reply</summary><form method="post" action="${target.url}/notes">${csrfField(ctx)}
<input type="hidden" name="in_reply_to_discussion_id" value="${d.id}">
<label for="${id}" class="sr-only">Reply</label><textarea id="${id}" name="note" required placeholder="Reply…"></textarea>
<div class="row form-actions"><button type="submit">Reply</button></div></form></details>`;
}

/**
 * A thread (or an individual note): its notes, the resolved state, and for the visitor the
 * resolve button and the reply form where they may use them.
 */
export function renderDiscussion(ctx: PageContext, d: Discussion, opts: DiscussionOptions): SafeHtml {
  const { target } = opts;
  const notes = d.notes.map((n) => renderNote(ctx, n, opts));
  if (d.notes.length === 1 && d.notes[0].system) return html`<ul class="timeline" data-discussion-id="${d.id}">${notes}</ul>`;
  const resolvable = isResolvableDiscussion(target, d);
  const resolved = resolvable && isResolvedDiscussion(d);
  const resolver = resolved ? d.notes.find((n) => n.resolved_by)?.resolved_by : null;
  const status = resolvable
    ? html`<div class="discussion-status small">${resolved ? html`<span class="badge success">Resolved</span>${resolver ? html` by ${resolver.name || resolver.username}` : ''}` : html`<span class="badge warn">Unresolved</span>`} ${renderResolveButton(ctx, target, d)}</div>`
    : html``;
  const footer = mayReply(target, d) || status.value ? html`<div class="discussion-foot">${status}${renderReplyForm(ctx, target, d)}</div>` : html``;
  return html`<section class="discussion${resolved ? ' resolved' : ''}" id="discussion_${d.id}" data-discussion-id="${d.id}" aria-label="Thread"><ul class="notes">${notes}</ul>${footer}</section>`;
}

/** Every thread of a noteable, in order. */
export function renderDiscussions(ctx: PageContext, discussions: Discussion[], opts: DiscussionOptions): SafeHtml {
  if (!discussions.length) return html`<p class="muted">No comments yet.</p>`;
  return html`<div class="discussions">${discussions.map((d) => renderDiscussion(ctx, d, opts))}</div>`;
}

export interface CommentFormOptions {
  /** Extra hidden fields (a diff note's `position[...]`, see positionFields). */
  hidden?: Record<string, string | number | null | undefined>;
  /** The text typed before a failed post, and why it failed. */
  draft?: string;
  error?: string;
  /** Offer only "Start a thread" (diff lines), not a plain comment. */
  thread?: boolean;
  /** The textarea's id (unique on the page). */
  id?: string;
  label?: string;
}

/** The new comment form (or, for visitors who may not comment, why not). */
export function renderCommentForm(ctx: PageContext, target: NoteTarget, opts: CommentFormOptions = {}): SafeHtml {
  if (!target.mayComment) {
    if (!ctx.user) return html`<p class="muted"><a href="${signInLocation(ctx)}">Sign in</a> to comment.</p>`;
    return html`<p class="muted">${target.locked ? 'The discussion is locked. Only project members can comment.' : 'You cannot comment here.'}</p>`;
  }
  const id = opts.id ?? 'note-body';
  const hiddenFields = Object.entries(opts.hidden ?? {})
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => html`<input type="hidden" name="${k}" value="${String(v)}">`);
  const buttons = opts.thread
    ? html`<button type="submit" name="type" value="DiscussionNote">Start a thread</button>`
    : html`<button type="submit">Comment</button><button type="submit" name="type" value="DiscussionNote" class="secondary">Start thread</button>`;
  return html`<form method="post" action="${target.url}/notes" class="comment-form">${csrfField(ctx)}${hiddenFields}
${opts.error ? html`<div class="alert error" role="alert">${opts.error}</div>` : ''}
<label for="${id}">${opts.label ?? 'Add a comment'}</label><textarea id="${id}" name="note" required placeholder="Write a comment (Markdown)">${opts.draft ?? ''}</textarea>
<div class="row form-actions">${buttons}</div></form>`;
}

/** The hidden `position[...]` fields of a note on a diff line, for renderCommentForm's `hidden`. */
export function positionFields(p: DiffPosition): Record<string, string | number | null | undefined> {
  return {
    'position[position_type]': p.position_type,
    'position[base_sha]': p.base_sha,
    'position[start_sha]': p.start_sha,
    'position[head_sha]': p.head_sha,
    'position[old_path]': p.old_path,
    'position[new_path]': p.new_path,
    'position[old_line]': p.old_line,
    'position[new_line]': p.new_line,
  };
}

// ---------------------------------------------------------------------------------------------
// Form actions

/** The `position[...]` of a posted diff note, or null (only text positions come from forms). */
function postedPosition(ctx: PageContext): DiffPosition | null {
  const p = ctx.body.position;
  if (!p || typeof p !== 'object' || Array.isArray(p)) return null;
  const s = (k: string) => {
    const v = (p as Record<string, unknown>)[k];
    return typeof v === 'string' && v !== '' ? v : null;
  };
  const n = (k: string) => {
    const v = s(k);
    return v !== null && /^\d{1,9}$/.test(v) ? Number(v) : null;
  };
  if (s('position_type') !== 'text' || !s('base_sha') || !s('start_sha') || !s('head_sha')) throw new PageError(400, 'Bad request', 'The position of the comment is incomplete.');
  return { position_type: 'text', base_sha: s('base_sha'), start_sha: s('start_sha'), head_sha: s('head_sha'), old_path: s('old_path'), new_path: s('new_path'), old_line: n('old_line'), new_line: n('new_line') };
}

/** The message of an ApiError raised by a service (GitLab's words), for a form. */
export function apiErrorText(e: ApiError): string {
  const m = e.body.message ?? e.body.error;
  if (typeof m === 'string') return m.replace(/^\d{3} (Bad request - )?/, '');
  if (m && typeof m === 'object' && typeof (m as { error?: unknown }).error === 'string') return (m as { error: string }).error;
  if (m && typeof m === 'object') return Object.entries(m as Record<string, unknown>).map(([k, v]) => `${k} ${[v].flat().join(', ')}`).join('; ');
  return e.message;
}

export interface NoteActionOptions {
  /** Shows the noteable's page again with the error and the draft (a 400 in the page); without it, an error page. */
  rerender?: (error: string, draft: string) => Promise<unknown>;
}

/**
 * POST `<url>/notes`: a new comment (`note`), a new thread (`type=DiscussionNote`, or with a
 * `position[...]` on a diff line) or a reply (`in_reply_to_discussion_id`). CSRF first; the
 * API's rules (create ability, lock) and services; then back to the note on the page.
 */
export async function createNoteAction(ctx: PageContext, target: NoteTarget, opts: NoteActionOptions = {}): Promise<unknown> {
  const user = requireCsrf(ctx);
  if (!target.mayComment) throw new PageError(403, 'Access denied', target.locked ? 'The discussion is locked. Only project members can comment.' : 'You cannot comment here.');
  const draft = field(ctx, 'note');
  const replyTo = field(ctx, 'in_reply_to_discussion_id');
  try {
    const body = noteText(draft, 'note');
    let note: NoteWithAuthor;
    if (replyTo) {
      const thread = await discussionNotes(ctx.cairn.db, target.scope, replyTo);
      if (!thread.length) throw pageNotFound('The thread could not be found.');
      if (thread[0].system) throw new PageError(400, 'Bad request', 'A system note can not be replied to.');
      note = await replyToDiscussion(ctx.cairn, target.scope, thread, { author: user, body });
    } else {
      const position = ctx.body.position !== undefined && target.checkPosition ? postedPosition(ctx) : null;
      const onDiff = position ? await target.checkPosition!(position) : null;
      const thread = onDiff || field(ctx, 'type') === 'DiscussionNote';
      note = await createNote(ctx.cairn, target.scope, {
        author: user,
        body,
        type: onDiff ? 'DiffNote' : thread ? 'DiscussionNote' : null,
        position: onDiff?.position ?? null,
        lineCode: onDiff?.lineCode ?? null,
      });
    }
    return ctx.reply.redirect(`${target.url}#${noteAnchor(note)}`, 303);
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 400) throw e;
    const text = apiErrorText(e);
    const message = /is missing$/.test(text) ? "Comment can't be blank." : /^Note \{:(line_code|position)/.test(text) ? 'The line of this comment is not in the diff.' : text;
    if (opts.rerender) return opts.rerender(message, draft);
    throw new PageError(400, 'The comment could not be saved', message);
  }
}

/** POST `<url>/discussions/:discussion_id/resolve` or `/unresolve`: the API's rule, then back to the thread. */
export async function resolveAction(ctx: PageContext, target: NoteTarget, discussionId: string, resolved: boolean): Promise<unknown> {
  const user = requireCsrf(ctx);
  const notes = await discussionNotes(ctx.cairn.db, target.scope, discussionId);
  if (!notes.length) throw pageNotFound('The thread could not be found.');
  if (!mayResolveDiscussion(target, { id: discussionId, notes })) throw new PageError(403, 'Access denied', 'You cannot resolve this thread.');
  await setDiscussionResolved(ctx.cairn, target.scope, discussionId, user, resolved);
  return ctx.reply.redirect(`${target.url}#discussion_${discussionId}`, 303);
}

/**
 * Registers the note actions of a project noteable below `pattern` (what follows `/-/`, e.g.
 * `issues/:iid`): POST `<pattern>/notes`, `<pattern>/discussions/:discussion_id/resolve` and
 * `/unresolve`. `load` finds the noteable for the visitor (404 when hidden) and answers its target.
 */
export function registerNoteActions(
  pages: PageRegistry,
  pattern: string,
  load: (ctx: PageContext, page: ProjectPage) => Promise<NoteTarget>,
  opts: { rerender?: (ctx: PageContext, page: ProjectPage, error: string, draft: string) => Promise<unknown> } = {},
) {
  pages.projectPage('POST', `${pattern}/notes`, async (ctx, page) =>
    createNoteAction(ctx, await load(ctx, page), { rerender: opts.rerender ? (error, draft) => opts.rerender!(ctx, page, error, draft) : undefined }));
  for (const [action, resolved] of [['resolve', true], ['unresolve', false]] as const) {
    pages.projectPage('POST', `${pattern}/discussions/:discussion_id/${action}`, async (ctx, page) =>
      resolveAction(ctx, await load(ctx, page), ctx.params.discussion_id, resolved));
  }
}
