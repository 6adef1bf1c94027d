import type { Database } from '../db/index.js';
import type { DeployKeysProject, Key } from '../db/schema/keys.js';
import type { Page } from '../plugins/pagination.js';

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

export async function findDeployKeyLinks(db: Database, keyIds: number[]): Promise<DeployKeysProject[]> {
  if (keyIds.length === 0) return [];
  return db.selectFrom('deploy_keys_projects').selectAll().where('deploy_key_id', 'in', keyIds).orderBy('id').execute();
}

/** A page of a project's deploy keys with their links, oldest link first. */
export async function findProjectDeployKeys(db: Database, projectId: number, page: Page) {
  const base = db.selectFrom('deploy_keys_projects').where('project_id', '=', projectId);
  const [links, count] = await Promise.all([
    base.selectAll().orderBy('id').limit(page.perPage).offset(page.offset).execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  const keys = links.length ? await db.selectFrom('keys').selectAll().where('id', 'in', links.map((l) => l.deploy_key_id)).execute() : [];
  const byId = new Map(keys.map((k) => [k.id, k]));
  return { rows: links.map((link) => ({ link, key: byId.get(link.deploy_key_id)! })), total: Number(count.n) };
}

export async function findProjectDeployKey(db: Database, projectId: number, keyId: number) {
  const link = await db.selectFrom('deploy_keys_projects').selectAll().where('project_id', '=', projectId).where('deploy_key_id', '=', keyId).executeTakeFirst();
  if (!link) return undefined;
  const key = await db.selectFrom('keys').selectAll().where('id', '=', keyId).executeTakeFirstOrThrow();
  return { link, key };
}

/** A page of all deploy keys (optionally only public ones) with the projects each reaches. */
export async function findAllDeployKeys(db: Database, onlyPublic: boolean, page: Page) {
  let base = db.selectFrom('keys').where('type', '=', 'DeployKey');
  if (onlyPublic) base = base.where('public', '=', true);
  const [keys, count] = await Promise.all([
    base.selectAll().orderBy('id').limit(page.perPage).offset(page.offset).execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  const projects = keys.length
    ? await db
        .selectFrom('deploy_keys_projects as dkp')
        .innerJoin('projects as p', 'p.id', 'dkp.project_id')
        .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
        .select([
          'dkp.deploy_key_id', 'dkp.can_push', 'p.id', 'p.description', 'p.name', 'p.path', 'p.created_at',
          'n.full_path as namespace_full_path', 'n.full_name as namespace_full_name',
        ])
        .where('dkp.deploy_key_id', 'in', keys.map((k) => k.id))
        .orderBy('dkp.id')
        .execute()
    : [];
  return {
    rows: keys.map((key) => ({ key, projects: projects.filter((p) => p.deploy_key_id === key.id) })),
    total: Number(count.n),
  };
}

