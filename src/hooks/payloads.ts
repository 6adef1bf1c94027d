import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import type { Issue, MergeRequest } from '../db/schema/work_items.js';
import type { Note } from '../db/schema/notes.js';
import type { Snippet } from '../db/schema/snippets.js';
import type { CiBuild } from '../db/schema/ci.js';
import { findProjectRow } from '../finders/projects.js';
import type { ParsedCommit } from '../git/catfile.js';
import { commitPathChanges, commitsBetween, countCommitsBetween, readCommitsOnce, type PathChanges } from '../git/compare.js';
import { isZeroOid } from '../git/validate.js';
import { projectFullPath, projectSettings, projectWebUrl, type ProjectRow } from '../presenters/projects.js';
import { releaseSources } from '../presenters/releases.js';
import { iso, sshRepoUrl } from '../presenters/users.js';
import { projectRepoPath } from '../services/projects.js';
import type { HookTrigger } from './delivery.js';

/**
 * GitLab's webhook payloads ("Webhook events"), built from the database and the repository when
 * the event's job runs: push and tag push, issues, merge requests, notes, pipelines, jobs, releases,
 * milestones and emoji reactions.
 */

/** What building a payload reads: the database (the caller's transaction, so it sees the change) and the settings. */
export type HookContext = Pick<Cairn, 'db' | 'config'>;

export type Changes = Record<string, { previous: unknown; current: unknown }>;
export type HookEvent =
  | { kind: 'push'; projectId: number; userId: number | null; ref: string; before: string; after: string; pushOptions?: string[] }
  | { kind: 'issue'; projectId: number; id: number; userId: number | null; action: 'open' | 'update' | 'close' | 'reopen'; changes?: Changes }
  | { kind: 'merge_request'; projectId: number; id: number; userId: number | null; action: 'open' | 'update' | 'close' | 'reopen' | 'merge'; changes?: Changes; oldrev?: string }
  | { kind: 'note'; projectId: number; id: number; userId: number | null; action: 'create' | 'update' }
  | { kind: 'pipeline'; projectId: number; id: number }
  | { kind: 'job'; projectId: number; id: number }
  /** Queued before a deletion, in its transaction: the payload is built while the release is there. */
  | { kind: 'release'; projectId: number; id: number; action: 'create' | 'update' | 'delete' }
  | { kind: 'milestone'; projectId: number; id: number; action: 'create' | 'close' | 'reopen' }
  /** Queued before a revoked award goes, in its transaction (as a release's deletion). */
  | { kind: 'emoji'; projectId: number; id: number; userId: number; action: 'award' | 'revoke' };

/** At most this many commits in a push payload (total_commits_count says how many there were). */
export const PUSH_COMMITS_LIMIT = 20;

const baseUrl = (cairn: HookContext) => cairn.config.externalUrl;

/** GitLab's Project#hook_attrs. */
export function projectHookAttrs(cairn: HookContext, p: ProjectRow) {
  const web = projectWebUrl({ baseUrl: baseUrl(cairn) }, p);
  const ssh = sshRepoUrl(baseUrl(cairn), cairn.config.sshPort ?? undefined, projectFullPath(p));
  const s = projectSettings(p);
  return {
    id: p.id,
    name: p.name,
    description: p.description ?? null,
    web_url: web,
    avatar_url: s.avatar_path ? `${baseUrl(cairn)}/uploads/-/system/project/avatar/${p.id}/${s.avatar_path}` : null,
    git_ssh_url: ssh,
    git_http_url: `${web}.git`,
    namespace: p.namespace.name,
    visibility_level: p.visibility_level,
    path_with_namespace: projectFullPath(p),
    default_branch: p.default_branch ?? null,
    ci_config_path: s.ci_config_path ?? null,
    homepage: web,
    url: ssh,
    ssh_url: ssh,
    http_url: `${web}.git`,
  };
}

function repositoryAttrs(cairn: HookContext, p: ProjectRow, full: boolean) {
  const project = projectHookAttrs(cairn, p);
  const base = { name: p.name, url: project.git_ssh_url, description: p.description ?? null, homepage: project.web_url };
  return full ? { ...base, git_http_url: project.git_http_url, git_ssh_url: project.git_ssh_url, visibility_level: p.visibility_level } : base;
}

/** GitLab's User#hook_attrs: the e-mail only when public. */
export function userHookAttrs(cairn: HookContext, u: User) {
  return {
    id: u.id,
    name: u.name,
    username: u.username,
    avatar_url: u.avatar_path ? `${baseUrl(cairn)}/uploads/-/system/user/avatar/${u.id}/${u.avatar_path}` : null,
    email: u.public_email || '[REDACTED]',
  };
}

function timestampWithOffset(sig: ParsedCommit['author']): string {
  const m = /^([+-])(\d{2})(\d{2})$/.exec(sig.tz);
  const offsetMin = m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) : 0;
  const local = new Date((sig.time + offsetMin * 60) * 1000).toISOString().slice(0, 19);
  return `${local}${m ? `${m[1]}${m[2]}:${m[3]}` : '+00:00'}`;
}

/** A commit as hooks show it (a push's commits add the paths they changed). */
function commitHookAttrs(cairn: HookContext, p: ProjectRow, c: ParsedCommit) {
  return {
    id: c.oid,
    message: c.message,
    title: c.message.split('\n')[0].slice(0, 100),
    timestamp: timestampWithOffset(c.author),
    url: `${projectWebUrl({ baseUrl: baseUrl(cairn) }, p)}/-/commit/${c.oid}`,
    author: { name: c.author.name, email: c.author.email },
  };
}

async function loadUser(cairn: HookContext, id: number | null): Promise<User | undefined> {
  if (id === null) return undefined;
  return cairn.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
}

async function loadUsers(cairn: HookContext, ids: number[]): Promise<User[]> {
  if (!ids.length) return [];
  return cairn.db.selectFrom('users').selectAll().where('id', 'in', ids).orderBy('id').execute();
}

async function labelsOf(cairn: HookContext, type: 'Issue' | 'MergeRequest', id: number) {
  const rows = await cairn.db
    .selectFrom('label_links as ll')
    .innerJoin('labels as l', 'l.id', 'll.label_id')
    .select(['l.id', 'l.title', 'l.color', 'l.project_id', 'l.group_id', 'l.description', 'l.created_at', 'l.updated_at'])
    .where('ll.target_type', '=', type)
    .where('ll.target_id', '=', id)
    .orderBy('l.title')
    .execute();
  return rows.map((l) => ({
    id: l.id,
    title: l.title,
    color: l.color,
    project_id: l.project_id,
    created_at: iso(l.created_at),
    updated_at: iso(l.updated_at),
    template: false,
    description: l.description,
    type: l.project_id !== null ? 'ProjectLabel' : 'GroupLabel',
    group_id: l.group_id,
  }));
}

const ISSUE_STATES: Record<number, string> = { 1: 'opened', 2: 'closed' };
const MR_STATES: Record<number, string> = { 1: 'opened', 2: 'closed', 3: 'merged', 4: 'locked' };

async function issueAttrs(cairn: HookContext, p: ProjectRow, issue: Issue) {
  const assignees = (await cairn.db.selectFrom('issue_assignees').select('user_id').where('issue_id', '=', issue.id).execute()).map((r) => r.user_id);
  const labels = await labelsOf(cairn, 'Issue', issue.id);
  return {
    attrs: {
      author_id: issue.author_id,
      closed_at: iso(issue.closed_at),
      confidential: issue.confidential,
      created_at: iso(issue.created_at),
      description: issue.description ?? '',
      discussion_locked: issue.discussion_locked,
      due_date: issue.due_date ?? null,
      id: issue.id,
      iid: issue.iid,
      last_edited_at: null,
      last_edited_by_id: null,
      milestone_id: issue.milestone_id,
      moved_to_id: issue.moved_to_id,
      duplicated_to_id: null,
      project_id: issue.project_id,
      relative_position: null,
      state_id: issue.state_id,
      time_estimate: issue.time_estimate,
      title: issue.title,
      updated_at: iso(issue.updated_at),
      updated_by_id: null,
      type: issue.issue_type === 'incident' ? 'Incident' : issue.issue_type === 'test_case' ? 'TestCase' : 'Issue',
      url: `${projectWebUrl({ baseUrl: baseUrl(cairn) }, p)}/-/issues/${issue.iid}`,
      total_time_spent: issue.total_time_spent,
      time_change: 0,
      human_total_time_spent: null,
      human_time_change: null,
      human_time_estimate: null,
      assignee_ids: assignees,
      assignee_id: assignees[0] ?? null,
      labels,
      state: ISSUE_STATES[issue.state_id] ?? 'opened',
      severity: 'unknown',
    },
    assignees: await loadUsers(cairn, assignees),
    labels,
  };
}

async function lastCommitAttrs(cairn: HookContext, p: ProjectRow, sha: string | null) {
  if (!sha) return null;
  const [c] = await readCommitsOnce(projectRepoPath(cairn, p), [sha]);
  return c ? commitHookAttrs(cairn, p, c) : null;
}

async function mergeRequestAttrs(cairn: HookContext, p: ProjectRow, mr: MergeRequest) {
  const [assigneeRows, reviewerRows] = await Promise.all([
    cairn.db.selectFrom('merge_request_assignees').select('user_id').where('merge_request_id', '=', mr.id).execute(),
    cairn.db.selectFrom('merge_request_reviewers').select('user_id').where('merge_request_id', '=', mr.id).execute(),
  ]);
  const assignees = assigneeRows.map((r) => r.user_id);
  const reviewers = reviewerRows.map((r) => r.user_id);
  const labels = await labelsOf(cairn, 'MergeRequest', mr.id);
  const source = mr.source_project_id === null ? null : mr.source_project_id === p.id ? p : await findProjectRow(cairn.db, mr.source_project_id);
  const draft = /^\s*(\[draft\]|draft:|\(draft\))/i.test(mr.title);
  return {
    attrs: {
      assignee_id: assignees[0] ?? null,
      author_id: mr.author_id,
      created_at: iso(mr.created_at),
      description: mr.description ?? '',
      draft,
      head_pipeline_id: mr.head_pipeline_id,
      id: mr.id,
      iid: mr.iid,
      last_edited_at: null,
      last_edited_by_id: null,
      merge_commit_sha: mr.merge_commit_sha,
      merge_error: mr.merge_error,
      merge_params: mr.merge_params ?? {},
      merge_status: mr.merge_status,
      merge_user_id: mr.merge_user_id,
      merge_when_pipeline_succeeds: mr.merge_when_pipeline_succeeds,
      milestone_id: mr.milestone_id,
      source_branch: mr.source_branch,
      source_project_id: mr.source_project_id,
      state_id: mr.state_id,
      target_branch: mr.target_branch,
      target_project_id: mr.target_project_id,
      time_estimate: mr.time_estimate,
      title: mr.title,
      updated_at: iso(mr.updated_at),
      updated_by_id: null,
      url: `${projectWebUrl({ baseUrl: baseUrl(cairn) }, p)}/-/merge_requests/${mr.iid}`,
      source: source ? projectHookAttrs(cairn, source) : null,
      target: projectHookAttrs(cairn, p),
      last_commit: await lastCommitAttrs(cairn, p, mr.head_sha),
      work_in_progress: draft,
      total_time_spent: mr.total_time_spent,
      time_change: 0,
      human_total_time_spent: null,
      human_time_change: null,
      human_time_estimate: null,
      assignee_ids: assignees,
      reviewer_ids: reviewers,
      labels,
      state: MR_STATES[mr.state_id] ?? 'opened',
      blocking_discussions_resolved: true,
      first_contribution: false,
      detailed_merge_status: mr.state_id === 1 ? (mr.has_conflicts ? 'broken_status' : mr.merge_status === 'can_be_merged' ? 'mergeable' : mr.merge_status === 'cannot_be_merged' ? 'broken_status' : 'checking') : 'not_open',
    },
    assignees: await loadUsers(cairn, assignees),
    reviewers: await loadUsers(cairn, reviewers),
    labels,
  };
}

export interface BuildHelpers {
  protectedRef(ref: string, tag: boolean): Promise<boolean>;
}

export interface BuiltPayload {
  trigger: HookTrigger;
  data: Record<string, unknown>;
}

async function pushPayload(cairn: HookContext, p: ProjectRow, e: Extract<HookEvent, { kind: 'push' }>, helpers: BuildHelpers): Promise<BuiltPayload> {
  const tag = e.ref.startsWith('refs/tags/');
  const gitDir = projectRepoPath(cairn, p);
  const user = await loadUser(cairn, e.userId);
  let commits: (ReturnType<typeof commitHookAttrs> & PathChanges)[] = [];
  let total = 0;
  if (!isZeroOid(e.after)) {
    // A new branch lists what the default branch does not have; a tag, nothing but its count (as GitLab).
    let from: string | null = isZeroOid(e.before) ? null : e.before;
    if (from === null && !tag && p.default_branch && e.ref !== `refs/heads/${p.default_branch}`) from = `refs/heads/${p.default_branch}`;
    try {
      total = await countCommitsBetween(gitDir, from, e.after);
      if (!tag) {
        const oids = await commitsBetween(gitDir, from, e.after, { limit: PUSH_COMMITS_LIMIT });
        const parsed = await readCommitsOnce(gitDir, oids);
        const changes = await commitPathChanges(gitDir, parsed);
        commits = parsed.map((c) => ({ ...commitHookAttrs(cairn, p, c), ...(changes.get(c.oid) ?? { added: [], modified: [], removed: [] }) }));
      }
    } catch {
      // The default branch may be gone: count the commit's history instead.
      total = await countCommitsBetween(gitDir, null, e.after).catch(() => 0);
    }
  }
  const refName = e.ref.replace(/^refs\/(heads|tags)\//, '');
  const kind = tag ? 'tag_push' : 'push';
  return {
    trigger: tag ? 'tag_push_hooks' : 'push_hooks',
    data: {
      object_kind: kind,
      event_name: kind,
      before: e.before,
      after: e.after,
      ref: e.ref,
      ref_protected: await helpers.protectedRef(refName, tag),
      checkout_sha: isZeroOid(e.after) ? null : e.after,
      message: null,
      user_id: user?.id ?? null,
      user_name: user?.name ?? null,
      user_username: user?.username ?? null,
      user_email: user ? user.public_email || '[REDACTED]' : null,
      user_avatar: user ? userHookAttrs(cairn, user).avatar_url : null,
      project_id: p.id,
      project: projectHookAttrs(cairn, p),
      commits,
      total_commits_count: total,
      push_options: pushOptionsObject(e.pushOptions ?? []),
      repository: repositoryAttrs(cairn, p, true),
    },
  };
}

/** `git push -o ci.skip -o ci.variable=A=1` as GitLab shows them: { ci: { skip: true, variable: ['A=1'] } }. */
function pushOptionsObject(options: string[]): Record<string, unknown> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const o of options) {
    const m = /^([a-z_]+)\.([a-z_]+)(?:=(.*))?$/i.exec(o);
    if (!m) continue;
    const ns = (out[m[1]] ??= {});
    if (m[3] === undefined) ns[m[2]] = true;
    else if (m[2] === 'variable') ((ns[m[2]] as string[]) ??= []).push(m[3]);
    else ns[m[2]] = m[3];
  }
  return out;
}

/** Builds the payload of an event; null when what it was about is gone. */
export async function buildPayload(cairn: HookContext, e: HookEvent, helpers: BuildHelpers): Promise<BuiltPayload | null> {
  const p = await findProjectRow(cairn.db, e.projectId);
  if (!p) return null;
  switch (e.kind) {
    case 'push':
      return pushPayload(cairn, p, e, helpers);
    case 'issue': {
      const issue = await cairn.db.selectFrom('issues').selectAll().where('id', '=', e.id).executeTakeFirst();
      if (!issue) return null;
      const user = await loadUser(cairn, e.userId ?? issue.author_id);
      const { attrs, assignees, labels } = await issueAttrs(cairn, p, issue);
      const kind = issue.confidential ? 'confidential_issue' : 'issue';
      return {
        trigger: issue.confidential ? 'confidential_issue_hooks' : 'issue_hooks',
        data: {
          object_kind: 'issue',
          event_type: kind,
          user: user ? userHookAttrs(cairn, user) : null,
          project: projectHookAttrs(cairn, p),
          object_attributes: { ...attrs, action: e.action },
          labels,
          changes: e.changes ?? {},
          repository: repositoryAttrs(cairn, p, false),
          ...(assignees.length ? { assignees: assignees.map((u) => userHookAttrs(cairn, u)) } : {}),
        },
      };
    }
    case 'merge_request': {
      const mr = await cairn.db.selectFrom('merge_requests').selectAll().where('id', '=', e.id).executeTakeFirst();
      if (!mr) return null;
      const user = await loadUser(cairn, e.userId ?? mr.author_id);
      const { attrs, assignees, reviewers, labels } = await mergeRequestAttrs(cairn, p, mr);
      return {
        trigger: 'merge_request_hooks',
        data: {
          object_kind: 'merge_request',
          event_type: 'merge_request',
          user: user ? userHookAttrs(cairn, user) : null,
          project: projectHookAttrs(cairn, p),
          object_attributes: { ...attrs, action: e.action, ...(e.oldrev ? { oldrev: e.oldrev } : {}) },
          labels,
          changes: e.changes ?? {},
          repository: repositoryAttrs(cairn, p, false),
          ...(assignees.length ? { assignees: assignees.map((u) => userHookAttrs(cairn, u)) } : {}),
          ...(reviewers.length ? { reviewers: reviewers.map((u) => userHookAttrs(cairn, u)) } : {}),
        },
      };
    }
    case 'note':
      return notePayload(cairn, p, e);
    case 'pipeline':
      return pipelinePayload(cairn, p, e.id);
    case 'job':
      return null;
    case 'release':
      return releasePayload(cairn, p, e);
    case 'milestone':
      return milestonePayload(cairn, p, e);
    case 'emoji':
      return emojiPayload(cairn, p, e);
  }
}

/** A project snippet as note and emoji payloads show it (`web`: the project's web URL). */
function snippetHookAttrs(web: string, s: Snippet) {
  return { id: s.id, title: s.title, description: s.description, content: '', author_id: s.author_id, project_id: s.project_id, created_at: iso(s.created_at), updated_at: iso(s.updated_at), file_name: null, type: 'ProjectSnippet', visibility_level: s.visibility_level, url: `${web}/-/snippets/${s.id}` };
}

/** A time as Rails prints one in UTC, the form GitLab's release payloads use: "2020-11-02 12:55:12 UTC". */
function utcText(value: Date | string): string {
  return `${new Date(value as string).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** GitLab's release event (Release#hook_attrs): the release, its assets and its commit. */
async function releasePayload(cairn: HookContext, p: ProjectRow, e: Extract<HookEvent, { kind: 'release' }>): Promise<BuiltPayload | null> {
  const release = await cairn.db.selectFrom('releases').selectAll().where('id', '=', e.id).executeTakeFirst();
  if (!release) return null;
  const links = await cairn.db.selectFrom('release_links').selectAll().where('release_id', '=', release.id).orderBy('id').execute();
  const host = new URL(baseUrl(cairn)).host;
  const linkAttrs = links.map((l) => {
    let external = true;
    try {
      external = new URL(l.url).host !== host;
    } catch {}
    return { id: l.id, external, link_type: l.link_type, name: l.name, url: l.url };
  });
  const sources = releaseSources({ baseUrl: baseUrl(cairn) }, p, release.tag);
  return {
    trigger: 'release_hooks',
    data: {
      id: release.id,
      created_at: utcText(release.created_at),
      description: release.description,
      name: release.name,
      released_at: utcText(release.released_at),
      tag: release.tag,
      object_kind: 'release',
      project: projectHookAttrs(cairn, p),
      url: `${projectWebUrl({ baseUrl: baseUrl(cairn) }, p)}/-/releases/${encodeURIComponent(release.tag)}`,
      action: e.action,
      assets: { count: links.length + sources.length, links: linkAttrs, sources },
      commit: await lastCommitAttrs(cairn, p, release.sha),
    },
  };
}

/** GitLab's milestone event (a project milestone created, closed or reopened). */
async function milestonePayload(cairn: HookContext, p: ProjectRow, e: Extract<HookEvent, { kind: 'milestone' }>): Promise<BuiltPayload | null> {
  const m = await cairn.db.selectFrom('milestones').selectAll().where('id', '=', e.id).executeTakeFirst();
  if (!m) return null;
  return {
    trigger: 'milestone_hooks',
    data: {
      object_kind: 'milestone',
      event_type: 'milestone',
      project: projectHookAttrs(cairn, p),
      object_attributes: {
        id: m.id,
        iid: m.iid,
        title: m.title,
        description: m.description,
        state: m.state,
        created_at: utcText(m.created_at),
        updated_at: utcText(m.updated_at),
        due_date: m.due_date,
        start_date: m.start_date,
        group_id: m.group_id,
        project_id: m.project_id,
      },
      action: e.action,
    },
  };
}

/**
 * GitLab's emoji event: an award given or taken back on an issue, a merge request, a project
 * snippet or a note on one of them (or on a commit), with what it was awarded on. Nothing is
 * sent for what only confidential hooks may see (a confidential issue, an internal note).
 */
async function emojiPayload(cairn: HookContext, p: ProjectRow, e: Extract<HookEvent, { kind: 'emoji' }>): Promise<BuiltPayload | null> {
  const award = await cairn.db.selectFrom('award_emoji').selectAll().where('id', '=', e.id).executeTakeFirst();
  if (!award) return null;
  const web = projectWebUrl({ baseUrl: baseUrl(cairn) }, p);
  const on: Record<string, unknown> = {};
  let url: string;
  if (award.awardable_type === 'Note') {
    const note = await notePayload(cairn, p, { kind: 'note', projectId: p.id, id: award.awardable_id, userId: null, action: 'create' });
    if (!note || note.trigger !== 'note_hooks') return null;
    const { object_attributes: attrs, issue, merge_request, snippet, commit } = note.data as Record<string, any>;
    const { action: _action, ...noteAttrs } = attrs;
    Object.assign(on, { note: noteAttrs }, issue && { issue }, merge_request && { merge_request }, snippet && { snippet }, commit && { commit });
    url = attrs.url;
  } else if (award.awardable_type === 'Issue') {
    const issue = await cairn.db.selectFrom('issues').selectAll().where('id', '=', award.awardable_id).executeTakeFirst();
    if (!issue || issue.confidential) return null;
    on.issue = (await issueAttrs(cairn, p, issue)).attrs;
    url = `${web}/-/issues/${issue.iid}`;
  } else if (award.awardable_type === 'MergeRequest') {
    const mr = await cairn.db.selectFrom('merge_requests').selectAll().where('id', '=', award.awardable_id).executeTakeFirst();
    if (!mr) return null;
    on.merge_request = (await mergeRequestAttrs(cairn, p, mr)).attrs;
    url = `${web}/-/merge_requests/${mr.iid}`;
  } else if (award.awardable_type === 'Snippet') {
    const s = await cairn.db.selectFrom('snippets').selectAll().where('id', '=', award.awardable_id).executeTakeFirst();
    if (!s) return null;
    on.snippet = snippetHookAttrs(web, s);
    url = `${web}/-/snippets/${s.id}`;
  } else {
    return null;
  }
  const user = await loadUser(cairn, e.userId);
  return {
    trigger: 'emoji_hooks',
    data: {
      object_kind: 'emoji',
      event_type: e.action,
      user: user ? userHookAttrs(cairn, user) : null,
      project_id: p.id,
      project: projectHookAttrs(cairn, p),
      object_attributes: {
        user_id: award.user_id,
        created_at: utcText(award.created_at),
        id: award.id,
        name: award.name,
        awardable_type: award.awardable_type,
        awardable_id: award.awardable_id,
        updated_at: utcText(award.updated_at),
        action: e.action,
        awarded_on_url: url,
      },
      ...on,
    },
  };
}

async function notePayload(cairn: HookContext, p: ProjectRow, e: Extract<HookEvent, { kind: 'note' }>): Promise<BuiltPayload | null> {
  const note: Note | undefined = await cairn.db.selectFrom('notes').selectAll().where('id', '=', e.id).executeTakeFirst();
  if (!note) return null;
  const user = await loadUser(cairn, e.userId ?? note.author_id);
  const web = projectWebUrl({ baseUrl: baseUrl(cairn) }, p);
  let confidential = note.internal || note.confidential;
  const extra: Record<string, unknown> = {};
  let url = web;
  if (note.noteable_type === 'Issue' && note.noteable_id !== null) {
    const issue = await cairn.db.selectFrom('issues').selectAll().where('id', '=', note.noteable_id).executeTakeFirst();
    if (!issue) return null;
    confidential ||= issue.confidential;
    extra.issue = (await issueAttrs(cairn, p, issue)).attrs;
    url = `${web}/-/issues/${issue.iid}#note_${note.id}`;
  } else if (note.noteable_type === 'MergeRequest' && note.noteable_id !== null) {
    const mr = await cairn.db.selectFrom('merge_requests').selectAll().where('id', '=', note.noteable_id).executeTakeFirst();
    if (!mr) return null;
    extra.merge_request = (await mergeRequestAttrs(cairn, p, mr)).attrs;
    url = `${web}/-/merge_requests/${mr.iid}#note_${note.id}`;
  } else if (note.noteable_type === 'Commit' && note.commit_id) {
    extra.commit = await lastCommitAttrs(cairn, p, note.commit_id);
    url = `${web}/-/commit/${note.commit_id}#note_${note.id}`;
  } else if (note.noteable_type === 'Snippet' && note.noteable_id !== null) {
    const s = await cairn.db.selectFrom('snippets').selectAll().where('id', '=', note.noteable_id).executeTakeFirst();
    if (!s) return null;
    extra.snippet = snippetHookAttrs(web, s);
    url = `${web}/-/snippets/${s.id}#note_${note.id}`;
  } else {
    return null;
  }
  return {
    trigger: confidential ? 'confidential_note_hooks' : 'note_hooks',
    data: {
      object_kind: 'note',
      event_type: confidential ? 'confidential_note' : 'note',
      user: user ? userHookAttrs(cairn, user) : null,
      project_id: p.id,
      project: projectHookAttrs(cairn, p),
      object_attributes: {
        attachment: null,
        author_id: note.author_id,
        change_position: null,
        commit_id: note.commit_id,
        created_at: iso(note.created_at),
        discussion_id: note.discussion_id,
        id: note.id,
        line_code: note.line_code,
        note: note.body,
        noteable_id: note.noteable_id,
        noteable_type: note.noteable_type,
        original_position: null,
        position: note.position ?? null,
        project_id: note.project_id,
        resolved_at: iso(note.resolved_at),
        resolved_by_id: note.resolved_by_id,
        resolved_by_push: null,
        st_diff: null,
        system: note.system,
        type: note.type,
        updated_at: iso(note.updated_at),
        updated_by_id: null,
        description: note.body,
        url,
        action: e.action,
      },
      repository: repositoryAttrs(cairn, p, false),
      ...extra,
    },
  };
}

const seconds = (from: Date | string | null, to: Date | string | null) => (from && to ? (new Date(to).getTime() - new Date(from).getTime()) / 1000 : null);

/** GitLab's pipeline payload: the pipeline, its commit, its merge request and its latest jobs. */
async function pipelinePayload(cairn: HookContext, p: ProjectRow, id: number): Promise<BuiltPayload | null> {
  const pipeline = await cairn.db.selectFrom('ci_pipelines').selectAll().where('id', '=', id).executeTakeFirst();
  if (!pipeline) return null;
  const [stages, builds, user, mr] = await Promise.all([
    cairn.db.selectFrom('ci_stages').select('name').where('pipeline_id', '=', id).orderBy('position').execute(),
    cairn.db.selectFrom('ci_builds').selectAll().where('pipeline_id', '=', id).where('retried', '=', false).orderBy('stage_idx').orderBy('id').execute(),
    loadUser(cairn, pipeline.user_id),
    pipeline.merge_request_id === null ? undefined : cairn.db.selectFrom('merge_requests').selectAll().where('id', '=', pipeline.merge_request_id).executeTakeFirst(),
  ]);
  const buildUsers = new Map((await loadUsers(cairn, [...new Set(builds.flatMap((b) => (b.user_id === null ? [] : [b.user_id])))])).map((u) => [u.id, u]));
  const runnerIds = [...new Set(builds.flatMap((b) => (b.runner_id === null ? [] : [b.runner_id])))];
  const runners = new Map(
    (runnerIds.length ? await cairn.db.selectFrom('ci_runners').selectAll().where('id', 'in', runnerIds).execute() : []).map((r) => [r.id, r]),
  );
  const web = projectWebUrl({ baseUrl: baseUrl(cairn) }, p);
  const commit = await lastCommitAttrs(cairn, p, pipeline.sha).catch(() => null);
  return {
    trigger: 'pipeline_hooks',
    data: {
      object_kind: 'pipeline',
      object_attributes: {
        id: pipeline.id,
        iid: pipeline.iid,
        name: pipeline.name,
        ref: pipeline.ref,
        tag: pipeline.tag,
        sha: pipeline.sha,
        before_sha: pipeline.before_sha ?? '0000000000000000000000000000000000000000',
        source: pipeline.source,
        status: pipeline.status,
        detailed_status: pipeline.status,
        stages: stages.map((s) => s.name),
        created_at: iso(pipeline.created_at),
        finished_at: iso(pipeline.finished_at),
        duration: pipeline.duration,
        queued_duration: pipeline.queued_duration,
        variables: [],
        url: `${web}/-/pipelines/${pipeline.id}`,
      },
      merge_request: mr
        ? {
            id: mr.id,
            iid: mr.iid,
            title: mr.title,
            source_branch: mr.source_branch,
            source_project_id: mr.source_project_id,
            target_branch: mr.target_branch,
            target_project_id: mr.target_project_id,
            state: MR_STATES[mr.state_id] ?? 'opened',
            merge_status: mr.merge_status,
            detailed_merge_status: mr.state_id === 1 ? 'mergeable' : 'not_open',
            url: `${web}/-/merge_requests/${mr.iid}`,
          }
        : null,
      user: user ? userHookAttrs(cairn, user) : null,
      project: projectHookAttrs(cairn, p),
      commit,
      builds: builds.map((b) => {
        const runner = b.runner_id === null ? undefined : runners.get(b.runner_id);
        const u = b.user_id === null ? undefined : buildUsers.get(b.user_id);
        return {
          id: b.id,
          stage: b.stage,
          name: b.name,
          status: b.status,
          created_at: iso(b.created_at),
          started_at: iso(b.started_at),
          finished_at: iso(b.finished_at),
          duration: seconds(b.started_at, b.finished_at),
          queued_duration: seconds(b.queued_at, b.started_at),
          failure_reason: b.failure_reason,
          when: b.when,
          manual: b.when === 'manual',
          allow_failure: b.allow_failure,
          user: u ? userHookAttrs(cairn, u) : null,
          runner: runner
            ? { id: runner.id, description: runner.description, runner_type: runner.runner_type, active: runner.active, is_shared: runner.runner_type === 'instance_type', tags: runner.tag_list ?? [] }
            : null,
          artifacts_file: { filename: null, size: null },
          environment: b.environment ? { name: b.environment, action: ((b.options as { environment?: { action?: string } })?.environment?.action) ?? 'start', deployment_tier: null } : null,
        };
      }),
    },
  };
}

/** A date from a job row kept as JSON (a string) or read from the database (a Date). */
const asDate = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string));

/** GitLab's job ("build") payload, from the job's row as it was when its status changed. */
export async function jobPayload(cairn: HookContext, p: ProjectRow, b: CiBuild): Promise<BuiltPayload> {
  const [pipeline, user, runner] = await Promise.all([
    cairn.db.selectFrom('ci_pipelines').selectAll().where('id', '=', b.pipeline_id).executeTakeFirst(),
    loadUser(cairn, b.user_id),
    b.runner_id === null ? undefined : cairn.db.selectFrom('ci_runners').selectAll().where('id', '=', b.runner_id).executeTakeFirst(),
  ]);
  const commit = await lastCommitAttrs(cairn, p, b.sha).catch(() => null);
  const started = asDate(b.started_at);
  const finished = asDate(b.finished_at);
  const queued = asDate(b.queued_at);
  const env = b.environment ? { name: b.environment, action: ((b.options as { environment?: { action?: string } })?.environment?.action) ?? 'start', deployment_tier: null } : null;
  return {
    trigger: 'job_hooks',
    data: {
      object_kind: 'build',
      ref: b.ref,
      tag: b.tag,
      before_sha: pipeline?.before_sha ?? '0000000000000000000000000000000000000000',
      sha: b.sha,
      retries_count: 0,
      build_id: b.id,
      build_name: b.name,
      build_stage: b.stage,
      build_status: b.status,
      build_created_at: iso(asDate(b.created_at)),
      build_started_at: iso(started),
      build_finished_at: iso(finished),
      build_duration: started && finished ? (finished.getTime() - started.getTime()) / 1000 : null,
      build_queued_duration: queued && started ? (started.getTime() - queued.getTime()) / 1000 : null,
      build_allow_failure: b.allow_failure,
      build_failure_reason: b.failure_reason ?? 'unknown_failure',
      pipeline_id: b.pipeline_id,
      runner: runner ? { id: runner.id, description: runner.description, runner_type: runner.runner_type, active: runner.active, is_shared: runner.runner_type === 'instance_type', tags: runner.tag_list ?? [] } : null,
      project_id: p.id,
      project_name: `${p.namespace.full_name} / ${p.name}`,
      user: user ? userHookAttrs(cairn, user) : null,
      commit: {
        id: pipeline?.id ?? null,
        name: pipeline?.name ?? null,
        sha: b.sha,
        message: commit?.message ?? null,
        author_name: commit?.author.name ?? null,
        author_email: commit?.author.email ?? null,
        author_url: null,
        status: pipeline?.status ?? null,
        duration: pipeline?.duration ?? null,
        started_at: iso(pipeline?.started_at ?? null),
        finished_at: iso(pipeline?.finished_at ?? null),
      },
      repository: repositoryAttrs(cairn, p, true),
      project: projectHookAttrs(cairn, p),
      environment: env,
    },
  };
}
