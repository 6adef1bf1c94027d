import { sql } from 'kysely';
import { loadConfig } from '../config.js';
import { openDatabase } from '../db/index.js';
import { migrateToLatest } from '../db/migrate.js';
import { registrationToken, resetRegistrationToken, type RegistrationOwner } from '../ci/runners.js';

/** `cairn registration-token [--group PATH | --project PATH] [--reset]`: prints a runner registration token. */
export async function registrationTokenCommand(args: string[]): Promise<void> {
  const config = loadConfig();
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    await migrateToLatest(database.db);
    const ctx = { db: database.db, config };
    let owner: RegistrationOwner = { type: 'instance_type' };
    const flag = (name: string) => {
      const i = args.indexOf(name);
      return i >= 0 ? args[i + 1] : undefined;
    };
    const group = flag('--group');
    const project = flag('--project');
    if (group) {
      const ns = await database.db.selectFrom('namespaces').select('id').where('type', '=', 'Group').where(sql<string>`lower(full_path)`, '=', group.toLowerCase()).executeTakeFirst();
      if (!ns) throw new Error(`no group "${group}"`);
      owner = { type: 'group_type', namespaceId: ns.id };
    } else if (project) {
      const p = await database.db
        .selectFrom('projects as p')
        .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
        .select('p.id')
        .where(sql<string>`lower(n.full_path || '/' || p.path)`, '=', project.toLowerCase())
        .executeTakeFirst();
      if (!p) throw new Error(`no project "${project}"`);
      owner = { type: 'project_type', projectId: p.id };
    }
    const token = args.includes('--reset') ? await resetRegistrationToken(ctx, owner) : await registrationToken(ctx, owner);
    console.log(token);
  } finally {
    await database.close();
  }
}
