import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { Key } from '../db/schema/keys.js';
import type { Page } from '../plugins/pagination.js';

export async function findUserById(db: Database, id: number): Promise<User | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
}

/** `:id_or_username` as the users API takes it. */
export async function findUserByIdOrUsername(db: Database, idOrUsername: string): Promise<User | undefined> {
  const q = db.selectFrom('users').selectAll();
  if (/^\d+$/.test(idOrUsername)) return q.where('id', '=', Number(idOrUsername)).executeTakeFirst();
  return q.where(sql`lower(username)`, '=', idOrUsername.toLowerCase()).executeTakeFirst();
}

/** A page of a user's own SSH keys (not deploy keys they created), oldest first. */
export async function findUserKeys(db: Database, userId: number, page: Page): Promise<{ rows: Key[]; total: number }> {
  const base = db.selectFrom('keys').where('user_id', '=', userId).where('type', 'is', null);
  const [rows, count] = await Promise.all([
    base.selectAll().orderBy('id').limit(page.perPage).offset(page.offset).execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

export async function findUserKey(db: Database, userId: number, keyId: number): Promise<Key | undefined> {
  return db.selectFrom('keys').selectAll().where('id', '=', keyId).where('user_id', '=', userId).where('type', 'is', null).executeTakeFirst();
}

export async function findKeyById(db: Database, id: number): Promise<Key | undefined> {
  return db.selectFrom('keys').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function findKeyByFingerprint(db: Database, kind: 'md5' | 'sha256', fingerprint: string): Promise<Key | undefined> {
  const q = db.selectFrom('keys').selectAll();
  return (kind === 'md5' ? q.where('fingerprint', '=', fingerprint) : q.where('fingerprint_sha256', '=', fingerprint)).executeTakeFirst();
}

export async function findKeyByFingerprintSha256(db: Database, fingerprintSha256: string): Promise<Key | undefined> {
  return findKeyByFingerprint(db, 'sha256', fingerprintSha256);
}
