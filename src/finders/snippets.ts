import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { Snippet } from '../db/schema/snippets.js';
import { snippetVisibleTo } from '../policies/snippets.js';
import { pageWithTotal, totalCount } from './paging.js';

/**
 * Snippet lists (GitLab's SnippetsFinder): visibility first (policies/snippets.ts
 * snippetVisibleTo, the same rule as a single snippet's), then each filter, newest first.
 */
export interface SnippetFilter {
  /** Written by this user. */
  authorId?: number;
  /** In this project. */
  projectId?: number;
  /** Personal snippets only. */
  onlyPersonal?: boolean;
  /** Public ones only. */
  onlyPublic?: boolean;
  /** At least this visible (10: internal and public; the explore page). */
  minVisibility?: number;
  createdAfter?: Date;
  createdBefore?: Date;
}

function filtered(db: Database, viewer: User | null, f: SnippetFilter) {
  return db
    .selectFrom('snippets as s')
    .leftJoin('projects as p', 'p.id', 's.project_id')
    .where(snippetVisibleTo(viewer))
    .$if(f.authorId !== undefined, (q) => q.where('s.author_id', '=', f.authorId!))
    .$if(f.projectId !== undefined, (q) => q.where('s.project_id', '=', f.projectId!))
    .$if(!!f.onlyPersonal, (q) => q.where('s.project_id', 'is', null))
    .$if(!!f.onlyPublic, (q) => q.where('s.visibility_level', '=', 20))
    .$if(f.minVisibility !== undefined, (q) => q.where('s.visibility_level', '>=', f.minVisibility!))
    .$if(f.createdAfter !== undefined, (q) => q.where('s.created_at', '>', f.createdAfter!))
    .$if(f.createdBefore !== undefined, (q) => q.where('s.created_at', '<', f.createdBefore!));
}

/** One page of the snippets `viewer` may see that match `f`, and how many there are. */
export async function listSnippets(db: Database, viewer: User | null, f: SnippetFilter, page: { offset: number; limit: number }): Promise<{ rows: Snippet[]; total: number }> {
  const rows = await filtered(db, viewer, f).selectAll('s').select(totalCount).orderBy('s.id', 'desc').offset(page.offset).limit(page.limit).execute();
  return pageWithTotal(rows, page.offset, async () => {
    const r = await filtered(db, viewer, f).select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
    return r.n;
  });
}

/** A snippet by id, whoever may see it (callers apply the policy). */
export function findSnippetById(db: Database, id: number): Promise<Snippet | undefined> {
  return db.selectFrom('snippets').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The authors and project paths a page of snippets is shown with, one statement each. */
export async function snippetRelations(db: Database, rows: Snippet[]): Promise<{ authors: Map<number, User>; projectPaths: Map<number, string> }> {
  const authorIds = [...new Set(rows.map((r) => r.author_id))];
  const projectIds = [...new Set(rows.map((r) => r.project_id).filter((id): id is number => id !== null))];
  const [authors, projects] = await Promise.all([
    authorIds.length ? db.selectFrom('users').selectAll().where('id', 'in', authorIds).execute() : [],
    projectIds.length
      ? db
          .selectFrom('projects as p')
          .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
          .select(['p.id', sql<string>`n.full_path || '/' || p.path`.as('full_path')])
          .where('p.id', 'in', projectIds)
          .execute()
      : [],
  ]);
  return { authors: new Map(authors.map((u) => [u.id, u])), projectPaths: new Map(projects.map((p) => [p.id, p.full_path])) };
}
