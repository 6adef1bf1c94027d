import { Type, type Static } from 'typebox';
import type { MergeRequestFilters, MergeRequestMatch } from '../../finders/merge_requests.js';
import { ApiError, invalidParam } from '../../plugins/errors.js';
import { capList, dateParam, labelListParam, noneAnyParam, userMatchParam } from '../list_filters.js';

/** The list parameters of GET /merge_requests, /projects/:id/merge_requests and /groups/:id/merge_requests. */
const IdOrWord = Type.Union([Type.Integer(), Type.String()]);
const IdArray = Type.Union([Type.Array(Type.Integer()), Type.String(), Type.Integer()]);
const matchProps = {
  labels: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
  milestone: Type.Optional(Type.String()),
  author_id: Type.Optional(Type.Integer()),
  author_username: Type.Optional(Type.String()),
  assignee_id: Type.Optional(IdOrWord),
  assignee_username: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
  reviewer_id: Type.Optional(IdOrWord),
  reviewer_username: Type.Optional(Type.String()),
  my_reaction_emoji: Type.Optional(Type.String()),
};
const DateTime = Type.String();
export const MergeRequestListQuery = Type.Object({
  ...matchProps,
  iids: Type.Optional(Type.Union([Type.Array(Type.Integer()), Type.Integer()])),
  state: Type.Optional(Type.Union(['opened', 'closed', 'locked', 'merged', 'all'].map((s) => Type.Literal(s)))),
  order_by: Type.Optional(Type.Union(['created_at', 'updated_at', 'title', 'merged_at'].map((s) => Type.Literal(s)))),
  sort: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
  view: Type.Optional(Type.String()),
  with_labels_details: Type.Optional(Type.Boolean()),
  with_merge_status_recheck: Type.Optional(Type.Boolean()),
  created_after: Type.Optional(DateTime),
  created_before: Type.Optional(DateTime),
  updated_after: Type.Optional(DateTime),
  updated_before: Type.Optional(DateTime),
  scope: Type.Optional(Type.String()),
  approver_ids: Type.Optional(IdArray),
  approved_by_ids: Type.Optional(IdArray),
  source_branch: Type.Optional(Type.String()),
  target_branch: Type.Optional(Type.String()),
  source_project_id: Type.Optional(Type.Integer()),
  search: Type.Optional(Type.String()),
  in: Type.Optional(Type.String()),
  wip: Type.Optional(Type.String()),
  not: Type.Optional(Type.Object(matchProps)),
  environment: Type.Optional(Type.String()),
  deployed_before: Type.Optional(DateTime),
  deployed_after: Type.Optional(DateTime),
});
export type MergeRequestListQuery = Static<typeof MergeRequestListQuery>;

/** approver_ids / approved_by_ids: None, Any, or ids (at most 5 for approved_by_ids). */
function idList(value: unknown, name: string, max?: number): number[] | 'none' | 'any' | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value === 'string') {
    const v = value.trim().toLowerCase();
    if (v === 'none') return 'none';
    if (v === 'any') return 'any';
  }
  const raw = Array.isArray(value) ? value : String(value).split(',');
  const ids = raw.map((x) => Number(String(x).trim()));
  if (ids.some((n) => !Number.isInteger(n) || n <= 0)) throw invalidParam(name);
  return capList(ids, name, max);
}

function match(q: Partial<Static<typeof MergeRequestListQuery>['not'] & object>, prefix = ''): MergeRequestMatch {
  if (q.author_id !== undefined && q.author_username !== undefined) {
    throw new ApiError(400, { error: `${prefix}author_id, ${prefix}author_username are mutually exclusive` });
  }
  if (q.reviewer_id !== undefined && q.reviewer_username !== undefined) {
    throw new ApiError(400, { error: `${prefix}reviewer_id, ${prefix}reviewer_username are mutually exclusive` });
  }
  const assigneeUsername = Array.isArray(q.assignee_username) ? q.assignee_username[0] : q.assignee_username;
  return {
    labels: labelListParam(q.labels, `${prefix}labels${prefix ? ']' : ''}`),
    milestone: noneAnyParam(q.milestone),
    authorId: q.author_id,
    authorUsername: q.author_username,
    assigneeId: userMatchParam(q.assignee_id, `${prefix}assignee_id`),
    assigneeUsername,
    reviewerId: userMatchParam(q.reviewer_id, `${prefix}reviewer_id`),
    reviewerUsername: q.reviewer_username,
    myReactionEmoji: noneAnyParam(q.my_reaction_emoji),
  };
}

/** GitLab's list parameters as the finder takes them; `global` for GET /merge_requests (scope default created_by_me). */
export function mergeRequestFilters(q: MergeRequestListQuery, opts: { global?: boolean; project?: boolean }): MergeRequestFilters {
  const scope = (q.scope ?? (opts.global ? 'created_by_me' : 'all')).replace(/-/g, '_');
  if (!['created_by_me', 'assigned_to_me', 'reviews_for_me', 'all'].includes(scope)) throw new ApiError(400, { error: 'scope does not have a valid value' });
  // Each field once: `in=title,title,...` is one condition, not one per repetition.
  const searchIn = q.in === undefined ? undefined : [...new Set(q.in.split(',').map((s) => s.trim()).filter(Boolean))];
  if (searchIn?.some((f) => f !== 'title' && f !== 'description')) throw new ApiError(400, { error: 'in does not have a valid value' });
  const wip = q.wip === undefined ? undefined : q.wip.toLowerCase();
  if (wip !== undefined && wip !== 'yes' && wip !== 'no') throw new ApiError(400, { error: 'wip does not have a valid value' });
  return {
    ...match(q),
    iids: opts.project && q.iids !== undefined ? capList([q.iids].flat(), 'iids') : undefined,
    state: q.state as MergeRequestFilters['state'],
    scope: scope as MergeRequestFilters['scope'],
    sourceBranch: q.source_branch,
    targetBranch: q.target_branch,
    sourceProjectId: q.source_project_id,
    search: q.search || undefined,
    searchIn: opts.global && searchIn?.length ? (searchIn as ('title' | 'description')[]) : undefined,
    wip: wip as 'yes' | 'no' | undefined,
    createdAfter: dateParam(q.created_after, 'created_after'),
    createdBefore: dateParam(q.created_before, 'created_before'),
    updatedAfter: dateParam(q.updated_after, 'updated_after'),
    updatedBefore: dateParam(q.updated_before, 'updated_before'),
    approvedByIds: idList(q.approved_by_ids, 'approved_by_ids', 5),
    approverIds: idList(q.approver_ids, 'approver_ids'),
    not: q.not ? match(q.not, 'not[') : undefined,
    deployment: opts.global && (q.environment || q.deployed_before || q.deployed_after)
      ? { environment: q.environment, before: dateParam(q.deployed_before, 'deployed_before'), after: dateParam(q.deployed_after, 'deployed_after') }
      : undefined,
    orderBy: q.order_by as MergeRequestFilters['orderBy'],
    sort: q.sort,
  };
}
