import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type } from 'typebox';
import type { User } from '../../db/schema/core.js';
import type { MergeRequest } from '../../db/schema/work_items.js';
import {
  countMergeRequests, findMergeRequest, findMergeRequestPage, loadMergeRequestExtras, MERGE_REQUEST_COUNT_CAP, type MergeRequestFilters,
} from '../../finders/merge_requests.js';
import { findProjectRow, projectFullPath } from '../../finders/projects.js';
import { presentPipeline, presentPipelineBasic } from '../../presenters/ci.js';
import { loadPipelineExtras } from '../../finders/pipelines.js';
import { PipelineBasicSchema, PipelineSchema } from '../../presenters/schemas/ci.js';
import type { ProjectRow } from '../../presenters/projects.js';
import { createPipeline } from '../../ci/pipelines/create.js';
import { commitsBetween, diffCommits, readCommitsOnce } from '../../git/compare.js';
import { can, effectiveLevel } from '../../policies/abilities.js';
import type { ProjectAccess } from '../../policies/projects.js';
import { loadProjectForUser } from '../../finders/authorize.js';
import { badRequest, forbidden, notFound } from '../../plugins/errors.js';
import { pageParams, paginateArray, setPaginationHeaders, type HeaderTarget } from '../../plugins/pagination.js';
import { sendCachedPage } from '../../plugins/page_cache.js';
import { assertMatchesSchema } from '../../plugins/responses.js';
import { presentCommit } from '../../presenters/commits.js';
import {
  presentApprovalState, presentMergeRequest, presentMergeRequestSimple, presentMergeRequestSingle,
} from '../../presenters/merge_requests.js';
import { presentDiff } from '../../presenters/repository.js';
import { CommitSchema, DiffSchema } from '../../presenters/schemas/commits.js';
import { ApprovalStateSchema, MergeRequestChangesSchema, MergeRequestSchema, MergeRequestSimpleSchema, MergeRequestSingleSchema } from '../../presenters/schemas/merge_requests.js';
import type { PresentContext } from '../../presenters/users.js';
import { Sha } from '../../presenters/schemas/common.js';
import { presentMilestone, type MilestoneView } from '../../presenters/milestones.js';
import {
  createMergeRequest, deleteMergeRequest, headRef, mergeRequestGitFacts, mergeRequestNotFound, refreshMergeRequest, updateMergeRequest,
  type MergeRequestParams,
} from '../../services/merge_requests.js';
import { isSubscribed } from '../../services/subscriptions.js';
import { acceptMergeRequest, approvalsOf, approve, cancelMergeWhenPipelineSucceeds, reconcileLocked, requestRebase, unapprove, writeMergeRef } from '../../services/merge.js';
import { projectRepoPath } from '../../services/projects.js';
import { IdParams, RowId } from '../params.js';
import { groupOf, NoContent, projectOf, route } from '../route.js';
import { mergeRequestFilters, MergeRequestListQuery } from './filters.js';
import { MR_STATE } from '../../db/work_item_states.js';

export const IidParams = Type.Object({ id: Type.String(), merge_request_iid: RowId });

const ListResponse = Type.Union([Type.Array(MergeRequestSchema), Type.Array(MergeRequestSimpleSchema)]);

const UserIds = Type.Union([Type.Array(Type.Integer()), Type.Integer(), Type.String()]);
const WriteProps = {
  title: Type.Optional(Type.String()),
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  assignee_id: Type.Optional(Type.Union([Type.Integer(), Type.Null(), Type.String()])),
  assignee_ids: Type.Optional(UserIds),
  reviewer_ids: Type.Optional(UserIds),
  labels: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
  milestone_id: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
  remove_source_branch: Type.Optional(Type.Boolean()),
  squash: Type.Optional(Type.Boolean()),
  allow_collaboration: Type.Optional(Type.Boolean()),
  allow_maintainer_to_push: Type.Optional(Type.Boolean()),
};
const CreateBody = Type.Object({
  ...WriteProps,
  source_branch: Type.String(),
  target_branch: Type.String(),
  title: Type.String(),
  target_project_id: Type.Optional(Type.Integer()),
  approvals_before_merge: Type.Optional(Type.Integer()),
});
const UpdateBody = Type.Object({
  ...WriteProps,
  target_branch: Type.Optional(Type.String()),
  state_event: Type.Optional(Type.Union([Type.Literal('close'), Type.Literal('reopen')])),
  discussion_locked: Type.Optional(Type.Boolean()),
  add_labels: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
  remove_labels: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
});
const SingleQuery = Type.Object({
  render_html: Type.Optional(Type.Boolean()),
  include_diverged_commits_count: Type.Optional(Type.Boolean()),
  include_rebase_in_progress: Type.Optional(Type.Boolean()),
});

/** `assignee_ids[]=1&assignee_ids[]=2`, `assignee_ids=1,2` or one id; 0 or '' means nobody. */
function userIdList(value: unknown): number[] | undefined {
  if (value === undefined) return undefined;
  const raw = Array.isArray(value) ? value : String(value).split(',');
  return raw.map((v) => Number(String(v).trim())).filter((n) => Number.isInteger(n) && n > 0);
}

function writeParams(body: Record<string, any>, access?: ProjectAccess): MergeRequestParams {
  const labelChange = body.labels !== undefined || body.add_labels !== undefined || body.remove_labels !== undefined
    ? { labels: body.labels, add_labels: body.add_labels, remove_labels: body.remove_labels, createMissing: !!access && can(access.user, 'admin_label', access) }
    : undefined;
  const assigneeId = body.assignee_id === null || body.assignee_id === '' ? null : body.assignee_id !== undefined ? Number(body.assignee_id) : undefined;
  return {
    title: body.title,
    description: body.description,
    source_branch: body.source_branch,
    target_branch: body.target_branch,
    assignee_id: assigneeId === undefined ? undefined : assigneeId || null,
    assignee_ids: userIdList(body.assignee_ids),
    reviewer_ids: userIdList(body.reviewer_ids),
    milestone_id: body.milestone_id,
    remove_source_branch: body.remove_source_branch,
    squash: body.squash,
    allow_collaboration: body.allow_collaboration,
    allow_maintainer_to_push: body.allow_maintainer_to_push,
    discussion_locked: body.discussion_locked,
    state_event: body.state_event,
    labelChange,
  };
}

function ctxOf(request: FastifyRequest): PresentContext {
  return { baseUrl: request.server.cairn.config.externalUrl, viewer: request.actor?.user ?? null };
}

function presentMilestoneSummary(request: FastifyRequest) {
  const ctx = ctxOf(request);
  return (m: MilestoneView) => presentMilestone(ctx, m);
}

/** Rows presented in the list form (or `view=simple`), with everything preloaded for the page. */
async function presentList(request: FastifyRequest, rows: MergeRequest[], q: { view?: string; with_labels_details?: boolean }) {
  const ctx = ctxOf(request);
  const extras = await loadMergeRequestExtras(request.server.cairn.db, rows, presentMilestoneSummary(request));
  if (q.view === 'simple') return rows.map((r) => presentMergeRequestSimple(ctx, r, extras.get(r.id)!));
  return rows.map((r) => presentMergeRequest(ctx, r, extras.get(r.id)!, { labelDetails: q.with_labels_details }));
}

/**
 * How many merge requests the actor's filters match (null above GitLab's 10,000 cap), kept in the
 * process cache (src/cache/) per user and filters until any write, so that paging through a long
 * list counts it once.
 */
async function countCached(request: FastifyRequest, user: User | null, filters: MergeRequestFilters): Promise<number | null> {
  const cairn = request.server.cairn;
  const n = await cairn.cache.load(
    `mr-count:${user?.id ?? 'anonymous'}:${JSON.stringify(filters)}`,
    () => countMergeRequests(cairn.db, user, filters),
    { since: request.cacheGeneration },
  );
  return n > MERGE_REQUEST_COUNT_CAP ? null : n;
}

/**
 * A list page: the rows (one more than the page, to know whether another follows), the count,
 * and everything presented from columns and one statement per kind of extra; no git. The page
 * goes through the page cache (per caller and URL, dropped on any write by any process), except
 * with with_merge_status_recheck, which may run git and write.
 */
async function sendList(request: FastifyRequest, reply: FastifyReply, filters: MergeRequestFilters, q: { view?: string; with_labels_details?: boolean; with_merge_status_recheck?: boolean }) {
  const cairn = request.server.cairn;
  const page = pageParams(request);
  const user = request.actor?.user ?? null;
  const render = async (headers: HeaderTarget) => {
    const [found, total] = await Promise.all([
      findMergeRequestPage(cairn.db, user, filters, { limit: page.perPage + 1, offset: page.offset }),
      countCached(request, user, filters),
    ]);
    setPaginationHeaders(request, headers, page, total, found.length > page.perPage);
    let current = found.slice(0, page.perPage);
    // with_merge_status_recheck: the ones not checked since their branches moved are checked now.
    if (q.with_merge_status_recheck) {
      current = await Promise.all(current.map((r) => (r.state_id === MR_STATE.opened && r.merge_status.startsWith('unchecked') || r.merge_status === 'cannot_be_merged_recheck' ? refreshMergeRequest(cairn, r) : r)));
    }
    return presentList(request, current, q);
  };
  if (q.with_merge_status_recheck) return render(reply);
  return sendCachedPage(request, reply, async (headers) => {
    const body = await render(headers);
    // Cached pages go out as bytes, past the serializer that checks answers in tests: check here.
    if (cairn.config.validateResponses) assertMatchesSchema(ListResponse, body);
    return { body };
  });
}

/** The merge request `:merge_request_iid` of the guarded project, or 404. */
async function loadMergeRequest(request: FastifyRequest): Promise<{ access: ProjectAccess; mr: MergeRequest }> {
  const access = projectOf(request);
  const iid = (request.params as { merge_request_iid: number }).merge_request_iid;
  const mr = await findMergeRequest(request.server.cairn.db, access.project.id, iid);
  if (!mr) throw mergeRequestNotFound();
  return { access, mr };
}

/** The author may edit their own merge request; others need update_merge_request. */
function assertCanUpdate(access: ProjectAccess, mr: MergeRequest) {
  const { user } = access;
  if (!user) throw forbidden();
  if (mr.author_id === user.id) return;
  if (!can(user, 'update_merge_request', access)) throw forbidden();
}

/** The head pipeline in its two forms (GitLab shows both only to callers who may read pipelines). */
async function headPipelineForms(request: FastifyRequest, access: ProjectAccess, mr: MergeRequest) {
  if (mr.head_pipeline_id === null || !can(access.user, 'read_pipeline', access)) return null;
  const cairn = request.server.cairn;
  const p = await cairn.db.selectFrom('ci_pipelines').selectAll().where('id', '=', mr.head_pipeline_id).executeTakeFirst();
  if (!p || p.sha !== mr.head_sha) return null; // GitLab's diff_head_pipeline: only the one at the head commit
  // A fork's merge request runs its pipelines in the source project.
  const project = p.project_id === access.project.id ? access.project : await findProjectRow(cairn.db, p.project_id);
  if (!project) return null;
  const ctx = ctxOf(request);
  return { basic: presentPipelineBasic(ctx, project, p), detailed: presentPipeline(ctx, project, p, await loadPipelineExtras(cairn.db, p)) };
}

/** The single form: git facts, subscription, the caller's merge right. */
export async function renderSingle(request: FastifyRequest, access: ProjectAccess, mr: MergeRequest, q: { include_diverged_commits_count?: boolean; include_rebase_in_progress?: boolean; render_html?: boolean } = {}) {
  const cairn = request.server.cairn;
  let current = await reconcileLocked(cairn, access.project, mr);
  if (current.state_id === MR_STATE.opened && (current.merge_status === 'unchecked' || current.merge_status === 'cannot_be_merged_recheck')) {
    current = await refreshMergeRequest(cairn, current, access.project);
  }
  const extras = (await loadMergeRequestExtras(cairn.db, [current], presentMilestoneSummary(request))).get(current.id)!;
  const facts = await mergeRequestGitFacts(cairn, access.project, current, { diverged: q.include_diverged_commits_count });
  const user = access.user;
  const participants = [current.author_id, ...extras.assignees.map((u) => u.id), ...extras.reviewers.map((u) => u.id)];
  return presentMergeRequestSingle(ctxOf(request), current, extras, {
    subscribed: user ? await isSubscribed(cairn.db, user.id, 'MergeRequest', current.id, participants.includes(user.id)) : false,
    changesCount: facts.changesCount,
    divergedCommitsCount: facts.divergedCommitsCount,
    rebaseInProgress: q.include_rebase_in_progress ? current.rebase_in_progress : undefined,
    pipeline: await headPipelineForms(request, access, current),
    canMerge: !!user && can(user, 'push_code', access),
    firstContribution: false,
    renderHtml: q.render_html,
  });
}

export default async function mergeRequestRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const base = '/api/v4/projects/:id/merge_requests';
  // The spec: every merge request call is authenticated.
  const read = { project: 'read_merge_request', signedIn: true } as const;

  app.get('/api/v4/merge_requests', route({ matrix: 'signedIn',
    access: { signedIn: true },
    paginated: true,
    schema: { querystring: MergeRequestListQuery, response: { 200: ListResponse } },
  }), async (request, reply) => sendList(request, reply, mergeRequestFilters(request.query, { global: true }), request.query));

  app.get(base, route({ matrix: 'readCode',
    access: read,
    paginated: true,
    schema: { params: IdParams, querystring: MergeRequestListQuery, response: { 200: ListResponse } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    return sendList(request, reply, { ...mergeRequestFilters(request.query, { project: true }), projectId: project.id }, request.query);
  });

  app.get('/api/v4/groups/:id/merge_requests', route({ matrix: 'read',
    access: { group: 'read_group', signedIn: true },
    paginated: true,
    schema: { params: IdParams, querystring: MergeRequestListQuery, response: { 200: ListResponse } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    const subtree = await cairn.db.selectFrom('namespaces').select('id').where(sql<boolean>`traversal_ids @> array[${group.id}::int]`).execute();
    return sendList(request, reply, { ...mergeRequestFilters(request.query, {}), namespaceIds: subtree.map((n) => n.id) }, request.query);
  });

  app.get(`${base}/:merge_request_iid`, route({ matrix: 'readCode',
    access: read,
    schema: { params: IidParams, querystring: SingleQuery, response: { 200: MergeRequestSingleSchema } },
  }), async (request) => {
    const { access, mr } = await loadMergeRequest(request);
    return renderSingle(request, access, mr, request.query);
  });

  app.post(base, route({ matrix: 'readCode',
    access: { project: 'read_merge_request', signedIn: true },
    schema: { params: IdParams, body: CreateBody, response: { 201: MergeRequestSingleSchema } },
  }), async (request, reply) => {
    const source = projectOf(request);
    const user = source.user!;
    if (!can(user, 'create_merge_request_from', source)) throw forbidden();
    let target: ProjectAccess = source;
    if (request.body.target_project_id !== undefined && request.body.target_project_id !== source.project.id) {
      const found = await loadProjectForUser(cairn, user.id, request.body.target_project_id);
      const subject = found ? { project: found, accessLevel: effectiveLevel(user, found.callerAccessLevel ?? 0) } : null;
      if (!found || !subject || !can(user, 'read_merge_request', subject)) throw notFound('Project');
      target = { project: { ...found }, accessLevel: subject.accessLevel, user };
    } else if (!can(user, 'create_merge_request_in', source)) {
      throw forbidden();
    }
    const mr = await createMergeRequest(cairn, { sourceProject: source.project, targetProject: target.project, user, params: writeParams(request.body, target) });
    return reply.code(201).send(await renderSingle(request, target, mr));
  });

  app.put(`${base}/:merge_request_iid`, route({ matrix: 'developer',
    access: read,
    schema: { params: IidParams, body: UpdateBody, response: { 200: MergeRequestSingleSchema } },
  }), async (request) => {
    const { access, mr } = await loadMergeRequest(request);
    assertCanUpdate(access, mr);
    const updated = await updateMergeRequest(cairn, access.project, mr, access.user!, writeParams(request.body, access));
    return renderSingle(request, access, updated);
  });

  app.delete(`${base}/:merge_request_iid`, route({ matrix: 'owner',
    access: { project: 'destroy_merge_request', signedIn: true },
    schema: { params: IidParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { access, mr } = await loadMergeRequest(request);
    await deleteMergeRequest(cairn, access.project, mr);
    return reply.code(204).send();
  });

  app.get(`${base}/:merge_request_iid/commits`, route({ matrix: 'readCode',
    access: read,
    paginated: true,
    schema: { params: IidParams, response: { 200: Type.Array(CommitSchema) } },
  }), async (request, reply) => {
    const { access, mr } = await loadMergeRequest(request);
    if (!mr.head_sha) return paginateArray(request, reply, []);
    const gitDir = projectRepoPath(cairn, access.project);
    // Newest first, as GitLab lists a merge request's commits.
    const oids = (await commitsBetween(gitDir, mr.base_sha ?? mr.start_sha, mr.head_sha)).reverse();
    const page = paginateArray(request, reply, oids);
    const commits = await readCommitsOnce(gitDir, page);
    const ctx = { baseUrl: cairn.config.externalUrl, projectFullPath: projectFullPath(access.project) };
    return commits.map((c) => presentCommit(ctx, c));
  });

  app.get(`${base}/:merge_request_iid/changes`, route({ matrix: 'readCode',
    access: read,
    schema: {
      params: IidParams,
      querystring: Type.Object({ access_raw_diffs: Type.Optional(Type.Boolean()), unidiff: Type.Optional(Type.Boolean()) }),
      response: { 200: MergeRequestChangesSchema },
    },
  }), async (request) => {
    const { access, mr } = await loadMergeRequest(request);
    const single = await renderSingle(request, access, mr);
    const diff = mr.head_sha && mr.base_sha ? await diffCommits(projectRepoPath(cairn, access.project), mr.base_sha, mr.head_sha) : { diffs: [], overflow: false };
    return { ...single, changes: diff.diffs.map(presentDiff), overflow: diff.overflow };
  });

  app.get(`${base}/:merge_request_iid/diffs`, route({ matrix: 'readCode',
    access: read,
    paginated: true,
    schema: { params: IidParams, querystring: Type.Object({ unidiff: Type.Optional(Type.Boolean()) }), response: { 200: Type.Array(DiffSchema) } },
  }), async (request, reply) => {
    const { access, mr } = await loadMergeRequest(request);
    const diff = mr.head_sha && mr.base_sha ? await diffCommits(projectRepoPath(cairn, access.project), mr.base_sha, mr.head_sha) : { diffs: [] };
    return paginateArray(request, reply, diff.diffs).map(presentDiff);
  });

  // Whoever reads the merge request but may not merge it gets GitLab's unauthorized! (401).
  app.put(`${base}/:merge_request_iid/merge`, route({ matrix: { is: 'developer', reads: 'readCode', refused: 401, fresh: ['merge_request_iid'] },
    access: read,
    schema: {
      params: IidParams,
      body: Type.Object({
        merge_commit_message: Type.Optional(Type.String()),
        squash_commit_message: Type.Optional(Type.String()),
        squash: Type.Optional(Type.Boolean()),
        should_remove_source_branch: Type.Optional(Type.Boolean()),
        merge_when_pipeline_succeeds: Type.Optional(Type.Boolean()),
        auto_merge: Type.Optional(Type.Boolean()),
        sha: Type.Optional(Type.String()),
      }),
      response: { 200: MergeRequestSingleSchema },
    },
  }), async (request) => {
    const { access, mr } = await loadMergeRequest(request);
    const b = request.body;
    const merged = await acceptMergeRequest(cairn, access, access.user!, mr, {
      ...b,
      merge_when_pipeline_succeeds: b.merge_when_pipeline_succeeds ?? b.auto_merge,
    });
    return renderSingle(request, access, merged);
  });

  app.get(`${base}/:merge_request_iid/merge_ref`, route({ matrix: 'readCode',
    access: read,
    schema: { params: IidParams, response: { 200: Type.Object({ commit_id: Sha }, { additionalProperties: false }) } },
  }), async (request) => {
    const { access, mr } = await loadMergeRequest(request);
    return { commit_id: await writeMergeRef(cairn, access.project, mr) };
  });

  for (const path of ['cancel_merge_when_pipeline_succeeds', 'cancel_auto_merge']) {
    app.post(`${base}/:merge_request_iid/${path}`, route({ matrix: { is: 'developer', reads: 'readCode', refused: 401 },
      access: read,
      schema: { params: IidParams, response: { 201: MergeRequestSingleSchema } },
    }), async (request, reply) => {
      const { access, mr } = await loadMergeRequest(request);
      const updated = await cancelMergeWhenPipelineSucceeds(cairn, access, access.user!, mr);
      return reply.code(201).send(await renderSingle(request, access, updated));
    });
  }

  app.put(`${base}/:merge_request_iid/rebase`, route({ matrix: 'developer',
    access: read,
    schema: { params: IidParams, body: Type.Object({ skip_ci: Type.Optional(Type.Boolean()) }), response: { 202: Type.Object({ rebase_in_progress: Type.Boolean() }, { additionalProperties: false }) } },
  }), async (request, reply) => {
    const { access, mr } = await loadMergeRequest(request);
    await requestRebase(cairn, access.user!, mr, { skipCi: request.body.skip_ci });
    return reply.code(202).send({ rebase_in_progress: true });
  });

  const approvalsResponse = async (request: FastifyRequest, access: ProjectAccess, mr: MergeRequest) =>
    presentApprovalState(ctxOf(request), mr, await approvalsOf(cairn, mr), {
      userId: access.user?.id ?? null,
      mayApprove: !!access.user && can(access.user, 'update_merge_request', access),
    });

  app.get(`${base}/:merge_request_iid/approvals`, route({ matrix: 'readCode',
    access: read,
    schema: { params: IidParams, response: { 200: ApprovalStateSchema } },
  }), async (request) => {
    const { access, mr } = await loadMergeRequest(request);
    return approvalsResponse(request, access, mr);
  });

  app.post(`${base}/:merge_request_iid/approve`, route({ matrix: { is: 'developer', fresh: ['merge_request_iid'] },
    access: read,
    schema: { params: IidParams, body: Type.Object({ sha: Type.Optional(Type.String()), approval_password: Type.Optional(Type.String()) }), response: { 201: ApprovalStateSchema } },
  }), async (request, reply) => {
    const { access, mr } = await loadMergeRequest(request);
    await approve(cairn, access, access.user!, mr, request.body.sha);
    return reply.code(201).send(await approvalsResponse(request, access, mr));
  });

  // The matrix's merge request is approved by no one: 404 (GitLab's not_found!) to whoever may unapprove.
  app.post(`${base}/:merge_request_iid/unapprove`, route({ matrix: { is: 'developer', cells: { developer: 404, maintainer: 404, owner: 404, admin: 404 } },
    access: read,
    schema: { params: IidParams, response: { 201: ApprovalStateSchema } },
  }), async (request, reply) => {
    const { access, mr } = await loadMergeRequest(request);
    await unapprove(cairn, access, access.user!, mr);
    return reply.code(201).send(await approvalsResponse(request, access, mr));
  });

  // The merge request's pipelines (GitLab's all_pipelines): the source branch's at the merge request's commits, and its merge request pipelines.
  app.get(`${base}/:merge_request_iid/pipelines`, route({ matrix: 'readCode',
    access: read,
    paginated: true,
    schema: { params: IidParams, response: { 200: Type.Array(PipelineBasicSchema) } },
  }), async (request, reply) => {
    const { access, mr } = await loadMergeRequest(request);
    if (!can(access.user, 'read_pipeline', access)) throw forbidden();
    const shas = mr.head_sha
      ? await commitsBetween(projectRepoPath(cairn, access.project), mr.base_sha, mr.head_sha, { limit: 1000 }).catch(() => [mr.head_sha!])
      : [];
    const page = pageParams(request);
    const query = cairn.db.selectFrom('ci_pipelines').where('parent_pipeline_id', 'is', null).where((eb) => eb.or([
      eb('merge_request_id', '=', mr.id),
      ...(shas.length && mr.source_project_id !== null
        ? [eb.and([eb('project_id', '=', mr.source_project_id), eb('ref', '=', mr.source_branch), eb('tag', '=', false), eb('sha', 'in', shas)])]
        : []),
    ]));
    const [rows, total] = await Promise.all([
      query.selectAll().orderBy('id', 'desc').limit(page.perPage).offset(page.offset).execute(),
      query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    const projects = new Map<number, ProjectRow>([[access.project.id, access.project]]);
    const out = [];
    for (const p of rows) {
      if (!projects.has(p.project_id)) {
        const row = await findProjectRow(cairn.db, p.project_id);
        if (row) projects.set(p.project_id, row);
      }
      const project = projects.get(p.project_id);
      if (project) out.push(presentPipelineBasic(ctxOf(request), project, p));
    }
    return out;
  });

  // POST: a merge request pipeline (source merge_request_event) at the merge request's head, which becomes its head pipeline.
  app.post(`${base}/:merge_request_iid/pipelines`, route({ matrix: 'developer',
    access: read,
    schema: { params: IidParams, response: { 201: PipelineSchema } },
  }), async (request, reply) => {
    const { access, mr } = await loadMergeRequest(request);
    if (!can(access.user, 'create_pipeline', access)) throw forbidden();
    if (mr.state_id !== MR_STATE.opened) throw badRequest('Merge request is not opened');
    let current = mr;
    if (!current.head_sha) current = await refreshMergeRequest(cairn, mr, access.project);
    if (!current.head_sha) throw badRequest('Merge request has no head commit');
    const result = await createPipeline(cairn, {
      project: access.project,
      ref: headRef(current.iid),
      tag: false,
      sha: current.head_sha,
      source: 'merge_request_event',
      userId: access.user!.id,
      api: true,
      configRequired: true,
      mergeRequestId: current.id,
    });
    if (result.kind !== 'created') throw badRequest(result.errors?.join(', ') || result.message);
    await cairn.db.updateTable('merge_requests').set({ head_pipeline_id: result.pipeline.id })
      .where('id', '=', current.id).where('head_sha', '=', current.head_sha).execute();
    return reply.code(201).send(presentPipeline(ctxOf(request), access.project, result.pipeline, await loadPipelineExtras(cairn.db, result.pipeline)));
  });
}
