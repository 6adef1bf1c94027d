import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type } from 'typebox';
import type { Issue, MergeRequest } from '../../db/schema/work_items.js';
import { findIssueById, issueAssigneeIds, listIssues, loadIssueExtras, type IssueFilters } from '../../finders/issues.js';
import { findMergeRequest, listMergeRequests, loadMergeRequestExtras } from '../../finders/merge_requests.js';
import { findMilestone } from '../../finders/milestones.js';
import { findProjectRowsByIds } from '../../finders/projects.js';
import { can, effectiveLevel } from '../../policies/abilities.js';
import { findIssueOrFail, mayUpdateIssue, type IssueAccess } from '../../policies/issues.js';
import type { ProjectAccess } from '../../policies/projects.js';
import { forbidden, invalidParam, notFound, unauthorized } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentIssue, presentIssueBasic, presentIssueSingle, type ReferenceFrom } from '../../presenters/issues.js';
import { presentMergeRequest } from '../../presenters/merge_requests.js';
import { presentMilestone, type MilestoneView } from '../../presenters/milestones.js';
import { IssueBasicSchema, IssueSchema, IssueSingleSchema } from '../../presenters/schemas/issues.js';
import { MergeRequestSchema } from '../../presenters/schemas/merge_requests.js';
import type { PresentContext } from '../../presenters/users.js';
import { syncClosingIssues } from '../../services/closing_issues.js';
import { createIssue, deleteIssue, updateIssue, type IssueParams } from '../../services/issues.js';
import { mergeRequestNotFound } from '../../services/merge_requests.js';
import { isSubscribed } from '../../services/subscriptions.js';
import { calendarDateParam, IdParams, RowId, timestampParam } from '../params.js';
import { groupOf, NoContent, projectOf, route } from '../route.js';
import { issueFilters, IssueListQuery } from './filters.js';

const IidParams = Type.Object({ id: Type.String(), issue_iid: RowId });
const Labels = Type.Union([Type.String(), Type.Array(Type.String())]);
const UserIds = Type.Union([Type.Array(Type.Integer()), Type.Integer(), Type.String(), Type.Null()]);
const WriteProps = {
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  confidential: Type.Optional(Type.Boolean()),
  assignee_id: Type.Optional(Type.Union([Type.Integer(), Type.Null(), Type.String()])),
  assignee_ids: Type.Optional(UserIds),
  milestone_id: Type.Optional(Type.Union([Type.Integer(), Type.Null(), Type.String()])),
  labels: Type.Optional(Labels),
  due_date: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  issue_type: Type.Optional(Type.String()),
};
const CreateBody = Type.Object({
  ...WriteProps,
  title: Type.String(),
  created_at: Type.Optional(Type.String()),
  iid: Type.Optional(Type.Integer({ minimum: 1, maximum: 2147483647 })),
});
const UPDATE_FIELDS = [
  'title', 'description', 'confidential', 'assignee_id', 'assignee_ids', 'milestone_id', 'labels', 'add_labels', 'remove_labels',
  'due_date', 'issue_type', 'state_event', 'discussion_locked', 'updated_at',
];
const UpdateBody = Type.Object({
  ...WriteProps,
  title: Type.Optional(Type.String()),
  add_labels: Type.Optional(Labels),
  remove_labels: Type.Optional(Labels),
  state_event: Type.Optional(Type.Union([Type.Literal('close'), Type.Literal('reopen')])),
  discussion_locked: Type.Optional(Type.Boolean()),
  updated_at: Type.Optional(Type.String()),
});
const SingleQuery = Type.Object({ with_labels_details: Type.Optional(Type.Boolean()) });
const MilestoneParams = Type.Object({ id: Type.String(), milestone_id: RowId });

/** `assignee_ids[]=1&assignee_ids[]=2`, `assignee_ids=1,2` or one id; 0, '' or null means nobody. */
function userIdList(value: unknown): number[] | undefined {
  if (value === undefined) return undefined;
  if (value === null || value === '') return [];
  const raw = Array.isArray(value) ? value : String(value).split(',');
  return raw.map((v) => Number(String(v).trim())).filter((n) => Number.isInteger(n) && n > 0);
}

/** A calendar date `YYYY-MM-DD`; '' or null clears it. */
function dueDate(value: string | null | undefined): string | null | undefined {
  if (value === undefined) return undefined;
  if (value === null || value === '') return null;
  return calendarDateParam('due_date', value)!;
}

function milestoneId(value: number | string | null | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === null || value === '') return null;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 2147483647) throw invalidParam('milestone_id');
  return n;
}

/**
 * The body as the service takes it, without what the caller may not set: labels, milestone,
 * assignees, due date and the lock need admin_issue (GitLab drops them silently otherwise);
 * created_at / updated_at / iid are for owners and administrators.
 */
function writeParams(body: Record<string, any>, access: ProjectAccess, creating: boolean): IssueParams {
  const { user } = access;
  const metadata = can(user, 'admin_issue', access);
  const labelChange = metadata && (body.labels !== undefined || body.add_labels !== undefined || body.remove_labels !== undefined)
    ? { labels: body.labels, add_labels: body.add_labels, remove_labels: body.remove_labels, createMissing: can(user, 'admin_label', access) }
    : undefined;
  const assignees = userIdList(body.assignee_ids) ?? (body.assignee_id !== undefined ? userIdList(body.assignee_id) : undefined);
  const backdate = can(user, 'set_issue_created_at', access);
  const due = dueDate(body.due_date);
  const milestone = milestoneId(body.milestone_id);
  const createdAt = timestampParam('created_at', body.created_at);
  const updatedAt = timestampParam('updated_at', body.updated_at);
  return {
    title: body.title,
    description: body.description,
    confidential: body.confidential,
    issue_type: body.issue_type,
    state_event: body.state_event,
    ...(metadata ? { assignee_ids: assignees, milestone_id: milestone, due_date: due, discussion_locked: body.discussion_locked, labelChange } : {}),
    ...(backdate ? { created_at: creating ? createdAt : undefined, updated_at: creating ? undefined : updatedAt } : {}),
    ...(creating && body.iid !== undefined && can(user, 'set_issue_iid', access) ? { iid: body.iid } : {}),
  };
}

/** The single form of an issue for the caller (GET, POST, PUT, and the answer of subscribe / unsubscribe). */
export async function renderIssueSingle(request: FastifyRequest, found: IssueAccess, opts: { labelDetails?: boolean; from?: ReferenceFrom } = {}) {
  const db = request.server.cairn.db;
  const user = request.actor?.user ?? null;
  const { issue } = found;
  const ctx: PresentContext = { baseUrl: request.server.cairn.config.externalUrl, viewer: user };
  const extras = (await loadIssueExtras(db, [issue], (m: MilestoneView) => presentMilestone(ctx, m))).get(issue.id)!;
  const subscribed = user ? await isSubscribed(db, user.id, 'Issue', issue.id, [issue.author_id, ...found.assigneeIds].includes(user.id)) : false;
  return presentIssueSingle(ctx, issue, extras, subscribed, { from: { projectId: issue.project_id, namespaceId: extras.namespaceId }, ...opts });
}

export default async function issueRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const db = () => cairn.db;
  const base = '/api/v4/projects/:id/issues';

  const ctxOf = (request: FastifyRequest): PresentContext => ({ baseUrl: cairn.config.externalUrl, viewer: request.actor?.user ?? null });
  const milestoneForm = (ctx: PresentContext) => (m: MilestoneView) => presentMilestone(ctx, m);

  async function extrasOf(request: FastifyRequest, rows: Issue[]) {
    return loadIssueExtras(db(), rows, milestoneForm(ctxOf(request)));
  }

  async function sendList(request: FastifyRequest, reply: FastifyReply, filters: IssueFilters, q: { with_labels_details?: boolean }, from: ReferenceFrom, basic = false) {
    const page = pageParams(request);
    const { rows, total } = await listIssues(db(), request.actor?.user ?? null, filters, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    const extras = await extrasOf(request, rows as Issue[]);
    const ctx = ctxOf(request);
    const opts = { labelDetails: q.with_labels_details, from };
    return (rows as Issue[]).map((r) => (basic ? presentIssueBasic : presentIssue)(ctx, r, extras.get(r.id)!, opts));
  }

  async function loadIssue(request: FastifyRequest): Promise<{ access: ProjectAccess; found: IssueAccess }> {
    const access = projectOf(request);
    const iid = (request.params as { issue_iid: number }).issue_iid;
    return { access, found: await findIssueOrFail(db(), access, access.user, iid) };
  }

  /** The confidential rule of a project list, from the caller's level on the project. */
  const projectFilters = (access: ProjectAccess): Pick<IssueFilters, 'projectId' | 'allConfidential'> => ({
    projectId: access.project.id,
    allConfidential: can(access.user, 'read_confidential_issues', access),
  });

  const subtreeOf = async (groupId: number) =>
    (await db().selectFrom('namespaces').select('id').where(sql<boolean>`traversal_ids @> array[${groupId}::int]`).execute()).map((n) => n.id);

  // ---- lists

  app.get('/api/v4/issues', route({ matrix: 'signedIn',
    access: { custom: 'signed in; anonymous callers only with scope=all (public issues), as GitLab' },
    paginated: true,
    schema: { querystring: IssueListQuery, response: { 200: Type.Array(IssueSchema) } },
  }), async (request, reply) => {
    if (!request.actor?.user && request.query.scope !== 'all') throw unauthorized();
    return sendList(request, reply, issueFilters(request.query, { global: true }), request.query, null);
  });

  app.get(base, route({ matrix: 'read',
    access: { project: 'read_issue' },
    paginated: true,
    schema: { params: IdParams, querystring: IssueListQuery, response: { 200: Type.Array(IssueSchema) } },
  }), async (request, reply) => {
    const access = projectOf(request);
    return sendList(request, reply, { ...issueFilters(request.query, { project: true }), ...projectFilters(access) }, request.query, { projectId: access.project.id, namespaceId: access.project.namespace_id });
  });

  app.get('/api/v4/groups/:id/issues', route({ matrix: 'read',
    access: { group: 'read_group' },
    paginated: true,
    schema: { params: IdParams, querystring: IssueListQuery, response: { 200: Type.Array(IssueSchema) } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    return sendList(request, reply, { ...issueFilters(request.query), namespaceIds: await subtreeOf(group.id) }, request.query, { namespaceId: group.id });
  });

  // ---- one issue

  app.get(`${base}/:issue_iid`, route({ matrix: 'read',
    access: { project: 'read_issue' },
    schema: { params: IidParams, querystring: SingleQuery, response: { 200: IssueSingleSchema } },
  }), async (request) => {
    const { found } = await loadIssue(request);
    return renderIssueSingle(request, found, { labelDetails: request.query.with_labels_details });
  });

  app.get('/api/v4/issues/:id', route({ matrix: 'admin',
    access: { admin: true },
    schema: { params: Type.Object({ id: RowId }), response: { 200: IssueSingleSchema } },
  }), async (request) => {
    const issue = await findIssueById(db(), request.params.id);
    if (!issue) throw notFound('Issue');
    return renderIssueSingle(request, { issue, assigneeIds: await issueAssigneeIds(db(), issue.id) }, { from: null });
  });

  app.post(base, route({ matrix: 'contribute',
    access: { project: 'create_issue', signedIn: true },
    schema: { params: IdParams, body: CreateBody, response: { 201: IssueSingleSchema } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const issue = await createIssue(cairn, access.project, access.user!, writeParams(request.body, access, true));
    return reply.code(201).send(await renderIssueSingle(request, { issue, assigneeIds: await issueAssigneeIds(db(), issue.id) }));
  });

  app.put(`${base}/:issue_iid`, route({ matrix: 'read',
    access: { project: 'read_issue', signedIn: true },
    schema: { params: IidParams, body: UpdateBody, response: { 200: IssueSingleSchema } },
  }), async (request) => {
    if (!UPDATE_FIELDS.some((n) => n in request.body)) throw invalidParam(UPDATE_FIELDS.join(', '), 'are missing, at least one parameter must be provided');
    const { access, found } = await loadIssue(request);
    if (!mayUpdateIssue(access.user, access, found)) throw forbidden();
    const updated = await updateIssue(cairn, access.project, found.issue, access.user!, writeParams(request.body, access, false));
    return renderIssueSingle(request, { issue: updated, assigneeIds: await issueAssigneeIds(db(), updated.id) });
  });

  app.delete(`${base}/:issue_iid`, route({ matrix: 'owner',
    access: { project: 'read_issue', signedIn: true },
    schema: { params: IidParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { access, found } = await loadIssue(request);
    if (!can(access.user, 'destroy_issue', access)) throw forbidden();
    await deleteIssue(cairn, found.issue);
    return reply.code(204).send();
  });

  // ---- merge requests and issues

  /** Merge requests of the caller's visible ones, in the list form. */
  async function presentMergeRequests(request: FastifyRequest, rows: MergeRequest[]) {
    const ctx = ctxOf(request);
    const extras = await loadMergeRequestExtras(db(), rows, milestoneForm(ctx));
    return rows.map((r) => presentMergeRequest(ctx, r, extras.get(r.id)!));
  }

  app.get(`${base}/:issue_iid/closed_by`, route({ matrix: 'read',
    access: { project: 'read_issue' },
    paginated: true,
    schema: { params: IidParams, response: { 200: Type.Array(MergeRequestSchema) } },
  }), async (request, reply) => {
    const { found } = await loadIssue(request);
    const page = pageParams(request);
    const user = request.actor?.user ?? null;
    const all = await db().selectFrom('merge_requests as mr').innerJoin('merge_requests_closing_issues as c', 'c.merge_request_id', 'mr.id')
      .selectAll('mr').where('c.issue_id', '=', found.issue.id).orderBy('mr.id').execute();
    // Only the merge requests the caller may read (their target project's read_merge_request).
    const projects = await findProjectRowsByIds(db(), all.map((mr) => mr.target_project_id), user?.id);
    const readable: MergeRequest[] = [];
    for (const mr of all) {
      const project = projects.get(mr.target_project_id);
      if (project && can(user, 'read_merge_request', { project, accessLevel: effectiveLevel(user, project.callerAccessLevel ?? 0) })) readable.push(mr);
    }
    const total = readable.length;
    const rows = readable.slice(page.offset, page.offset + page.perPage);
    setPaginationHeaders(request, reply, page, total);
    return presentMergeRequests(request, rows);
  });

  app.get('/api/v4/projects/:id/merge_requests/:merge_request_iid/closes_issues', route({ matrix: 'readCode',
    access: { project: 'read_merge_request', signedIn: true },
    paginated: true,
    schema: { params: Type.Object({ id: Type.String(), merge_request_iid: RowId }), response: { 200: Type.Array(IssueBasicSchema) } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const mr = await findMergeRequest(db(), access.project.id, (request.params as { merge_request_iid: number }).merge_request_iid);
    if (!mr) throw mergeRequestNotFound();
    const issues = await syncClosingIssues(cairn, access.project, mr);
    // Only the issues the caller may read; in order of mention.
    const page = pageParams(request);
    const { rows } = await listIssues(db(), access.user, { ids: issues.map((i) => i.id), state: 'all' }, { limit: 1_000, offset: 0 });
    const visible = issues.filter((i) => (rows as Issue[]).some((r) => r.id === i.id)).map((i) => (rows as Issue[]).find((r) => r.id === i.id)!);
    setPaginationHeaders(request, reply, page, visible.length);
    const slice = visible.slice(page.offset, page.offset + page.perPage);
    const extras = await extrasOf(request, slice);
    const ctx = ctxOf(request);
    return slice.map((r) => presentIssueBasic(ctx, r, extras.get(r.id)!, { from: { projectId: access.project.id, namespaceId: access.project.namespace_id } }));
  });

  // ---- milestones' issues and merge requests

  app.get('/api/v4/projects/:id/milestones/:milestone_id/issues', route({ matrix: 'read',
    access: { project: 'read_milestone' },
    paginated: true,
    schema: { params: MilestoneParams, response: { 200: Type.Array(IssueBasicSchema) } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const milestone = await findMilestone(db(), { projectId: access.project.id }, request.params.milestone_id);
    if (!milestone) throw notFound('Milestone');
    if (!can(access.user, 'read_issue', access)) return (setPaginationHeaders(request, reply, pageParams(request), 0), []);
    return sendList(request, reply, { ...projectFilters(access), milestoneRowId: milestone.id, state: 'all' }, {}, { projectId: access.project.id, namespaceId: access.project.namespace_id }, true);
  });

  app.get('/api/v4/groups/:id/milestones/:milestone_id/issues', route({ matrix: 'read',
    access: { group: 'read_milestone' },
    paginated: true,
    schema: { params: MilestoneParams, response: { 200: Type.Array(IssueBasicSchema) } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    const milestone = await findMilestone(db(), { groupId: group.id }, request.params.milestone_id);
    if (!milestone) throw notFound('Milestone');
    return sendList(request, reply, { milestoneRowId: milestone.id, state: 'all', namespaceIds: await subtreeOf(group.id) }, {}, { namespaceId: group.id }, true);
  });

  app.get('/api/v4/projects/:id/milestones/:milestone_id/merge_requests', route({ matrix: 'read',
    access: { project: 'read_milestone' },
    paginated: true,
    schema: { params: MilestoneParams, response: { 200: Type.Array(MergeRequestSchema) } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const milestone = await findMilestone(db(), { projectId: access.project.id }, request.params.milestone_id);
    if (!milestone) throw notFound('Milestone');
    const page = pageParams(request);
    if (!can(access.user, 'read_merge_request', access)) return (setPaginationHeaders(request, reply, page, 0), []);
    const { rows, total } = await listMergeRequests(db(), access.user, { projectId: access.project.id, milestone: milestone.title, state: 'all' }, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    return presentMergeRequests(request, rows as MergeRequest[]);
  });

  app.get('/api/v4/groups/:id/milestones/:milestone_id/merge_requests', route({ matrix: 'read',
    access: { group: 'read_milestone' },
    paginated: true,
    schema: { params: MilestoneParams, response: { 200: Type.Array(MergeRequestSchema) } },
  }), async (request, reply) => {
    const { group, user } = groupOf(request);
    const milestone = await findMilestone(db(), { groupId: group.id }, request.params.milestone_id);
    if (!milestone) throw notFound('Milestone');
    const page = pageParams(request);
    const { rows, total } = await listMergeRequests(db(), user, { namespaceIds: await subtreeOf(group.id), milestone: milestone.title, state: 'all' }, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    return presentMergeRequests(request, rows as MergeRequest[]);
  });
}
