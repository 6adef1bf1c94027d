import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace, Project } from '../db/schema/core.js';
import { rowId } from '../lib/ids.js';

export type ProjectWithNamespace = Project & { namespace: Namespace };

/**
 * `:id` as GitLab takes it: an integer id or a (URL-decoded) full path like `group/sub/project`.
 * One query; the namespace comes along because nearly every caller needs it.
 */
export async function findProject(db: Database, idOrPath: string | number): Promise<ProjectWithNamespace | undefined> {
  const key = String(idOrPath);
  let q = db
    .selectFrom('projects as p')
    .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
    .selectAll('p')
    .select(sql<Namespace>`to_jsonb(n)`.as('namespace_json'));
  if (/^\d+$/.test(key)) {
    const id = rowId(key);
    if (id === undefined) return undefined;
    q = q.where('p.id', '=', id);
  } else {
    const slash = key.lastIndexOf('/');
    if (slash <= 0) return undefined;
    q = q
      .where(sql`lower(n.full_path)`, '=', key.slice(0, slash).toLowerCase())
      .where(sql`lower(p.path)`, '=', key.slice(slash + 1).toLowerCase());
  }
  const row = await q.where('p.pending_delete', '=', false).executeTakeFirst();
  if (!row) return undefined;
  const { namespace_json, ...project } = row as any;
  return { ...(project as Project), namespace: reviveNamespace(namespace_json) };
}

/** to_jsonb turns timestamps into strings; give them back their Date type. */
export function reviveNamespace(json: any): Namespace {
  return { ...json, created_at: new Date(json.created_at), updated_at: new Date(json.updated_at) };
}

export function projectFullPath(p: ProjectWithNamespace): string {
  return `${p.namespace.full_path}/${p.path}`;
}

export function projectFullName(p: ProjectWithNamespace): string {
  return `${p.namespace.full_name} / ${p.name}`;
}
