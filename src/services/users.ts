import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { User, UsersTable } from '../db/schema/core.js';
import type { Insertable } from 'kysely';
import { hashPassword } from '../lib/secrets.js';

export type NewUser = Omit<Insertable<UsersTable>, 'encrypted_password'> & { password?: string | null };

/** Creates a user and their personal namespace in one transaction. */
export async function insertUser(db: Database, attrs: NewUser): Promise<User> {
  const { password, ...rest } = attrs;
  const encrypted = password ? await hashPassword(password) : null;
  return db.transaction().execute(async (trx) => {
    const user = await trx
      .insertInto('users')
      .values({ ...rest, encrypted_password: encrypted })
      .returningAll()
      .executeTakeFirstOrThrow();
    const ns = await trx
      .insertInto('namespaces')
      .values({
        type: 'User',
        name: user.name,
        path: user.username,
        full_path: user.username,
        full_name: user.name,
        owner_id: user.id,
        visibility_level: 20,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await trx.updateTable('namespaces').set({ traversal_ids: [ns.id] }).where('id', '=', ns.id).execute();
    return user;
  });
}

export async function findUserByUsername(db: Database, username: string): Promise<User | undefined> {
  return db.selectFrom('users').selectAll().where(sql`lower(username)`, '=', username.toLowerCase()).executeTakeFirst();
}

export async function findUserByLogin(db: Database, login: string): Promise<User | undefined> {
  return db
    .selectFrom('users')
    .selectAll()
    .where((eb) => eb.or([eb(sql`lower(username)`, '=', login.toLowerCase()), eb(sql`lower(email)`, '=', login.toLowerCase())]))
    .executeTakeFirst();
}

export async function personalNamespaceOf(db: Database, userId: number) {
  return db.selectFrom('namespaces').selectAll().where('type', '=', 'User').where('owner_id', '=', userId).executeTakeFirst();
}
