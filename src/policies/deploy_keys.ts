import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { Key } from '../db/schema/keys.js';
import { PROJECT_ADMIN } from './rules.js';

/**
 * May this user change a deploy key's title? The title is shared by every project the key is
 * enabled in, so (as GitLab's update_deploy_key_title) an administrator may, and otherwise only
 * for a private key whose every project the user maintains; an instance-wide key's title
 * belongs to the administrators.
 *
 * "Maintains" is the `admin_project` ability (maintainers and up, PROJECT_ADMIN in
 * rules.ts), asked of every project at once in SQL rather than loading each project to call can().
 */
export async function mayRenameDeployKey(db: Database, user: Pick<User, 'id' | 'admin'>, key: Pick<Key, 'id' | 'public'>): Promise<boolean> {
  if (user.admin) return true;
  if (key.public) return false;
  const row = await sql<{ unmanaged: boolean }>`
    select exists (
      select 1 from deploy_keys_projects
      -- not admin_project on this project: below maintainer
      where deploy_key_id = ${key.id} and not ${PROJECT_ADMIN.level(sql`project_access_level(${user.id}, project_id)`)}
    ) as unmanaged`.execute(db);
  return !row.rows[0].unmanaged;
}
