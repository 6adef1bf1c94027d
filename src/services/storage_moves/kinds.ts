import { sql, type RawBuilder } from 'kysely';
import type { TSchema } from 'typebox';
import { findGroup } from '../../finders/groups.js';
import { findProjectRow } from '../../finders/projects.js';
import { ProjectIdentitySchema } from '../../presenters/schemas/projects.js';
import { BasicGroupSchema } from '../../presenters/schemas/storage_moves.js';
import { BasicSnippetSchema } from '../../presenters/schemas/snippets.js';
import { presentBasicSnippet } from '../../presenters/snippets.js';
import type { Database } from '../../db/index.js';
import type { StorageMoveContainerType } from '../../db/schema/storage_moves.js';
import { hashedDiskPath } from '../../git/repository.js';
import { groupWebUrl } from '../../presenters/namespaces.js';
import { presentProjectIdentity } from '../../presenters/projects.js';
import type { PresentContext } from '../../presenters/users.js';

/**
 * The kinds of container whose repositories can change storage (GitLab's projects, snippets and
 * groups), each told once: where its row is, which columns hold its storage and read-only flag,
 * where its repositories lie inside a storage, and how a move shows it. The move machinery
 * (./index.ts), its job and its routes only ever go through this registry.
 */
export type ContainerKindName = 'project' | 'snippet' | 'group';

export interface LocatedContainer {
  id: number;
  storage: string;
  readOnly: boolean;
  /** Paths of its repositories inside a storage; those absent from the source are not copied. */
  diskPaths: string[];
}

export interface ContainerKind {
  name: ContainerKindName;
  type: StorageMoveContainerType;
  /** "404 Project Not Found". */
  label: string;
  /** Table holding repository_storage and repository_read_only, and what limits it to this kind. */
  table: string;
  scope: RawBuilder<boolean>;
  /** The container's id from the `:id` of a route (an id or a URL-encoded full path), null when none. */
  find(db: Database, idOrPath: string): Promise<number | null>;
  /** Schema of the container as a move shows it. */
  schema: TSchema;
  /** The container's row, locked FOR UPDATE when `lock` (inside a transaction). */
  locate(db: Database, id: number, lock?: boolean): Promise<LocatedContainer | null>;
  /** How each container is shown inside a move (the `project` / `snippet` / `group` field). */
  present(db: Database, ctx: PresentContext, ids: number[]): Promise<Map<number, Record<string, unknown>>>;
}

const kinds = new Map<ContainerKindName, ContainerKind>();

export function registerContainerKind(kind: ContainerKind): void {
  kinds.set(kind.name, kind);
}

/** The kind by name; undefined until registered (snippet moves answer 404 until snippets plug in). */
export function containerKind(name: ContainerKindName): ContainerKind | undefined {
  return kinds.get(name);
}

export function containerKindOfType(type: StorageMoveContainerType): ContainerKind | undefined {
  return [...kinds.values()].find((k) => k.type === type);
}

/** Generic reads of a kind's row by its storage columns (bulk moves, counts). */
export async function containerIdsOnStorage(db: Database, kind: ContainerKind, storage: string): Promise<number[]> {
  const rows = await sql<{ id: number }>`select c.id from ${sql.table(kind.table)} c where ${kind.scope} and c.repository_storage = ${storage} order by c.id`.execute(db);
  return rows.rows.map((r) => Number(r.id));
}

export async function containerCountOnStorage(db: Database, kind: ContainerKind, storage: string): Promise<number> {
  const rows = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(kind.table)} c where ${kind.scope} and c.repository_storage = ${storage}`.execute(db);
  return Number(rows.rows[0]?.n ?? 0);
}

registerContainerKind({
  name: 'project',
  type: 'Project',
  label: 'Project',
  table: 'projects',
  scope: sql<boolean>`true`,
  schema: ProjectIdentitySchema,
  async find(db, idOrPath) {
    return (await findProjectRow(db, idOrPath))?.id ?? null;
  },
  async locate(db, id, lock) {
    let q = db.selectFrom('projects').select(['id', 'repository_storage', 'repository_read_only', 'disk_path']).where('id', '=', id);
    if (lock) q = q.forUpdate();
    const p = await q.executeTakeFirst();
    if (!p) return null;
    // The project's repository and, when it has one, its wiki's beside it (repository_removal does the same).
    return { id: p.id, storage: p.repository_storage, readOnly: p.repository_read_only, diskPaths: [p.disk_path, p.disk_path.replace(/\.git$/, '.wiki.git')] };
  },
  async present(db, _ctx, ids) {
    const out = new Map<number, Record<string, unknown>>();
    if (!ids.length) return out;
    const rows = await db
      .selectFrom('projects as p')
      .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
      .select(['p.id', 'p.name', 'p.path', 'p.description', 'p.created_at', 'n.full_name', 'n.full_path'])
      .where('p.id', 'in', ids)
      .execute();
    for (const r of rows) {
      out.set(r.id, presentProjectIdentity({ ...r, namespace: { full_name: r.full_name, full_path: r.full_path } } as any));
    }
    return out;
  },
});

/**
 * Groups. GitLab's group moves move the group wiki's repository; Cairn has no group wikis, so a
 * group's move copies the repository at the group's hashed path when one exists on disk and
 * otherwise only switches the group's repository_storage (the record of where its repositories
 * go). The state machine, read-only flag and validation are the same as for projects.
 */
registerContainerKind({
  name: 'group',
  type: 'Group',
  label: 'Group',
  table: 'namespaces',
  scope: sql<boolean>`c.type = 'Group'`,
  schema: BasicGroupSchema,
  async find(db, idOrPath) {
    const g = await findGroup(db, idOrPath);
    return g && g.type === 'Group' ? g.id : null;
  },
  async locate(db, id, lock) {
    let q = db.selectFrom('namespaces').select(['id', 'repository_storage', 'repository_read_only']).where('id', '=', id).where('type', '=', 'Group');
    if (lock) q = q.forUpdate();
    const g = await q.executeTakeFirst();
    if (!g) return null;
    return { id: g.id, storage: g.repository_storage, readOnly: g.repository_read_only, diskPaths: [hashedDiskPath('group', g.id)] };
  },
  async present(db, ctx, ids) {
    const out = new Map<number, Record<string, unknown>>();
    if (!ids.length) return out;
    const rows = await db.selectFrom('namespaces').select(['id', 'name', 'full_path']).where('id', 'in', ids).where('type', '=', 'Group').execute();
    for (const g of rows) out.set(g.id, { id: g.id, web_url: groupWebUrl(ctx, g.full_path), name: g.name });
    return out;
  },
});

/** Snippets: each has one repository at its hashed disk path (services/snippets.ts snippetRepoPath). */
registerContainerKind({
  name: 'snippet',
  type: 'Snippet',
  label: 'Snippet',
  table: 'snippets',
  scope: sql<boolean>`true`,
  schema: BasicSnippetSchema,
  async find(db, idOrPath) {
    if (!/^\d{1,9}$/.test(idOrPath)) return null;
    return (await db.selectFrom('snippets').select('id').where('id', '=', Number(idOrPath)).executeTakeFirst())?.id ?? null;
  },
  async locate(db, id, lock) {
    let q = db.selectFrom('snippets').select(['id', 'repository_storage', 'repository_read_only', 'disk_path']).where('id', '=', id);
    if (lock) q = q.forUpdate();
    const s = await q.executeTakeFirst();
    if (!s) return null;
    return { id: s.id, storage: s.repository_storage, readOnly: s.repository_read_only, diskPaths: [s.disk_path] };
  },
  async present(db, ctx, ids) {
    const out = new Map<number, Record<string, unknown>>();
    if (!ids.length) return out;
    const rows = await db
      .selectFrom('snippets as s')
      .leftJoin('projects as p', 'p.id', 's.project_id')
      .leftJoin('namespaces as n', 'n.id', 'p.namespace_id')
      .selectAll('s')
      .select(['p.path as project_path', 'n.full_path as namespace_path'])
      .where('s.id', 'in', ids)
      .execute();
    for (const r of rows) {
      const projectPath = r.project_id !== null && r.namespace_path && r.project_path ? `${r.namespace_path}/${r.project_path}` : null;
      out.set(r.id, presentBasicSnippet(ctx, r, projectPath));
    }
    return out;
  },
});
