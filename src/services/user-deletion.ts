import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { DB } from '../db/types.js';
import type { Namespace, User } from '../db/schema/core.js';
import { scheduleRepositoryRemoval } from './repository_removal.js';
import { scheduleLfsPrune } from '../lfs/objects.js';
import { deleteAuthorSnippets, deleteProjectsSnippets } from './snippets.js';
import { conflict } from '../plugins/errors.js';
import { insertUser } from './users.js';

/**
 * Columns that record a user's contributions. A soft delete hands these rows to the ghost
 * user; a hard delete removes them ('delete') or clears the reference ('nullify'). Each area
 * that records contributions adds its columns here.
 */
export interface ContributionColumn {
  table: keyof DB;
  column: string;
  onHardDelete: 'delete' | 'nullify';
}

export const CONTRIBUTION_COLUMNS: ContributionColumn[] = [
  { table: 'projects', column: 'creator_id', onHardDelete: 'nullify' },
];

const GHOST_LOCK = 424243;
export const SOLE_OWNER_MESSAGE = 'User cannot be removed while is the sole-owner of a group';

/** The placeholder user deleted users' contributions move to; created on first need. */
export async function ghostUser(db: Database): Promise<User> {
  const existing = await db.selectFrom('users').selectAll().where('user_type', '=', 'ghost').orderBy('id').limit(1).executeTakeFirst();
  if (existing) return existing;
  return db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(${GHOST_LOCK})`.execute(conn);
    try {
      const again = await conn.selectFrom('users').selectAll().where('user_type', '=', 'ghost').orderBy('id').limit(1).executeTakeFirst();
      if (again) return again;
      let username = 'ghost';
      for (let i = 1; ; i++) {
        const taken = await conn.selectFrom('namespaces').select('id').where('parent_id', 'is', null).where(sql`lower(path)`, '=', username).executeTakeFirst()
          ?? await conn.selectFrom('users').select('id').where((eb) => eb.or([eb(sql`lower(username)`, '=', username), eb(sql`lower(email)`, '=', `${username}@example.com`)])).executeTakeFirst();
        if (!taken) break;
        username = `ghost${i}`;
      }
      return insertUser(conn, {
        username,
        name: 'Ghost User',
        email: `${username}@example.com`,
        user_type: 'ghost',
        state: 'blocked',
        bio: 'This is a "Ghost User", created to hold all issues authored by users that have since been deleted. This user cannot be removed.',
        projects_limit: 0,
        can_create_group: false,
        confirmed_at: new Date(),
        password: null,
      });
    } finally {
      await sql`select pg_advisory_unlock(${GHOST_LOCK})`.execute(conn);
    }
  });
}

/** Groups where the user is a direct owner and no one else is. */
export async function soloOwnedGroups(db: Database, userId: number): Promise<Namespace[]> {
  return db
    .selectFrom('namespaces as n')
    .innerJoin('members as m', (j) => j.onRef('m.source_id', '=', 'n.id').on('m.source_type', '=', 'Namespace'))
    .selectAll('n')
    .where('n.type', '=', 'Group')
    .where('m.user_id', '=', userId)
    .where('m.access_level', '=', 50)
    .where(sql<boolean>`not exists (select 1 from members o where o.source_type = 'Namespace' and o.source_id = n.id
      and o.access_level = 50 and o.user_id <> ${userId} and o.state = 0 and o.requested_at is null)`)
    .execute();
}

/**
 * DELETE /users/:id. Without hard_delete a sole owner of a group is refused (409) and the
 * user's contributions move to the ghost user; with it, those groups and the contributions
 * go too. The personal namespace and its projects always go. Repositories leave the disk
 * in the queue, after the rows are gone.
 */
export async function deleteUser(cairn: Cairn, user: User, opts: { hardDelete: boolean }): Promise<void> {
  const { db } = cairn;
  const solo = await soloOwnedGroups(db, user.id);
  if (solo.length && !opts.hardDelete) throw conflict(SOLE_OWNER_MESSAGE);
  const ghost = opts.hardDelete ? null : await ghostUser(db);

  await db.transaction().execute(async (trx) => {
    const groupIds = opts.hardDelete ? solo.map((g) => g.id) : [];
    const doomed = await trx
      .selectFrom('projects as p')
      .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
      .select(['p.id', 'p.repository_storage', 'p.disk_path'])
      .where((eb) => {
        const personal = eb.and([eb('n.type', '=', 'User'), eb('n.owner_id', '=', user.id)]);
        return groupIds.length ? eb.or([personal, eb(sql`n.traversal_ids && ${sql.val(groupIds)}::int[]`, '=', true)]) : personal;
      })
      .execute();

    for (const c of CONTRIBUTION_COLUMNS) {
      const table = sql.table(c.table);
      const column = sql.ref(c.column);
      if (ghost) await sql`update ${table} set ${column} = ${ghost.id} where ${column} = ${user.id}`.execute(trx);
      else if (c.onHardDelete === 'delete') await sql`delete from ${table} where ${column} = ${user.id}`.execute(trx);
      else await sql`update ${table} set ${column} = null where ${column} = ${user.id}`.execute(trx);
    }
    // Their snippets go, whoever would inherit their other contributions (GitLab's Users::DestroyService),
    // and so do those of the projects that go with them.
    await deleteAuthorSnippets(trx, user.id);
    await deleteProjectsSnippets(trx, doomed.map((p) => p.id));
    // The projects' LFS links go with them (cascade); objects nobody links then leave the store.
    await scheduleLfsPrune(trx, doomed.map((p) => p.id));
    if (groupIds.length) await trx.deleteFrom('namespaces').where('id', 'in', groupIds).execute();
    await trx.deleteFrom('users').where('id', '=', user.id).execute();
    await scheduleRepositoryRemoval(trx, doomed);
  });
}
