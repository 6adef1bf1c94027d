import type { FastifyRequest } from 'fastify';
import type { ProjectFilters } from '../../finders/projects.js';
import { timestampParam } from '../params.js';
import { capList } from '../list_filters.js';

function dateParam(q: Record<string, any>, name: string): Date | undefined {
  const v = q[name];
  return timestampParam(name, v === undefined || v === null ? undefined : String(v));
}

/** Maps GitLab's project list parameters onto the finder's filters. */
export function projectFilters(request: FastifyRequest): ProjectFilters {
  const q = (request.query ?? {}) as Record<string, any>;
  const admin = !!request.actor?.user.admin;
  return {
    archived: q.archived,
    visibility: q.visibility,
    search: q.search || undefined,
    searchNamespaces: q.search_namespaces,
    owned: q.owned,
    membership: q.membership,
    starred: q.starred,
    minAccessLevel: q.min_access_level,
    idAfter: q.id_after,
    idBefore: q.id_before,
    lastActivityAfter: dateParam(q, 'last_activity_after'),
    lastActivityBefore: dateParam(q, 'last_activity_before'),
    createdAfter: dateParam(q, 'created_after'),
    createdBefore: dateParam(q, 'created_before'),
    updatedAfter: dateParam(q, 'updated_after'),
    updatedBefore: dateParam(q, 'updated_before'),
    repositoryStorage: admin && q.repository_storage ? q.repository_storage : undefined,
    withIssuesEnabled: q.with_issues_enabled,
    withMergeRequestsEnabled: q.with_merge_requests_enabled,
    topics: typeof q.topic === 'string' && q.topic ? capList(q.topic.split(',').map((t: string) => t.trim()).filter(Boolean), 'topic') : undefined,
    orderBy: q.order_by ?? 'created_at',
    sort: q.sort ?? 'desc',
  };
}
