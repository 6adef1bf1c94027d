import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import { hashPassword, passwordHashOutdated, randomToken, tokenDigest, verifyPassword } from '../lib/secrets.js';
import { insertPersonalAccessToken } from './tokens.js';
import { findUserByUsername, insertUser } from './users.js';

export const ROOT_TOKEN_SCOPES = ['api', 'read_api', 'read_user', 'read_repository', 'write_repository', 'sudo', 'admin_mode'];
const BOOTSTRAP_LOCK = 424242;

/**
 * First start: the administrator `root`. With CAIRN_ROOT_TOKEN, root owns a token with exactly
 * that value. Both are idempotent, and an advisory lock keeps two processes from racing.
 */
export async function bootstrap(cairn: Cairn, log: (msg: string) => void = console.log): Promise<void> {
  const { db, config } = cairn;
  await db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(${BOOTSTRAP_LOCK})`.execute(conn);
    try {
      let root = await findUserByUsername(conn, 'root');
      if (!root) {
        const generated = config.rootPassword ? null : randomToken(24);
        root = await insertUser(conn, {
          username: 'root',
          name: 'Administrator',
          email: 'admin@example.com',
          admin: true,
          password: config.rootPassword ?? generated,
          confirmed_at: new Date(),
          can_create_group: true,
        });
        if (generated) log(`Created administrator "root" with password: ${generated}  (shown once; set CAIRN_ROOT_PASSWORD to choose it)`);
      } else if (config.rootPassword) {
        // Keep root's password in step with the configuration across restarts.
        if (passwordHashOutdated(root.encrypted_password) || !(await verifyPassword(config.rootPassword, root.encrypted_password))) {
          await conn.updateTable('users').set({ encrypted_password: await hashPassword(config.rootPassword) }).where('id', '=', root.id).execute();
        }
      }
      if (config.rootToken) {
        const digest = tokenDigest(config.rootToken);
        const existing = await conn.selectFrom('personal_access_tokens').select(['id', 'user_id']).where('token_digest', '=', digest).executeTakeFirst();
        if (!existing) {
          await insertPersonalAccessToken(conn, { userId: root.id, name: 'CAIRN_ROOT_TOKEN', scopes: ROOT_TOKEN_SCOPES, expiresAt: null, token: config.rootToken });
        } else {
          await conn
            .updateTable('personal_access_tokens')
            .set({ user_id: root.id, scopes: ROOT_TOKEN_SCOPES, revoked: false, expires_at: null })
            .where('id', '=', existing.id)
            .execute();
        }
      }
    } finally {
      await sql`select pg_advisory_unlock(${BOOTSTRAP_LOCK})`.execute(conn);
    }
  });
}
