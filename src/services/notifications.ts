import { canReadSnippet, type SnippetProjectSubject } from '../policies/snippets.js';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { Namespace, User } from '../db/schema/core.js';
import type { Epic, Issue, MergeRequest } from '../db/schema/work_items.js';
import { findProjectRow, projectFullPath, type ProjectWithNamespace } from '../finders/projects.js';
import { defineJob, defineRecurring } from '../jobs/queue.js';
import { enqueue } from '../jobs/queue.js';
import { renderMessage, type RenderedMessage, type Thread } from '../mail/messages.js';
import { mailEnabled, sendMail, type OutgoingMail } from '../mail/transport.js';
import { can, effectiveLevel } from '../policies/abilities.js';
import { canSeeIssue } from '../policies/issues.js';
import { findCommit } from './commits.js';
import { effectiveSettings, eventEnabled, notificationEmailOf, type EffectiveSetting, type NotificationEvent } from './notification_settings.js';
import { NOTIFY_JOB, notify, type NotifyEvent } from './notify.js';
import { findUserById } from '../finders/users.js';

/**
 * Notification e-mail, as GitLab's NotificationService and NotificationRecipients decide it.
 *
 * A "notify" job (enqueued by services/notify.ts in the transaction of the change) loads what
 * the event is about, gathers candidates, each with the ways they are concerned:
 *   participating - author, assignees (reviewers), commenters, users mentioned in it;
 *   mention       - users @-mentioned by this very event (a new issue's description, a note),
 *                   and the old and new assignees of a reassignment;
 *   watch/custom  - users whose effective level where it lives is watch, or custom;
 *   subscription  - users who subscribed to it explicitly (and, for new ones, to its labels);
 * and keeps those that are notifiable: active people who may read it, where e-mail is not
 * disabled, who did not cause it, whose effective level (project → nearest group with its own
 * level → global) asks for this kind of concern and event, and who did not unsubscribe (a
 * mention still reaches them). Then, in one transaction, it records each recipient against
 * the event's key (notification_deliveries) and enqueues one "notify.deliver" job per new
 * recipient, so that a retried notify job never mails anyone twice; each deliver job sends
 * one message over SMTP.
 *
 * Noteables: notes on issues, merge requests, commits and epics are mailed; another noteable
 * (snippets) plugs in by adding a NoteableLoader to NOTEABLE_LOADERS below.
 */

export const DELIVER_JOB = 'notify.deliver';
export const ISSUE_DUE_JOB = 'notify.issue_due';

type Concern = 'participating' | 'mention' | 'watch' | 'custom' | 'subscription';

/** Events a watcher does not get (GitLab's EXCLUDED_WATCHER_EVENTS). */
const EXCLUDED_WATCHER_EVENTS = new Set<NotificationEvent>(['push_to_merge_request', 'issue_due', 'success_pipeline']);
/** Events a participating user gets even without taking part (GitLab's participating_custom_action?). */
const PARTICIPATING_EVENTS = new Set<NotificationEvent>(['failed_pipeline', 'fixed_pipeline', 'moved_project']);

/** What a job needs to know about the thing an event is about. */
interface Subject {
  project: ProjectWithNamespace | null;
  /** A group-level thing's group (epics). */
  group: Namespace | null;
  /** Explicit subscriptions live on this (issues, merge requests, epics). */
  subscribable: { type: string; id: number } | null;
  /** Of the users given, those who may read it. */
  readers(users: User[]): Promise<Set<number>>;
  message: RenderedMessage;
}

class Candidates {
  readonly concerns = new Map<number, Set<Concern>>();
  add(ids: Iterable<number | null | undefined>, concern: Concern) {
    for (const id of ids) {
      if (id === null || id === undefined) continue;
      let set = this.concerns.get(id);
      if (!set) this.concerns.set(id, (set = new Set()));
      set.add(concern);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers over the database

function hostOf(cairn: Cairn): string {
  try {
    return new URL(cairn.config.externalUrl).host || 'localhost';
  } catch {
    return 'localhost';
  }
}

/** @usernames in a text, outside code spans and blocks. */
export function mentionedUsernames(text: string | null | undefined): string[] {
  if (!text) return [];
  const plain = text.replace(/```[\s\S]*?```/g, ' ').replace(/`[^`\n]*`/g, ' ');
  const out = new Set<string>();
  for (const m of plain.matchAll(/(?:^|[^\w@/`.])@([A-Za-z0-9_][A-Za-z0-9_.-]*)/g)) out.add(m[1].replace(/[.-]+$/, '').toLowerCase());
  return [...out].filter(Boolean);
}

async function usersMentionedIn(db: Database, texts: (string | null | undefined)[]): Promise<number[]> {
  const names = [...new Set(texts.flatMap((t) => mentionedUsernames(t)))];
  if (!names.length) return [];
  const rows = await db.selectFrom('users').select('id').where(sql<boolean>`lower(username) = any(${names}::text[])`).execute();
  return rows.map((r) => r.id);
}

/** Authors and texts of the (non-system) notes on a noteable. */
async function notesOf(db: Database, type: string, key: { column: 'noteable_id' | 'commit_id'; value: number | string }, projectId: number | null) {
  let q = db.selectFrom('notes').select(['author_id', 'body']).where('noteable_type', '=', type).where('system', '=', false);
  q = key.column === 'noteable_id' ? q.where('noteable_id', '=', key.value as number) : q.where('commit_id', '=', key.value as string);
  if (projectId !== null) q = q.where('project_id', '=', projectId);
  return q.execute();
}

async function userLevels(db: Database, ids: number[], where: { projectId: number } | { groupId: number }): Promise<Map<number, number>> {
  if (!ids.length) return new Map();
  const rows = 'projectId' in where
    ? await sql<{ user_id: number; level: number }>`
        select user_id, max(access_level)::int as level from project_authorized_users(${where.projectId})
         where user_id = any(${ids}::int[]) group by user_id`.execute(db)
    : await sql<{ user_id: number; level: number }>`
        select user_id, max(access_level)::int as level from group_access_grants
         where group_id = ${where.groupId} and user_id = any(${ids}::int[]) group by user_id`.execute(db);
  return new Map(rows.rows.map((r) => [r.user_id, r.level]));
}

/** Readers of a project thing: `check` decides per user with their level on the project. */
function projectReaders(db: Database, project: ProjectWithNamespace, check: (user: User, subject: { project: ProjectWithNamespace; accessLevel: number }) => boolean) {
  return async (users: User[]) => {
    const levels = await userLevels(db, users.map((u) => u.id), { projectId: project.id });
    return new Set(users.filter((u) => check(u, { project, accessLevel: effectiveLevel(u, levels.get(u.id) ?? 0) })).map((u) => u.id));
  };
}

async function usernames(db: Database, ids: number[]): Promise<Map<number, User>> {
  if (!ids.length) return new Map();
  const rows = await db.selectFrom('users').selectAll().where('id', 'in', ids).execute();
  return new Map(rows.map((u) => [u.id, u as User]));
}

const names = (users: Map<number, User>, ids: number[]) => ids.map((id) => users.get(id)?.name ?? 'Someone').join(', ');

function projectUrl(cairn: Cairn, project: ProjectWithNamespace): string {
  return `${cairn.config.externalUrl}/${projectFullPath(project)}`;
}

// ---------------------------------------------------------------------------------------------
// What each event is about

interface Loaded {
  subject: Subject;
  candidates: Candidates;
  /** The user the event's text names as its doer. */
  actor: User | null;
}

/** A loaded issue or merge request with its people. */
interface Issuable {
  kind: 'issue' | 'merge_request';
  row: Issue | MergeRequest;
  project: ProjectWithNamespace;
  assigneeIds: number[];
  reviewerIds: number[];
  /** Participants: author, assignees, reviewers, commenters, users mentioned in it. */
  participants: number[];
  thread: Thread;
  subjectLine: string;
  webUrl: string;
  reference: string;
  readers: Subject['readers'];
  subscribable: { type: string; id: number };
}

async function loadIssuable(cairn: Cairn, type: 'Issue' | 'MergeRequest', id: number): Promise<Issuable | null> {
  const { db } = cairn;
  if (type === 'Issue') {
    const issue = await db.selectFrom('issues').selectAll().where('id', '=', id).executeTakeFirst();
    if (!issue) return null;
    const project = await findProjectRow(db, issue.project_id);
    if (!project) return null;
    const assigneeIds = (await db.selectFrom('issue_assignees').select('user_id').where('issue_id', '=', id).execute()).map((r) => r.user_id);
    const notes = await notesOf(db, 'Issue', { column: 'noteable_id', value: id }, project.id);
    const mentioned = await usersMentionedIn(db, [issue.description, ...notes.map((n) => n.body)]);
    return {
      kind: 'issue',
      row: issue,
      project,
      assigneeIds,
      reviewerIds: [],
      participants: [issue.author_id, ...assigneeIds, ...notes.map((n) => n.author_id), ...mentioned].filter((x): x is number => typeof x === 'number'),
      thread: { kind: 'issue', id: issue.id },
      subjectLine: `${issue.title} (#${issue.iid})`,
      webUrl: `${projectUrl(cairn, project)}/-/issues/${issue.iid}`,
      reference: `#${issue.iid}`,
      readers: projectReaders(db, project, (u, s) => canSeeIssue(u, s, issue, assigneeIds)),
      subscribable: { type: 'Issue', id: issue.id },
    };
  }
  const mr = await db.selectFrom('merge_requests').selectAll().where('id', '=', id).executeTakeFirst();
  if (!mr) return null;
  const project = await findProjectRow(db, mr.target_project_id);
  if (!project) return null;
  const assigneeIds = (await db.selectFrom('merge_request_assignees').select('user_id').where('merge_request_id', '=', id).execute()).map((r) => r.user_id);
  const reviewerIds = (await db.selectFrom('merge_request_reviewers').select('user_id').where('merge_request_id', '=', id).execute()).map((r) => r.user_id);
  const notes = await notesOf(db, 'MergeRequest', { column: 'noteable_id', value: id }, project.id);
  const mentioned = await usersMentionedIn(db, [mr.description, ...notes.map((n) => n.body)]);
  return {
    kind: 'merge_request',
    row: mr,
    project,
    assigneeIds,
    reviewerIds,
    participants: [mr.author_id, ...assigneeIds, ...reviewerIds, ...notes.map((n) => n.author_id), ...mentioned].filter((x): x is number => typeof x === 'number'),
    thread: { kind: 'merge_request', id: mr.id },
    subjectLine: `${mr.title} (!${mr.iid})`,
    webUrl: `${projectUrl(cairn, project)}/-/merge_requests/${mr.iid}`,
    reference: `!${mr.iid}`,
    readers: projectReaders(db, project, (u, s) => can(u, 'read_merge_request', s)),
    subscribable: { type: 'MergeRequest', id: mr.id },
  };
}

interface LoadedEpic {
  epic: Epic;
  group: Namespace;
  participants: number[];
  thread: Thread;
  subjectLine: string;
  webUrl: string;
  readers: Subject['readers'];
}

async function loadEpic(cairn: Cairn, id: number): Promise<LoadedEpic | null> {
  const { db } = cairn;
  const epic = await db.selectFrom('epics').selectAll().where('id', '=', id).executeTakeFirst();
  if (!epic) return null;
  const group = await db.selectFrom('namespaces').selectAll().where('id', '=', epic.group_id).executeTakeFirst();
  if (!group) return null;
  const notes = await notesOf(db, 'Epic', { column: 'noteable_id', value: id }, null);
  const mentioned = await usersMentionedIn(db, [epic.description, ...notes.map((n) => n.body)]);
  return {
    epic: epic as Epic,
    group: group as Namespace,
    participants: [epic.author_id, ...notes.map((n) => n.author_id), ...mentioned].filter((x): x is number => typeof x === 'number'),
    thread: { kind: 'epic', id: epic.id },
    subjectLine: `${epic.title} (&${epic.iid})`,
    webUrl: `${cairn.config.externalUrl}/groups/${group.full_path}/-/epics/${epic.iid}`,
    readers: async (users) => {
      const levels = await userLevels(db, users.map((u) => u.id), { groupId: group.id });
      return new Set(users.filter((u) => {
        const s = { group: group as Namespace, accessLevel: effectiveLevel(u, levels.get(u.id) ?? 0) };
        return can(u, 'read_epic', s) && (!epic.confidential || can(u, 'read_confidential_epic', s));
      }).map((u) => u.id));
    },
  };
}

/** The body line naming the doer: "Closed by Jane Doe". */
const byLine = (what: string, actor: User | null) => (actor ? `${what} by ${actor.name}.` : `${what}.`);

/** Issues and merge requests: every event but notes (GitLab's Default builder). */
async function loadIssuableEvent(cairn: Cairn, event: NotifyEvent, actor: User | null): Promise<Loaded | null> {
  const it = await loadIssuable(cairn, event.target.type as 'Issue' | 'MergeRequest', event.target.id);
  if (!it) return null;
  const c = new Candidates();
  c.add(it.participants, 'participating');
  const noun = it.kind === 'issue' ? 'Issue' : 'Merge request';
  const row = it.row;
  let paragraphs: string[];
  let reply = true;
  const people = await usernames(cairn.db, [...it.assigneeIds, ...(event.previousAssigneeIds ?? []), ...it.reviewerIds]);
  switch (event.action) {
    case 'new_issue':
    case 'new_merge_request': {
      reply = false;
      c.add(await usersMentionedIn(cairn.db, [row.description]), 'mention');
      c.add(it.assigneeIds, 'participating');
      c.add(it.reviewerIds, 'mention');
      c.add(await labelSubscribers(cairn.db, it.subscribable), 'subscription');
      paragraphs = [
        `${actor?.name ?? 'Someone'} created ${it.kind === 'issue' ? 'an issue' : 'a merge request'}: ${it.subjectLine}`,
        ...(it.kind === 'merge_request' ? [`Branches: ${(row as MergeRequest).source_branch} → ${(row as MergeRequest).target_branch}`] : []),
        ...(it.assigneeIds.length ? [`Assignee: ${names(people, it.assigneeIds)}`] : []),
        ...(it.reviewerIds.length ? [`Reviewers: ${names(people, it.reviewerIds)}`] : []),
        ...(row.description ? [row.description] : []),
      ];
      break;
    }
    case 'reassign_issue':
    case 'reassign_merge_request': {
      const before = event.previousAssigneeIds ?? [];
      c.add(before, 'mention');
      c.add(it.assigneeIds, 'mention');
      paragraphs = [
        it.assigneeIds.length
          ? before.length ? `Assignee changed from ${names(people, before)} to ${names(people, it.assigneeIds)}` : `Assignee changed to ${names(people, it.assigneeIds)}`
          : `Assignee removed (was ${names(people, before)})`,
        byLine(`${noun} ${it.reference} was reassigned`, actor),
      ];
      break;
    }
    case 'close_issue':
    case 'close_merge_request':
      paragraphs = [byLine(`${noun} ${it.reference} was closed`, actor)];
      break;
    case 'reopen_issue':
    case 'reopen_merge_request':
      paragraphs = [byLine(`${noun} ${it.reference} was reopened`, actor)];
      break;
    case 'merge_merge_request':
      paragraphs = [byLine(`Merge request ${it.reference} was merged`, actor)];
      break;
    case 'merge_when_pipeline_succeeds':
      paragraphs = [byLine(`Merge request ${it.reference} was scheduled to merge after the pipeline succeeds`, actor)];
      break;
    case 'push_to_merge_request': {
      const commits = event.commits ?? [];
      paragraphs = [
        `${actor?.name ?? 'Someone'} pushed new commits to merge request ${it.reference}:`,
        commits.map((cm) => `* ${cm.id.slice(0, 8)} - ${cm.title}`).join('\n'),
      ];
      break;
    }
    case 'issue_due':
      paragraphs = [`Issue ${it.reference} is due on ${(row as Issue).due_date}.`];
      break;
    default:
      return null;
  }
  c.add(await subscribers(cairn.db, it.subscribable), 'subscription');
  await addLevelWatchers(cairn.db, c, it.project, null);
  const message = renderMessage({
    context: it.project.name,
    subjectParts: [it.subjectLine],
    reply,
    thread: it.thread,
    paragraphs,
    webUrl: it.webUrl,
    host: hostOf(cairn),
    headers: { 'X-Cairn-Project': projectFullPath(it.project), 'X-Cairn-Event': event.action },
  });
  return { subject: { project: it.project, group: null, subscribable: it.subscribable, readers: it.readers, message }, candidates: c, actor };
}

async function loadEpicEvent(cairn: Cairn, event: NotifyEvent, actor: User | null): Promise<Loaded | null> {
  if (event.action !== 'new_epic') return null;
  const e = await loadEpic(cairn, event.target.id);
  if (!e) return null;
  const c = new Candidates();
  c.add(e.participants, 'participating');
  c.add(await usersMentionedIn(cairn.db, [e.epic.description]), 'mention');
  c.add(await subscribers(cairn.db, { type: 'Epic', id: e.epic.id }), 'subscription');
  await addLevelWatchers(cairn.db, c, null, e.group);
  const message = renderMessage({
    context: e.group.name,
    subjectParts: [e.subjectLine],
    reply: false,
    thread: e.thread,
    paragraphs: [`${actor?.name ?? 'Someone'} created an epic: ${e.subjectLine}`, ...(e.epic.description ? [e.epic.description] : [])],
    webUrl: e.webUrl,
    host: hostOf(cairn),
    headers: { 'X-Cairn-Group': e.group.full_path, 'X-Cairn-Event': event.action },
  });
  return { subject: { project: null, group: e.group, subscribable: { type: 'Epic', id: e.epic.id }, readers: e.readers, message }, candidates: c, actor };
}

// ---------------------------------------------------------------------------------------------
// Notes (GitLab's NewNote builder): participants of the noteable, users the note mentions,
// watchers, custom levels with new_note, subscribers of the noteable.

/** What a note's noteable contributes: who takes part, who may read it, how its thread is named. */
interface NoteableFacts {
  project: ProjectWithNamespace | null;
  group: Namespace | null;
  participants: number[];
  subscribable: { type: string; id: number } | null;
  readers: Subject['readers'];
  thread: Thread;
  context: string;
  subjectLine: string;
  webUrl: string;
}

interface NoteRow {
  id: number;
  noteable_type: string;
  noteable_id: number | null;
  commit_id: string | null;
  project_id: number | null;
  author_id: number | null;
  body: string;
}

type NoteableLoader = (cairn: Cairn, note: NoteRow) => Promise<NoteableFacts | null>;

/** Noteables whose notes are mailed. Snippets: add 'Snippet' here with a loader of the same shape. */
export const NOTEABLE_LOADERS: Record<string, NoteableLoader> = {
  Issue: (cairn, note) => issuableFacts(cairn, 'Issue', note),
  MergeRequest: (cairn, note) => issuableFacts(cairn, 'MergeRequest', note),
  Epic: async (cairn, note) => {
    const e = note.noteable_id ? await loadEpic(cairn, note.noteable_id) : null;
    if (!e) return null;
    return {
      project: null,
      group: e.group,
      participants: e.participants,
      subscribable: { type: 'Epic', id: e.epic.id },
      readers: e.readers,
      thread: e.thread,
      context: e.group.name,
      subjectLine: e.subjectLine,
      webUrl: e.webUrl,
    };
  },
  Commit: async (cairn, note) => {
    if (!note.commit_id || note.project_id === null) return null;
    const project = await findProjectRow(cairn.db, note.project_id);
    if (!project) return null;
    const commit = await findCommit(cairn, project, note.commit_id).catch(() => null);
    const notes = await notesOf(cairn.db, 'Commit', { column: 'commit_id', value: note.commit_id }, project.id);
    const author = commit?.author.email
      ? await cairn.db.selectFrom('users').select('id').where(sql<boolean>`lower(email) = lower(${commit.author.email})`).executeTakeFirst()
      : undefined;
    const mentioned = await usersMentionedIn(cairn.db, notes.map((n) => n.body));
    const title = commit ? commit.message.split('\n')[0] : note.commit_id;
    return {
      project,
      group: null,
      participants: [author?.id, ...notes.map((n) => n.author_id), ...mentioned].filter((x): x is number => typeof x === 'number'),
      subscribable: null,
      readers: projectReaders(cairn.db, project, (u, s) => can(u, 'read_commit_note', s)),
      thread: { kind: 'commit', id: note.commit_id },
      context: project.name,
      subjectLine: `${title} (${note.commit_id.slice(0, 8)})`,
      webUrl: `${projectUrl(cairn, project)}/-/commit/${note.commit_id}`,
    };
  },
  // Project snippets (personal snippets have no notes API): the author, commenters and mentioned
  // users take part; readers are those the snippet policy lets read it.
  Snippet: async (cairn, note) => {
    if (!note.noteable_id || note.project_id === null) return null;
    const snippet = await cairn.db.selectFrom('snippets').selectAll().where('id', '=', note.noteable_id).executeTakeFirst();
    const project = snippet ? await findProjectRow(cairn.db, note.project_id) : null;
    if (!snippet || !project) return null;
    const notes = await notesOf(cairn.db, 'Snippet', { column: 'noteable_id', value: snippet.id }, project.id);
    const mentioned = await usersMentionedIn(cairn.db, [snippet.description ?? '', ...notes.map((n) => n.body)]);
    return {
      project,
      group: null,
      participants: [snippet.author_id, ...notes.map((n) => n.author_id), ...mentioned].filter((x): x is number => typeof x === 'number'),
      subscribable: null,
      readers: projectReaders(cairn.db, project, (u, s) => canReadSnippet(u, snippet, s as SnippetProjectSubject)),
      thread: { kind: 'snippet', id: snippet.id },
      context: project.name,
      subjectLine: `${snippet.title} ($${snippet.id})`,
      webUrl: `${projectUrl(cairn, project)}/-/snippets/${snippet.id}`,
    };
  },
};

/** Whether notes on this noteable type are mailed (services/notes.ts asks before enqueueing). */
export function mailsNotesOn(noteableType: string): boolean {
  return noteableType in NOTEABLE_LOADERS;
}

async function issuableFacts(cairn: Cairn, type: 'Issue' | 'MergeRequest', note: NoteRow): Promise<NoteableFacts | null> {
  const it = note.noteable_id ? await loadIssuable(cairn, type, note.noteable_id) : null;
  if (!it) return null;
  return {
    project: it.project,
    group: null,
    participants: it.participants,
    subscribable: it.subscribable,
    readers: it.readers,
    thread: it.thread,
    context: it.project.name,
    subjectLine: it.subjectLine,
    webUrl: it.webUrl,
  };
}

async function loadNoteEvent(cairn: Cairn, event: NotifyEvent, actor: User | null): Promise<Loaded | null> {
  const note = await cairn.db
    .selectFrom('notes')
    .select(['id', 'noteable_type', 'noteable_id', 'commit_id', 'project_id', 'author_id', 'body', 'system'])
    .where('id', '=', event.target.id)
    .executeTakeFirst();
  if (!note || note.system) return null;
  const loader = NOTEABLE_LOADERS[note.noteable_type];
  const facts = loader ? await loader(cairn, note) : null;
  if (!facts) return null;
  const c = new Candidates();
  c.add(facts.participants, 'participating');
  c.add(await usersMentionedIn(cairn.db, [note.body]), 'mention');
  if (facts.subscribable) c.add(await subscribers(cairn.db, facts.subscribable), 'subscription');
  await addLevelWatchers(cairn.db, c, facts.project, facts.group);
  const message = renderMessage({
    context: facts.context,
    subjectParts: [facts.subjectLine],
    reply: true,
    thread: facts.thread,
    ownId: `note_${note.id}`,
    paragraphs: [`${actor?.name ?? 'Someone'} commented:`, note.body],
    webUrl: `${facts.webUrl}#note_${note.id}`,
    host: hostOf(cairn),
    headers: { ...(facts.project ? { 'X-Cairn-Project': projectFullPath(facts.project) } : {}), 'X-Cairn-Event': 'new_note' },
  });
  return { subject: { project: facts.project, group: facts.group, subscribable: facts.subscribable, readers: facts.readers, message }, candidates: c, actor };
}

// ---------------------------------------------------------------------------------------------
// Pipelines: mailed to the pipeline's user only, as their level allows (GitLab's pipeline_finished).

async function loadPipelineEvent(cairn: Cairn, event: NotifyEvent): Promise<Loaded | null> {
  const p = await cairn.db.selectFrom('ci_pipelines').selectAll().where('id', '=', event.target.id).executeTakeFirst();
  if (!p || p.user_id === null) return null;
  const project = await findProjectRow(cairn.db, p.project_id);
  if (!project) return null;
  const c = new Candidates();
  c.add([p.user_id], 'watch');
  const status = event.action === 'failed_pipeline' ? 'Failed' : event.action === 'fixed_pipeline' ? 'Fixed' : 'Successful';
  const failedJobs = event.action === 'failed_pipeline'
    ? await cairn.db.selectFrom('ci_builds').select(['name', 'stage']).where('pipeline_id', '=', p.id).where('retried', '=', false).where('status', '=', 'failed').where('allow_failure', '=', false).orderBy('id').execute()
    : [];
  const shortSha = p.sha.slice(0, 8);
  const webUrl = `${projectUrl(cairn, project)}/-/pipelines/${p.id}`;
  const message = renderMessage({
    context: null,
    subjectParts: [`${status} pipeline for ${p.ref}`, project.name, shortSha],
    reply: false,
    thread: { kind: 'pipeline', id: `${p.id}_${p.status}_${Date.now().toString(36)}` },
    paragraphs: [
      `Pipeline #${p.id} ${event.action === 'failed_pipeline' ? 'has failed' : event.action === 'fixed_pipeline' ? 'has been fixed' : 'has succeeded'} for ${p.ref} (${shortSha}) in ${projectFullPath(project)}.`,
      ...(failedJobs.length ? [`Failed jobs:\n${failedJobs.map((j) => `* ${j.stage}: ${j.name}`).join('\n')}`] : []),
    ],
    webUrl,
    host: hostOf(cairn),
    headers: { 'X-Cairn-Project': projectFullPath(project), 'X-Cairn-Event': event.action, 'X-Cairn-Pipeline-Id': String(p.id) },
  });
  const readers = projectReaders(cairn.db, project, (u, s) => can(u, 'read_build', s));
  return { subject: { project, group: null, subscribable: null, readers, message }, candidates: c, actor: null };
}

// ---------------------------------------------------------------------------------------------
// A project moved to another namespace: its maintainers and owners (GitLab's project_was_moved).

async function loadMovedProjectEvent(cairn: Cairn, event: NotifyEvent, actor: User | null): Promise<Loaded | null> {
  const project = await findProjectRow(cairn.db, event.target.id);
  if (!project) return null;
  const rows = await sql<{ user_id: number }>`
    select user_id from project_authorized_users(${project.id}) group by user_id having max(access_level) >= 40`.execute(cairn.db);
  const c = new Candidates();
  c.add(rows.rows.map((r) => r.user_id), 'custom');
  const webUrl = projectUrl(cairn, project);
  const message = renderMessage({
    context: project.name,
    subjectParts: ['Project was moved'],
    reply: false,
    thread: { kind: 'project', id: `${project.id}_moved_${Date.now().toString(36)}` },
    paragraphs: [
      byLine(`Project ${event.oldPath ?? ''} was moved to ${projectFullPath(project)}`.replace('  ', ' '), actor),
      `Update your local clone with:\n  git remote set-url origin ${webUrl}.git`,
    ],
    webUrl,
    host: hostOf(cairn),
    headers: { 'X-Cairn-Project': projectFullPath(project), 'X-Cairn-Event': event.action },
  });
  const readers = projectReaders(cairn.db, project, (u, s) => can(u, 'read_project', s));
  return { subject: { project, group: null, subscribable: null, readers, message }, candidates: c, actor };
}

// ---------------------------------------------------------------------------------------------
// Levels, subscriptions, the filter

async function subscribers(db: Database, s: { type: string; id: number }): Promise<number[]> {
  const rows = await db.selectFrom('subscriptions').select('user_id')
    .where('subscribable_type', '=', s.type).where('subscribable_id', '=', s.id).where('subscribed', '=', true).execute();
  return rows.map((r) => r.user_id);
}

async function labelSubscribers(db: Database, s: { type: string; id: number }): Promise<number[]> {
  const rows = await sql<{ user_id: number }>`
    select distinct sub.user_id from label_links ll
      join subscriptions sub on sub.subscribable_type = 'Label' and sub.subscribable_id = ll.label_id and sub.subscribed
     where ll.target_type = ${s.type} and ll.target_id = ${s.id}`.execute(db);
  return rows.rows.map((r) => r.user_id);
}

async function explicitlyUnsubscribed(db: Database, s: { type: string; id: number } | null): Promise<Set<number>> {
  if (!s) return new Set();
  const rows = await db.selectFrom('subscriptions').select('user_id')
    .where('subscribable_type', '=', s.type).where('subscribable_id', '=', s.id).where('subscribed', '=', false).execute();
  return new Set(rows.map((r) => r.user_id));
}

/**
 * Users whose level where the thing lives is watch or custom: everyone with a setting on the
 * project or a group up its chain, and its members (whose level there is their global one,
 * GitLab giving every member a setting row at `global`).
 */
async function addLevelWatchers(db: Database, c: Candidates, project: ProjectWithNamespace | null, group: Namespace | null) {
  const chain = chainOf(project, group);
  const members = project
    ? sql`select user_id from project_authorized_users(${project.id})`
    : sql`select user_id from group_access_grants where group_id = ${group!.id}`;
  const rows = await sql<{ user_id: number }>`
    select user_id from notification_settings
     where (source_type = 'Project' and source_id = ${project?.id ?? 0})
        or (source_type = 'Namespace' and source_id = any(${chain}::int[]))
    union ${members}`.execute(db);
  const ids = rows.rows.map((r) => r.user_id);
  const settings = await effectiveSettings(db, ids, { projectId: project?.id ?? null, groupChain: chain });
  for (const id of ids) {
    const level = settings.get(id)?.level;
    if (level === 'watch') c.add([id], 'watch');
    else if (level === 'custom') c.add([id], 'custom');
  }
}

function chainOf(project: ProjectWithNamespace | null, group: Namespace | null): number[] {
  if (project) return project.namespace.type === 'Group' ? project.namespace.traversal_ids : [];
  return group ? group.traversal_ids : [];
}

/** GitLab's suitable_notification_level?: does this level ask for this concern with this event? */
export function suitableLevel(setting: Pick<EffectiveSetting, 'level' | 'events'>, concern: Concern, action: NotificationEvent): boolean {
  const participatingOrMention = concern === 'participating' || concern === 'mention';
  switch (setting.level) {
    case 'mention':
      return concern === 'mention';
    case 'participating':
      return PARTICIPATING_EVENTS.has(action) || participatingOrMention;
    case 'custom':
      return eventEnabled(setting, action) || (action === 'fixed_pipeline' && eventEnabled(setting, 'success_pipeline')) || participatingOrMention;
    case 'watch':
      return !EXCLUDED_WATCHER_EVENTS.has(action);
    default:
      return false;
  }
}

/** E-mail is off for the project or any group up its chain (emails_enabled false). */
async function emailsDisabled(db: Database, project: ProjectWithNamespace | null, group: Namespace | null): Promise<boolean> {
  if (project && (project.settings as Record<string, unknown>)?.emails_enabled === false) return true;
  const chain = chainOf(project, group);
  if (!chain.length) return false;
  const off = await db.selectFrom('namespaces').select('id').where('id', 'in', chain).where(sql<boolean>`(settings->>'emails_enabled') = 'false'`).executeTakeFirst();
  return !!off;
}

const RECEIVES_NOTIFICATIONS = new Set(['human', 'service_user']);

/** The recipients of a loaded event, each with the address to send to. */
async function recipientsOf(cairn: Cairn, action: NotificationEvent, loaded: Loaded): Promise<{ user: User; email: string }[]> {
  const { db } = cairn;
  const { subject, candidates } = loaded;
  if (!candidates.concerns.size) return [];
  if (await emailsDisabled(db, subject.project, subject.group)) return [];
  const ids = [...candidates.concerns.keys()];
  const users = (await db.selectFrom('users').selectAll().where('id', 'in', ids).execute()) as User[];
  const active = users.filter((u) => u.state === 'active' && RECEIVES_NOTIFICATIONS.has(u.user_type) && u.id !== loaded.actor?.id);
  const readers = await subject.readers(active);
  const settings = await effectiveSettings(db, active.map((u) => u.id), { projectId: subject.project?.id ?? null, groupChain: chainOf(subject.project, subject.group) });
  const unsubscribed = await explicitlyUnsubscribed(db, subject.subscribable);
  const out: { user: User; email: string }[] = [];
  for (const user of active) {
    if (!readers.has(user.id)) continue;
    const setting = settings.get(user.id)!;
    const ok = [...candidates.concerns.get(user.id)!].some((concern) => {
      // Even users with notifications disabled get what they subscribed to.
      if (concern === 'subscription') return !unsubscribed.has(user.id);
      if (!suitableLevel(setting, concern, action)) return false;
      // Who unsubscribed hears only of mentions.
      return concern === 'mention' || !unsubscribed.has(user.id);
    });
    if (ok) out.push({ user, email: await notificationEmailOf(db, user, setting.chosenEmail) });
  }
  return out;
}

async function load(cairn: Cairn, event: NotifyEvent): Promise<Loaded | null> {
  const actor = event.actorId !== null ? (await findUserById(cairn.db, event.actorId)) ?? null : null;
  switch (event.target.type) {
    case 'Issue':
    case 'MergeRequest':
      return loadIssuableEvent(cairn, event, actor);
    case 'Epic':
      return loadEpicEvent(cairn, event, actor);
    case 'Note':
      return loadNoteEvent(cairn, event, actor);
    case 'Pipeline':
      return loadPipelineEvent(cairn, event);
    case 'Project':
      return loadMovedProjectEvent(cairn, event, actor);
    default:
      return null;
  }
}

/** Who an event would mail (tests and the notify job). */
export async function notificationRecipients(cairn: Cairn, event: NotifyEvent): Promise<{ recipients: { user: User; email: string }[]; message: RenderedMessage } | null> {
  const loaded = await load(cairn, event);
  if (!loaded) return null;
  return { recipients: await recipientsOf(cairn, event.action, loaded), message: loaded.subject.message };
}

defineJob(NOTIFY_JOB, async (cairn, payload) => {
  if (!mailEnabled(cairn.config)) return;
  const event = payload as NotifyEvent & { key: string };
  const planned = await notificationRecipients(cairn, event);
  if (!planned || !planned.recipients.length) return;
  const byId = new Map(planned.recipients.map((r) => [r.user.id, r]));
  await cairn.db.transaction().execute(async (trx) => {
    // Only those not handed this event before: a retried job mails nobody twice.
    const fresh = await sql<{ user_id: number }>`
      insert into notification_deliveries (event_key, user_id)
      select ${event.key}, unnest(${[...byId.keys()]}::int[])
      on conflict do nothing
      returning user_id`.execute(trx);
    for (const { user_id } of fresh.rows) {
      const mail: OutgoingMail = { ...planned.message, to: byId.get(user_id)!.email, headers: { ...planned.message.headers, 'X-Cairn-NotificationReason': event.action } };
      await enqueue(trx, DELIVER_JOB, { mail, userId: user_id });
    }
  });
});

defineJob(DELIVER_JOB, async (cairn, payload) => {
  await sendMail(cairn.config, payload.mail as OutgoingMail);
});

/**
 * Daily: issues due tomorrow (open ones), as GitLab's IssueDueSchedulerWorker. Keyed by issue
 * and date, so a second run on the same day mails nobody again. Also forgets deliveries older
 * than 30 days (retries never come that late).
 */
export async function notifyIssuesDueTomorrow(cairn: Cairn): Promise<number> {
  if (!mailEnabled(cairn.config)) return 0;
  const due = await sql<{ id: number; due_date: string }>`
    select id, due_date::text as due_date from issues where state_id = 1 and due_date = current_date + 1`.execute(cairn.db);
  for (const issue of due.rows) {
    await notify(cairn, cairn.db, { action: 'issue_due', target: { type: 'Issue', id: issue.id }, actorId: null, key: `issue_due:${issue.id}:${issue.due_date}` });
  }
  await sql`delete from notification_deliveries where created_at < now() - interval '30 days'`.execute(cairn.db);
  return due.rows.length;
}

defineRecurring(ISSUE_DUE_JOB, 24 * 3600, async (cairn) => {
  await notifyIssuesDueTomorrow(cairn);
});
