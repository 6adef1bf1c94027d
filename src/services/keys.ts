import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { DeployKeysProject, Key, KeyUsageType } from '../db/schema/keys.js';
import { parseSshPublicKey, type ParsedSshKey } from '../lib/ssh-keys.js';
import { PROJECT_ADMIN } from '../policies/rules.js';

export const MIN_RSA_BITS = 1024;
const ALLOWED_FAMILIES = 'RSA, ECDSA, ED25519, ECDSA_SK, or ED25519_SK';

export interface KeyInput {
  title: string;
  key: string;
  expiresAt?: Date | null;
  usageType?: KeyUsageType;
}

export type KeyErrors = Record<string, string[]>;

type Validated = { parsed: ParsedSshKey; errors?: undefined } | { parsed?: undefined; errors: KeyErrors };

/** GitLab's Key model validations, with its field names and wording. */
export async function validateKey(db: Database, input: KeyInput): Promise<Validated> {
  const errors: KeyErrors = {};
  const add = (field: string, msg: string) => (errors[field] ??= []).push(msg);
  const title = input.title ?? '';
  if (!title.trim()) add('title', "can't be blank");
  else if (title.length > 255) add('title', 'is too long (maximum is 255 characters)');
  const text = (input.key ?? '').trim();
  const parsed = text ? parseSshPublicKey(text) : null;
  if (!text) add('key', "can't be blank");
  else if (text.length > 5000) add('key', 'is too long (maximum is 5000 characters)');
  if (!parsed) {
    if (text) add('key', 'is invalid');
    add('fingerprint_sha256', 'cannot be generated');
  } else {
    if (parsed.family === 'DSA') add('key', `type is forbidden. Must be ${ALLOWED_FAMILIES}`);
    else if (parsed.family === 'RSA' && parsed.bits < MIN_RSA_BITS) add('key', `must be at least ${MIN_RSA_BITS} bits`);
    const taken = await db.selectFrom('keys').select('id').where('fingerprint_sha256', '=', parsed.fingerprintSha256).executeTakeFirst();
    if (taken) add('fingerprint_sha256', 'has already been taken');
  }
  if (input.expiresAt && input.expiresAt.getTime() <= Date.now()) add('key', 'has expired');
  if (Object.keys(errors).length || !parsed) return { errors };
  return { parsed };
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: string }).code === '23505';
}

const TAKEN: KeyErrors = { fingerprint_sha256: ['has already been taken'] };

async function insertKey(
  db: Database,
  values: { userId: number | null; type: 'DeployKey' | null; input: KeyInput; isPublic?: boolean },
): Promise<{ key: Key; errors?: undefined } | { key?: undefined; errors: KeyErrors }> {
  const v = await validateKey(db, values.input);
  if (!v.parsed) return { errors: v.errors };
  try {
    const key = await db
      .insertInto('keys')
      .values({
        user_id: values.userId,
        type: values.type,
        title: values.input.title,
        key: v.parsed.normalized,
        fingerprint: v.parsed.fingerprintMd5,
        fingerprint_sha256: v.parsed.fingerprintSha256,
        usage_type: values.input.usageType ?? 'auth_and_signing',
        public: values.isPublic ?? false,
        expires_at: values.input.expiresAt ?? null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { key };
  } catch (err) {
    // Another request stored the same key between the check and the insert.
    if (isUniqueViolation(err)) return { errors: TAKEN };
    throw err;
  }
}

export function insertUserKey(db: Database, userId: number, input: KeyInput) {
  return insertKey(db, { userId, type: null, input });
}

/** An instance-wide (public) deploy key, created by an administrator. */
export function insertPublicDeployKey(db: Database, creatorId: number, input: KeyInput) {
  return insertKey(db, { userId: creatorId, type: 'DeployKey', input: { ...input, usageType: 'auth' }, isPublic: true });
}

export async function deleteKey(db: Database, keyId: number): Promise<void> {
  await db.deleteFrom('keys').where('id', '=', keyId).execute();
}

/**
 * Deploy keys a user may attach to a project they maintain: public ones and those of their other
 * projects where they hold `admin_project` (maintainers and up: PROJECT_ADMIN in
 * policies/rules.ts), asked in SQL of all their projects at once.
 */
export async function accessibleDeployKey(db: Database, user: { id: number; admin: boolean }, where: { id?: number; fingerprintSha256?: string }) {
  let q = db.selectFrom('keys').selectAll().where('type', '=', 'DeployKey');
  if (where.id !== undefined) q = q.where('id', '=', where.id);
  if (where.fingerprintSha256 !== undefined) q = q.where('fingerprint_sha256', '=', where.fingerprintSha256);
  if (!user.admin) {
    q = q.where((eb) =>
      eb.or([
        eb('public', '=', true),
        eb(
          'id',
          'in',
          eb
            .selectFrom('deploy_keys_projects as dkp')
            .select('dkp.deploy_key_id')
            .where('dkp.project_id', 'in', sql<number>`${PROJECT_ADMIN.projectIds(user.id)}`),
        ),
      ]),
    );
  }
  return q.executeTakeFirst();
}

/** Attaches a deploy key to a project; attaching it twice returns the existing link. */
export async function linkDeployKey(db: Database, projectId: number, keyId: number, canPush: boolean): Promise<DeployKeysProject> {
  const inserted = await db
    .insertInto('deploy_keys_projects')
    .values({ deploy_key_id: keyId, project_id: projectId, can_push: canPush })
    .onConflict((oc) => oc.columns(['deploy_key_id', 'project_id']).doNothing())
    .returningAll()
    .executeTakeFirst();
  if (inserted) return inserted;
  return db
    .selectFrom('deploy_keys_projects')
    .selectAll()
    .where('deploy_key_id', '=', keyId)
    .where('project_id', '=', projectId)
    .executeTakeFirstOrThrow();
}

export type AddDeployKeyResult =
  | { link: DeployKeysProject; key: Key; errors?: undefined }
  | { link?: undefined; key?: undefined; errors: KeyErrors };

/**
 * POST /projects/:id/deploy_keys: the same key already on the project is returned as is; a key
 * the caller can reach elsewhere is reused; otherwise a new deploy key is created.
 */
export async function addDeployKeyToProject(
  db: Database,
  user: { id: number; admin: boolean },
  projectId: number,
  input: KeyInput & { canPush: boolean },
): Promise<AddDeployKeyResult> {
  const parsed = parseSshPublicKey(input.key ?? '');
  if (parsed) {
    const onProject = await db
      .selectFrom('deploy_keys_projects as dkp')
      .innerJoin('keys as k', 'k.id', 'dkp.deploy_key_id')
      .selectAll('dkp')
      .where('dkp.project_id', '=', projectId)
      .where('k.fingerprint_sha256', '=', parsed.fingerprintSha256)
      .executeTakeFirst();
    if (onProject) return { link: onProject, key: (await findKey(db, onProject.deploy_key_id))! };
    const reusable = await accessibleDeployKey(db, user, { fingerprintSha256: parsed.fingerprintSha256 });
    if (reusable) return { link: await linkDeployKey(db, projectId, reusable.id, input.canPush), key: reusable };
  }
  return db.transaction().execute(async (trx) => {
    const created = await insertKey(trx, { userId: user.id, type: 'DeployKey', input: { ...input, usageType: 'auth' } });
    if (!created.key) {
      const nested: KeyErrors = {};
      for (const [field, msgs] of Object.entries(created.errors)) nested[`deploy_key.${field}`] = msgs;
      return { errors: nested };
    }
    const link = await linkDeployKey(trx, projectId, created.key.id, input.canPush);
    return { link, key: created.key };
  });
}

async function findKey(db: Database, id: number) {
  return db.selectFrom('keys').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function updateDeployKeysProject(
  db: Database,
  link: DeployKeysProject,
  changes: { title?: string; canPush?: boolean },
): Promise<{ link: DeployKeysProject; errors?: undefined } | { link?: undefined; errors: KeyErrors }> {
  if (changes.title !== undefined) {
    if (!changes.title.trim()) return { errors: { 'deploy_key.title': ["can't be blank"] } };
    if (changes.title.length > 255) return { errors: { 'deploy_key.title': ['is too long (maximum is 255 characters)'] } };
  }
  return db.transaction().execute(async (trx) => {
    if (changes.title !== undefined) {
      await trx.updateTable('keys').set({ title: changes.title, updated_at: new Date() }).where('id', '=', link.deploy_key_id).execute();
    }
    const updated =
      changes.canPush !== undefined
        ? await trx
            .updateTable('deploy_keys_projects')
            .set({ can_push: changes.canPush, updated_at: new Date() })
            .where('id', '=', link.id)
            .returningAll()
            .executeTakeFirstOrThrow()
        : link;
    return { link: updated };
  });
}

/** Detaches a deploy key from a project; a private key left on no project is deleted, as GitLab does. */
export async function removeDeployKeyFromProject(db: Database, link: DeployKeysProject): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('deploy_keys_projects').where('id', '=', link.id).execute();
    await trx
      .deleteFrom('keys')
      .where('id', '=', link.deploy_key_id)
      .where('public', '=', false)
      .where((eb) => eb.not(eb.exists(eb.selectFrom('deploy_keys_projects').select('id').where('deploy_key_id', '=', link.deploy_key_id))))
      .execute();
  });
}
