import { Type, type Static } from 'typebox';
import { ISSUE_ORDERS, type IssueFilters, type IssueMatch } from '../../finders/issues.js';
import { ApiError, invalidParam } from '../../plugins/errors.js';
import { ISSUE_TYPES } from '../../services/issues.js';
import { capList, commaList, dateParam, labelListParam, noneAnyParam, userMatchParam } from '../list_filters.js';

/** The list parameters of GET /issues, /projects/:id/issues, /groups/:id/issues and the milestone issue lists. */
const IdOrWord = Type.Union([Type.Integer(), Type.String()]);
const Strings = Type.Union([Type.String(), Type.Array(Type.String())]);
const matchProps = {
  labels: Type.Optional(Strings),
  milestone: Type.Optional(Type.String()),
  milestone_id: Type.Optional(Type.String()),
  author_id: Type.Optional(Type.Integer()),
  author_username: Type.Optional(Type.String()),
  assignee_id: Type.Optional(IdOrWord),
  assignee_username: Type.Optional(Strings),
  my_reaction_emoji: Type.Optional(Type.String()),
  iids: Type.Optional(Type.Union([Type.Array(Type.Integer()), Type.Integer()])),
  issue_type: Type.Optional(Strings),
};
const DateTime = Type.String();
export const IssueListQuery = Type.Object({
  ...matchProps,
  state: Type.Optional(Type.Union(['opened', 'closed', 'all'].map((s) => Type.Literal(s)))),
  order_by: Type.Optional(Type.Union(ISSUE_ORDERS.map((s) => Type.Literal(s)))),
  sort: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
  with_labels_details: Type.Optional(Type.Boolean()),
  created_after: Type.Optional(DateTime),
  created_before: Type.Optional(DateTime),
  updated_after: Type.Optional(DateTime),
  updated_before: Type.Optional(DateTime),
  due_date: Type.Optional(Type.Union(['0', 'any', 'today', 'tomorrow', 'overdue', 'week', 'month', 'next_month_and_previous_two_weeks', ''].map((s) => Type.Literal(s)))),
  scope: Type.Optional(Type.String()),
  search: Type.Optional(Type.String()),
  in: Type.Optional(Type.String()),
  confidential: Type.Optional(Type.Boolean()),
  non_archived: Type.Optional(Type.Boolean()),
  not: Type.Optional(Type.Object(matchProps)),
});
export type IssueListQuery = Static<typeof IssueListQuery>;

type MatchQuery = Partial<Static<typeof IssueListQuery>['not'] & object>;

function match(q: MatchQuery, prefix = ''): IssueMatch {
  const name = (n: string) => (prefix ? `not[${n}]` : n);
  const exclusive = (a: string, b: string) => new ApiError(400, { error: `${name(a)}, ${name(b)} are mutually exclusive` });
  if (q.author_id !== undefined && q.author_username !== undefined) throw exclusive('author_id', 'author_username');
  if (q.assignee_id !== undefined && q.assignee_username !== undefined) throw exclusive('assignee_id', 'assignee_username');
  if (q.milestone !== undefined && q.milestone_id !== undefined) throw exclusive('milestone_id', 'milestone');
  let milestoneId: IssueMatch['milestoneId'];
  if (q.milestone_id !== undefined) {
    const v = q.milestone_id.toLowerCase();
    if (v !== 'none' && v !== 'any' && v !== 'upcoming' && v !== 'started') throw invalidParam(name('milestone_id'), 'does not have a valid value');
    milestoneId = v;
  }
  const types = commaList(q.issue_type, name('issue_type'));
  if (types?.some((t) => !(ISSUE_TYPES as readonly string[]).includes(t))) throw invalidParam(name('issue_type'), 'does not have a valid value');
  return {
    labels: labelListParam(q.labels, name('labels')),
    milestone: noneAnyParam(q.milestone),
    milestoneId,
    authorId: q.author_id,
    authorUsername: q.author_username,
    assigneeId: userMatchParam(q.assignee_id, name('assignee_id')),
    assigneeUsernames: commaList(q.assignee_username, name('assignee_username')),
    myReactionEmoji: noneAnyParam(q.my_reaction_emoji),
    iids: q.iids !== undefined ? capList([q.iids].flat(), name('iids')) : undefined,
    issueType: types,
  };
}

/**
 * GitLab's list parameters as the finder takes them. `global` for GET /issues (scope default
 * created_by_me); group and global lists leave out archived projects unless non_archived=false.
 */
export function issueFilters(q: IssueListQuery, opts: { global?: boolean; project?: boolean } = {}): IssueFilters {
  const scope = (q.scope ?? (opts.global ? 'created_by_me' : 'all')).replace(/-/g, '_');
  if (!['created_by_me', 'assigned_to_me', 'all'].includes(scope)) throw invalidParam('scope', 'does not have a valid value');
  // Each field once: `in=title,title,...` is one condition, not one per repetition.
  const searchIn = q.in === undefined ? undefined : [...new Set(q.in.split(',').map((s) => s.trim()).filter(Boolean))];
  if (searchIn?.some((f) => f !== 'title' && f !== 'description')) throw invalidParam('in', 'does not have a valid value');
  return {
    ...match(q),
    state: q.state as IssueFilters['state'],
    scope: scope as IssueFilters['scope'],
    search: q.search || undefined,
    searchIn: searchIn?.length ? (searchIn as ('title' | 'description')[]) : undefined,
    confidential: q.confidential,
    createdAfter: dateParam(q.created_after, 'created_after'),
    createdBefore: dateParam(q.created_before, 'created_before'),
    updatedAfter: dateParam(q.updated_after, 'updated_after'),
    updatedBefore: dateParam(q.updated_before, 'updated_before'),
    dueDate: q.due_date || undefined,
    nonArchived: opts.project ? undefined : (q.non_archived ?? true),
    not: q.not ? match(q.not, 'not') : undefined,
    orderBy: q.order_by as IssueFilters['orderBy'],
    sort: q.sort,
  };
}
