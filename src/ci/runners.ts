import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { CiRunner, RunnerType } from '../db/schema/ci.js';
import { decryptSecret, encryptSecret, randomToken, tokenDigest } from '../lib/secrets.js';
import { validationFailed } from '../plugins/errors.js';

/**
 * Runner registration and authentication (the runner side of the protocol). Registration
 * tokens belong to the instance, a group or a project and are created at first need; runner
 * authentication tokens are kept as digests only.
 */
export type RegistrationOwner = { type: 'instance_type' } | { type: 'group_type'; namespaceId: number } | { type: 'project_type'; projectId: number };

/** GitLab's registration tokens carry this prefix (a rotated registration token keeps it). */
const REGISTRATION_PREFIX = 'GR1348941';

function ownerIds(owner: RegistrationOwner) {
  return { namespaceId: owner.type === 'group_type' ? owner.namespaceId : null, projectId: owner.type === 'project_type' ? owner.projectId : null };
}

function newRegistrationToken(): string {
  return REGISTRATION_PREFIX + randomToken(20);
}

type Secrets = Pick<Cairn, 'db' | 'config'>;

/** The instance's registration token, created at first need. */
async function instanceRegistrationToken(cairn: Secrets): Promise<string> {
  const find = () =>
    cairn.db.selectFrom('ci_registration_tokens').select(['id', 'token_encrypted']).where('runner_type', '=', 'instance_type').executeTakeFirst();
  let row = await find();
  let token = row ? decryptSecret(cairn.config, row.token_encrypted) : null;
  if (!token) {
    await replaceUnreadable(cairn, row ? [row] : [], [{ type: 'instance_type' }]);
    row = await find();
    token = row ? decryptSecret(cairn.config, row.token_encrypted) : null;
  }
  if (!token) throw new Error('registration token cannot be read back');
  return token;
}

/**
 * Gives these owners a new token in place of rows whose value cannot be decrypted (a token carried
 * over in digest only by migration 0850, or a changed secret key), and creates the missing ones.
 * Two processes doing it at once: the guarded delete and the unique owner index keep one row each.
 */
async function replaceUnreadable(cairn: Secrets, unreadable: { id: number; token_encrypted: string }[], owners: RegistrationOwner[]) {
  await cairn.db.transaction().execute(async (trx) => {
    for (const row of unreadable) {
      await trx.deleteFrom('ci_registration_tokens').where('id', '=', row.id).where('token_encrypted', '=', row.token_encrypted).execute();
    }
    for (const owner of owners) {
      const { namespaceId, projectId } = ownerIds(owner);
      const token = newRegistrationToken();
      await sql`insert into ci_registration_tokens (runner_type, namespace_id, project_id, token_digest, token_encrypted)
                values (${owner.type}, ${namespaceId}, ${projectId}, ${tokenDigest(token)}, ${encryptSecret(cairn.config, token)})
                on conflict do nothing`.execute(trx);
    }
  });
}

/**
 * The registration tokens (shown as runners_token) of these projects or groups, in clear, each
 * created when it has none yet: one query when they all exist.
 */
export async function registrationTokens(cairn: Secrets, type: 'project_type' | 'group_type', ids: number[]): Promise<Map<number, string>> {
  const wanted = [...new Set(ids)];
  const out = new Map<number, string>();
  if (!wanted.length) return out;
  const load = async () => {
    const rows = await cairn.db
      .selectFrom('ci_registration_tokens')
      .select(['id', 'project_id', 'namespace_id', 'token_encrypted'])
      .where('runner_type', '=', type)
      .where(type === 'project_type' ? 'project_id' : 'namespace_id', 'in', wanted)
      .execute();
    const unreadable: { id: number; token_encrypted: string }[] = [];
    for (const row of rows) {
      const owner = (type === 'project_type' ? row.project_id : row.namespace_id)!;
      const token = decryptSecret(cairn.config, row.token_encrypted);
      if (token) out.set(owner, token);
      else unreadable.push(row);
    }
    return unreadable;
  };
  const unreadable = await load();
  const missing = wanted.filter((id) => !out.has(id));
  if (!missing.length) return out;
  const owners = missing.map((id): RegistrationOwner => (type === 'project_type' ? { type, projectId: id } : { type, namespaceId: id }));
  await replaceUnreadable(cairn, unreadable, owners);
  await load();
  for (const id of missing) if (!out.has(id)) throw new Error(`registration token of ${type} ${id} cannot be read back`);
  return out;
}

/** The owner's registration token, created when it has none yet. */
export async function registrationToken(cairn: Secrets, owner: RegistrationOwner): Promise<string> {
  if (owner.type === 'instance_type') return instanceRegistrationToken(cairn);
  const id = owner.type === 'project_type' ? owner.projectId : owner.namespaceId;
  return (await registrationTokens(cairn, owner.type, [id])).get(id)!;
}

/** Replaces the owner's registration token (runners already registered keep working). */
export async function resetRegistrationToken(cairn: Secrets, owner: RegistrationOwner): Promise<string> {
  const { namespaceId, projectId } = ownerIds(owner);
  const token = newRegistrationToken();
  await cairn.db.transaction().execute(async (trx) => {
    await trx
      .deleteFrom('ci_registration_tokens')
      .where('runner_type', '=', owner.type)
      .where(sql<boolean>`coalesce(namespace_id, 0) = ${namespaceId ?? 0} and coalesce(project_id, 0) = ${projectId ?? 0}`)
      .execute();
    await sql`insert into ci_registration_tokens (runner_type, namespace_id, project_id, token_digest, token_encrypted)
              values (${owner.type}, ${namespaceId}, ${projectId}, ${tokenDigest(token)}, ${encryptSecret(cairn.config, token)})`.execute(trx);
  });
  return token;
}

/** The registration row of a token (by its digest: the token itself is not stored in clear). */
async function findRegistration(cairn: Cairn, registration: string) {
  if (typeof registration !== 'string' || !registration) return undefined;
  return cairn.db.selectFrom('ci_registration_tokens').selectAll().where('token_digest', '=', tokenDigest(registration)).executeTakeFirst();
}

export interface RunnerInfo {
  name?: string;
  version?: string;
  revision?: string;
  platform?: string;
  architecture?: string;
  executor?: string;
}

export interface RegisterParams {
  description?: string;
  maintenance_note?: string;
  maintainer_note?: string;
  tag_list?: string | string[];
  run_untagged?: boolean;
  locked?: boolean;
  access_level?: string;
  maximum_timeout?: number;
  paused?: boolean;
  active?: boolean;
  info?: RunnerInfo;
}

export function parseTagList(value: string | string[] | undefined): string[] {
  const list = Array.isArray(value) ? value : typeof value === 'string' ? value.split(',') : [];
  return [...new Set(list.map((t) => String(t).trim()).filter(Boolean))];
}

/** GitLab's runner validations, as its 400 {"message": {field: [...]}} bodies. */
function validate(params: RegisterParams, tags: string[], runUntagged: boolean) {
  const errors: Record<string, string[]> = {};
  if (params.access_level !== undefined && !['not_protected', 'ref_protected'].includes(params.access_level)) {
    errors.access_level = ['is not included in the list'];
  }
  if (params.maximum_timeout !== undefined && params.maximum_timeout !== null && params.maximum_timeout < 600) {
    errors.maximum_timeout = ['needs to be at least 10 minutes'];
  }
  if (!runUntagged && tags.length === 0) errors.tags_list = ['can not be empty when runner is not allowed to pick untagged jobs'];
  const note = params.maintenance_note ?? params.maintainer_note;
  if (note && note.length > 1024) errors.maintenance_note = ['is too long (maximum is 1024 characters)'];
  if (tags.some((t) => t.length > 255)) errors.tag_list = ['is too long (maximum is 255 characters)'];
  if (Object.keys(errors).length) throw validationFailed(errors);
}

/**
 * Registers a runner with a registration token: an instance, group or project runner after the
 * token's owner. Null when the token is unknown.
 */
export async function registerRunner(
  cairn: Cairn,
  registration: string,
  params: RegisterParams,
  ip: string | null,
): Promise<{ id: number; token: string; token_expires_at: string | null } | null> {
  const reg = await findRegistration(cairn, registration);
  if (!reg) return null;
  const tags = parseTagList(params.tag_list);
  const runUntagged = params.run_untagged ?? true;
  validate(params, tags, runUntagged);
  const token = randomToken(30);
  const info = params.info ?? {};
  const paused = params.paused ?? (params.active === undefined ? false : !params.active);
  const runnerType: RunnerType = reg.runner_type;
  const runner = await cairn.db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('ci_runners')
      .values({
        token_digest: tokenDigest(token),
        description: params.description ?? '',
        runner_type: runnerType,
        active: !paused,
        locked: params.locked ?? false,
        run_untagged: runUntagged,
        access_level: (params.access_level as 'not_protected' | 'ref_protected') ?? 'not_protected',
        maximum_timeout: params.maximum_timeout ?? null,
        tag_list: tags,
        maintenance_note: params.maintenance_note ?? params.maintainer_note ?? null,
        version: info.version ?? null,
        revision: info.revision ?? null,
        platform: info.platform ?? null,
        architecture: info.architecture ?? null,
        executor_type: info.executor ?? null,
        ip_address: ip,
        contacted_at: null,
        creator_id: null,
        created_at: sql`now()` as any,
        updated_at: sql`now()` as any,
      })
      .returning(['id', 'token_expires_at'])
      .executeTakeFirstOrThrow();
    if (runnerType === 'group_type') await trx.insertInto('ci_runner_namespaces').values({ runner_id: row.id, namespace_id: reg.namespace_id! }).execute();
    if (runnerType === 'project_type') {
      await trx.insertInto('ci_runner_projects').values({ runner_id: row.id, project_id: reg.project_id!, created_at: sql`now()` as any }).execute();
    }
    return row;
  });
  return { id: runner.id, token, token_expires_at: runner.token_expires_at ? new Date(runner.token_expires_at).toISOString() : null };
}

/** The runner of an authentication token; null when unknown or expired. */
export async function findRunnerByToken(cairn: Cairn, token: unknown): Promise<CiRunner | null> {
  if (typeof token !== 'string' || !token) return null;
  const runner = await cairn.db.selectFrom('ci_runners').selectAll().where('token_digest', '=', tokenDigest(token)).executeTakeFirst();
  if (!runner) return null;
  if (runner.token_expires_at && new Date(runner.token_expires_at).getTime() <= Date.now()) return null;
  return runner;
}

/** contacted_at is written at most this often (GitLab caches it and persists now and then). */
const CONTACT_WRITE_MS = 60_000;

/**
 * Records that the runner called: contacted_at, its address and what it says it is. Written at
 * most once a minute unless what it says changed.
 */
export async function recordRunnerContact(cairn: Cairn, runner: CiRunner, info: RunnerInfo | undefined, ip: string | null): Promise<void> {
  const values: Record<string, unknown> = {};
  if (info) {
    if (info.version !== undefined && info.version !== runner.version) values.version = info.version;
    if (info.revision !== undefined && info.revision !== runner.revision) values.revision = info.revision;
    if (info.platform !== undefined && info.platform !== runner.platform) values.platform = info.platform;
    if (info.architecture !== undefined && info.architecture !== runner.architecture) values.architecture = info.architecture;
    if (info.executor !== undefined && info.executor !== runner.executor_type) values.executor_type = info.executor;
  }
  if (ip && ip !== runner.ip_address) values.ip_address = ip;
  const stale = !runner.contacted_at || Date.now() - new Date(runner.contacted_at).getTime() > CONTACT_WRITE_MS;
  if (!stale && !Object.keys(values).length) return;
  await cairn.db
    .updateTable('ci_runners')
    .set({ ...values, contacted_at: sql`now()` as any })
    .where('id', '=', runner.id)
    .execute();
}

/** A new authentication token for the runner; the old one stops working. */
export async function resetRunnerToken(cairn: Cairn, runnerId: number): Promise<{ token: string; token_expires_at: string | null }> {
  const token = randomToken(30);
  const row = await cairn.db
    .updateTable('ci_runners')
    .set({ token_digest: tokenDigest(token), updated_at: sql`now()` as any })
    .where('id', '=', runnerId)
    .returning(['token_expires_at'])
    .executeTakeFirstOrThrow();
  return { token, token_expires_at: row.token_expires_at ? new Date(row.token_expires_at).toISOString() : null };
}

export async function deleteRunner(cairn: Cairn, runnerId: number): Promise<void> {
  await cairn.db.deleteFrom('ci_runners').where('id', '=', runnerId).execute();
}
