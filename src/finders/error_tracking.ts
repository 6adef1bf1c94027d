import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { ErrorStatus, TrackedError } from '../db/schema/error_tracking.js';

export type ErrorSort = 'last_seen' | 'first_seen' | 'frequency';

export interface ErrorListParams {
  status?: ErrorStatus;
  /** GitLab's search_term: a substring of the error's name or description. */
  query?: string;
  sort?: ErrorSort;
  limit: number;
  offset: number;
}

/** The project's tracked errors: filters, then GitLab's sorts (most recent, oldest first seen, most events). */
export async function listTrackedErrors(db: Database, projectId: number, p: ErrorListParams): Promise<{ items: TrackedError[]; total: number }> {
  let base = db.selectFrom('error_tracking_errors').where('project_id', '=', projectId);
  if (p.status) base = base.where('status', '=', p.status);
  if (p.query) {
    const q = p.query.toLowerCase();
    base = base.where(sql<boolean>`(position(${q} in lower(name)) > 0 or position(${q} in lower(description)) > 0)`);
  }
  let page = base.selectAll();
  if (p.sort === 'first_seen') page = page.orderBy('first_seen_at', 'desc');
  else if (p.sort === 'frequency') page = page.orderBy('events_count', 'desc');
  else page = page.orderBy('last_seen_at', 'desc');
  const [items, total] = await Promise.all([
    page.orderBy('id', 'desc').limit(p.limit).offset(p.offset).execute(),
    base.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow(),
  ]);
  return { items, total: total.n };
}
