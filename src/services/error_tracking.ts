import { createHash, randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { ErrorStatus, ErrorTrackingClientKey, ErrorTrackingSetting, TrackedError } from '../db/schema/error_tracking.js';
import { notFound } from '../plugins/errors.js';
import type { ReportedError } from '../lib/sentry_envelope.js';

export async function findSetting(cairn: Cairn, projectId: number): Promise<ErrorTrackingSetting | undefined> {
  return cairn.db.selectFrom('error_tracking_settings').selectAll().where('project_id', '=', projectId).executeTakeFirst();
}

/** The project's settings, created on first write (integrated defaults to true, as GitLab's new settings). */
export async function saveSetting(cairn: Cairn, projectId: number, p: { active: boolean; integrated?: boolean }): Promise<ErrorTrackingSetting> {
  return cairn.db
    .insertInto('error_tracking_settings')
    .values({ project_id: projectId, active: p.active, ...(p.integrated !== undefined ? { integrated: p.integrated } : {}) })
    .onConflict((oc) =>
      oc.column('project_id').doUpdateSet({
        active: p.active,
        ...(p.integrated !== undefined ? { integrated: p.integrated } : {}),
        updated_at: sql`now()` as any,
      }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listClientKeys(cairn: Cairn, projectId: number, page: { limit: number; offset: number }) {
  const base = cairn.db.selectFrom('error_tracking_client_keys').where('project_id', '=', projectId);
  const [items, total] = await Promise.all([
    base.selectAll().orderBy('id').limit(page.limit).offset(page.offset).execute(),
    base.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow(),
  ]);
  return { items, total: total.n };
}

/** A new key: GitLab's `glet_` and 32 hex characters. */
export async function createClientKey(cairn: Cairn, projectId: number): Promise<ErrorTrackingClientKey> {
  return cairn.db
    .insertInto('error_tracking_client_keys')
    .values({ project_id: projectId, public_key: `glet_${randomBytes(16).toString('hex')}` })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function deleteClientKey(cairn: Cairn, projectId: number, keyId: number): Promise<ErrorTrackingClientKey> {
  const deleted = await cairn.db.deleteFrom('error_tracking_client_keys').where('project_id', '=', projectId).where('id', '=', keyId).returningAll().executeTakeFirst();
  if (!deleted) throw notFound('Client Key');
  return deleted;
}

/** Why the collector refuses a request: no such project or tracker off (404), a bad key (401). */
export type CollectorGate = { ok: true } | { ok: false; status: 401 | 404; what?: string };

/**
 * GitLab's collector checks, in its order: the project exists, its error tracking is active and
 * integrated, and the key is an active client key of that project.
 */
export async function collectorGate(cairn: Cairn, projectId: number, publicKey: string | null): Promise<CollectorGate> {
  const row = await cairn.db
    .selectFrom('projects as p')
    .leftJoin('error_tracking_settings as s', 's.project_id', 'p.id')
    .select(['p.id', 's.active', 's.integrated'])
    .where('p.id', '=', projectId)
    .where('p.pending_delete', '=', false)
    .executeTakeFirst();
  if (!row) return { ok: false, status: 404, what: 'Project' };
  if (!row.active || !row.integrated) return { ok: false, status: 404 };
  if (!publicKey) return { ok: false, status: 401 };
  const key = await cairn.db
    .selectFrom('error_tracking_client_keys')
    .select('id')
    .where('public_key', '=', publicKey)
    .where('project_id', '=', projectId)
    .where('active', '=', true)
    .executeTakeFirst();
  return key ? { ok: true } : { ok: false, status: 401 };
}

/** The fingerprint events are grouped by: GitLab's (name, description, actor, platform). */
function fingerprint(e: ReportedError): string {
  return createHash('sha256').update(JSON.stringify([e.name, e.description, e.actor, e.platform])).digest('hex');
}

/** PostgreSQL's jsonb takes no NUL character in strings. */
function storableJson(payload: Record<string, unknown>): string {
  return JSON.stringify(payload).replace(/\\u0000/g, '');
}

/**
 * Records one event: its error (found by fingerprint, or created) counts it and moves its
 * first/last seen; the event keeps the payload. One upsert, so concurrent reports of the same
 * error from several processes count each event once.
 */
export async function recordErrorEvent(cairn: Cairn, projectId: number, e: ReportedError, payload: Record<string, unknown>): Promise<number> {
  return cairn.db.transaction().execute(async (trx) => {
    const error = await trx
      .insertInto('error_tracking_errors')
      .values({
        project_id: projectId,
        fingerprint: fingerprint(e),
        name: e.name,
        description: e.description,
        actor: e.actor,
        platform: e.platform,
        events_count: 1,
        first_seen_at: e.occurredAt,
        last_seen_at: e.occurredAt,
      })
      .onConflict((oc) =>
        oc.columns(['project_id', 'fingerprint']).doUpdateSet({
          events_count: sql`error_tracking_errors.events_count + 1` as any,
          first_seen_at: sql`least(error_tracking_errors.first_seen_at, excluded.first_seen_at)` as any,
          last_seen_at: sql`greatest(error_tracking_errors.last_seen_at, excluded.last_seen_at)` as any,
          updated_at: sql`now()` as any,
        }),
      )
      .returning('id')
      .executeTakeFirstOrThrow();
    await trx
      .insertInto('error_tracking_error_events')
      .values({
        error_id: error.id,
        event_id: e.eventId,
        description: e.description,
        environment: e.environment,
        level: e.level,
        occurred_at: e.occurredAt,
        payload: storableJson(payload),
      })
      .execute();
    return error.id;
  });
}

export async function findTrackedError(cairn: Cairn, projectId: number, errorId: number): Promise<TrackedError> {
  const row = await cairn.db.selectFrom('error_tracking_errors').selectAll().where('project_id', '=', projectId).where('id', '=', errorId).executeTakeFirst();
  if (!row) throw notFound('Error');
  return row;
}

export async function latestEvent(cairn: Cairn, errorId: number) {
  return cairn.db.selectFrom('error_tracking_error_events').selectAll().where('error_id', '=', errorId).orderBy('occurred_at', 'desc').orderBy('id', 'desc').limit(1).executeTakeFirst();
}

export async function updateTrackedErrorStatus(cairn: Cairn, projectId: number, errorId: number, status: ErrorStatus): Promise<TrackedError> {
  const row = await cairn.db
    .updateTable('error_tracking_errors')
    .set({ status, updated_at: sql`now()` as any })
    .where('project_id', '=', projectId)
    .where('id', '=', errorId)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw notFound('Error');
  return row;
}
