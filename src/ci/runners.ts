import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { CiRunner, RunnerType } from '../db/schema/ci.js';
import { decryptSecret, encryptSecret, randomToken, tokenDigest } from '../lib/secrets.js';
import { forbidden, validationFailed } from '../plugins/errors.js';

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

/**
 * Gives a new project or group its registration token inside the transaction that creates it,
 * so that reading runners_token later is a read, never a write (a write on a read would clear
 * the shared cache and keep pages from being cached).
 */
export async function createRegistrationToken(trx: Cairn['db'], config: Secrets['config'], owner: RegistrationOwner): Promise<void> {
  const { namespaceId, projectId } = ownerIds(owner);
  const token = newRegistrationToken();
  await sql`insert into ci_registration_tokens (runner_type, namespace_id, project_id, token_digest, token_encrypted)
            values (${owner.type}, ${namespaceId}, ${projectId}, ${tokenDigest(token)}, ${encryptSecret(config, token)})
            on conflict do nothing`.execute(trx);
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

/** Longest maintenance note (the spec's 255 characters). */
export const MAINTENANCE_NOTE_MAX = 255;

/** GitLab's runner validations on what the runner would become, as its 400 {"message": {field: [...]}} bodies. */
function validate(params: Pick<RunnerUpdate, 'access_level' | 'maximum_timeout' | 'maintenance_note' | 'maintainer_note' | 'description'>, tags: string[], runUntagged: boolean) {
  const errors: Record<string, string[]> = {};
  if (params.access_level !== undefined && !['not_protected', 'ref_protected'].includes(params.access_level)) {
    errors.access_level = ['is not included in the list'];
  }
  if (params.maximum_timeout !== undefined && params.maximum_timeout !== null && params.maximum_timeout < 600) {
    errors.maximum_timeout = ['needs to be at least 10 minutes'];
  }
  if (!runUntagged && tags.length === 0) errors.tags_list = ['can not be empty when runner is not allowed to pick untagged jobs'];
  const note = params.maintenance_note ?? params.maintainer_note;
  if (note && note.length > MAINTENANCE_NOTE_MAX) errors.maintenance_note = [`is too long (maximum is ${MAINTENANCE_NOTE_MAX} characters)`];
  if (params.description && params.description.length > 1024) errors.description = ['is too long (maximum is 1024 characters)'];
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
        name: info.name ?? null,
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
    if (info.name !== undefined && info.name !== runner.name) values.name = info.name;
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

// ---- management (the Runners API) -------------------------------------------------------------

export interface RunnerUpdate {
  description?: string;
  active?: boolean;
  paused?: boolean;
  tag_list?: string | string[];
  run_untagged?: boolean;
  locked?: boolean;
  access_level?: string;
  maximum_timeout?: number | null;
  maintenance_note?: string | null;
  maintainer_note?: string | null;
}

/**
 * PUT /runners/:id: what is given changes (tag_list is the final set; paused, or the deprecated
 * active, pauses and resumes), validated on the result as GitLab's model does. Null when the runner
 * is gone meanwhile.
 */
export async function updateRunner(cairn: Cairn, runner: CiRunner, params: RunnerUpdate): Promise<CiRunner | null> {
  const tags = params.tag_list !== undefined ? parseTagList(params.tag_list) : runner.tag_list;
  const runUntagged = params.run_untagged ?? runner.run_untagged;
  validate(params, tags, runUntagged);
  const values: Record<string, unknown> = {};
  if (params.description !== undefined) values.description = params.description;
  if (params.paused !== undefined) values.active = !params.paused;
  else if (params.active !== undefined) values.active = params.active;
  if (params.tag_list !== undefined) values.tag_list = tags;
  if (params.run_untagged !== undefined) values.run_untagged = params.run_untagged;
  if (params.locked !== undefined) values.locked = params.locked;
  if (params.access_level !== undefined) values.access_level = params.access_level;
  if (params.maximum_timeout !== undefined) values.maximum_timeout = params.maximum_timeout;
  const note = params.maintenance_note !== undefined ? params.maintenance_note : params.maintainer_note;
  if (note !== undefined) values.maintenance_note = note;
  const updated = await cairn.db
    .updateTable('ci_runners')
    .set({ ...values, updated_at: sql`now()` as any })
    .where('id', '=', runner.id)
    .returningAll()
    .executeTakeFirst();
  // A resumed runner, or one that may now take other jobs: long polls look at the queue again.
  if (updated) await sql`select pg_notify('cairn_ci_jobs', 'runner')`.execute(cairn.db);
  return updated ?? null;
}

/**
 * Enables a project runner for one more project. The caller checked who may; this refuses what
 * GitLab's model does: a runner already there (400, as its validation error).
 */
export async function assignRunner(cairn: Cairn, runnerId: number, projectId: number): Promise<void> {
  const inserted = await cairn.db
    .insertInto('ci_runner_projects')
    .values({ runner_id: runnerId, project_id: projectId, created_at: sql`now()` as any })
    .onConflict((oc) => oc.columns(['runner_id', 'project_id']).doNothing())
    .returning('id')
    .executeTakeFirst();
  if (!inserted) throw validationFailed({ assign_to: ['Validation failed: Runner has already been taken'] });
  await sql`select pg_notify('cairn_ci_jobs', ${String(projectId)})`.execute(cairn.db);
}

/**
 * Disables a project runner for a project. Refused (403) for the runner's only project, and for
 * its owner project (the first it was registered with): delete the runner instead. The rows are
 * locked so that two removals at once cannot leave the runner with no project.
 */
export async function unassignRunner(cairn: Cairn, runnerId: number, projectId: number): Promise<'gone' | 'done'> {
  return cairn.db.transaction().execute(async (trx) => {
    const links = await trx.selectFrom('ci_runner_projects').select(['id', 'project_id']).where('runner_id', '=', runnerId).orderBy('id').forUpdate().execute();
    const link = links.find((l) => l.project_id === projectId);
    if (!link) return 'gone' as const;
    if (links.length === 1) throw forbidden('Only one project associated with the runner. Please remove the runner instead');
    if (links[0].id === link.id) throw forbidden('You cannot unassign a runner from the owner project. Delete the runner instead');
    await trx.deleteFrom('ci_runner_projects').where('id', '=', link.id).execute();
    return 'done' as const;
  });
}
