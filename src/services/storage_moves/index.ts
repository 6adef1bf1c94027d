import { sql } from 'kysely';
import type { Cairn } from '../../context.js';
import type { Database } from '../../db/index.js';
import type { StorageMoveState } from '../../db/schema/storage_moves.js';
import { checkRepository, copyRepository, moveRepository, refsFingerprint, removeRepository, repositoryExists, repositoryPath } from '../../git/repository.js';
import { defineMachine, transition, type EventOf, type Transition } from '../../db/state_machine.js';
import { defineJob, enqueue } from '../../jobs/queue.js';
import { invalidParam, validationFailed } from '../../plugins/errors.js';
import { waitForWrites } from '../repository_writes.js';
import { containerCountOnStorage, containerIdsOnStorage, containerKind, containerKindOfType, type ContainerKind, type ContainerKindName } from './kinds.js';

export { containerKind, type ContainerKindName } from './kinds.js';

/**
 * Repository storage moves, GitLab's state machine as data: a transition is one guarded UPDATE
 * (`where state = any(from)`), so two processes can never both make it.
 *
 *   initial -> scheduled (the container turns read-only, the job is queued)
 *   scheduled -> started (the job copies and verifies the repositories)
 *   started -> replicated (one transaction: the container's storage switches, read-only ends)
 *   replicated -> finished (the source copies are removed, storageMoveCleanupDelay later) | cleanup_failed
 *   initial, scheduled, started -> failed (read-only ends; the source was never touched)
 */
export const STORAGE_MOVE_MACHINE = defineMachine('repository_storage_moves', 'state', {
  schedule: { from: ['initial'], to: 'scheduled' },
  start: { from: ['scheduled'], to: 'started' },
  finishReplication: { from: ['started'], to: 'replicated' },
  finishCleanup: { from: ['replicated'], to: 'finished' },
  fail: { from: ['initial', 'scheduled', 'started'], to: 'failed' },
  failCleanup: { from: ['replicated'], to: 'cleanup_failed' },
} satisfies Record<string, Transition<StorageMoveState>>);

export const IN_PROGRESS_STATES: StorageMoveState[] = ['initial', 'scheduled', 'started'];

const RUN_JOB = 'storage_move.run';
const BULK_JOB = 'storage_move.bulk';
const CLEANUP_JOB = 'storage_move.cleanup';
/** How long a move waits for writes that began before it made the container read-only (GitLab: 30 s). */
const WRITE_WAIT_MS = 30_000;
/** A move whose job was interrupted (the worker died) this many times fails instead of trying again. */
const MAX_RUNS = 3;
/** Where a copy is built before it is renamed into place (same storage, so the rename is atomic). */
const TEMP_SUFFIX = '.moving';

async function moveTo(db: Database, moveId: number, event: EventOf<typeof STORAGE_MOVE_MACHINE>, extra: { error_message?: string | null } = {}): Promise<boolean> {
  return (await transition(db, STORAGE_MOVE_MACHINE, moveId, event, { set: { updated_at: sql`now()` as any, ...extra } })) !== null;
}

async function setReadOnly(db: Database, kind: ContainerKind, id: number, readOnly: boolean): Promise<void> {
  await sql`update ${sql.table(kind.table)} c set repository_read_only = ${readOnly} where c.id = ${id} and ${kind.scope}`.execute(db);
}

/**
 * GitLab picks a destination by storage weight when none is given; Cairn's storages have no
 * weights, so it picks the other storage holding the fewest containers of the kind.
 */
async function pickDestination(cairn: Cairn, db: Database, kind: ContainerKind, source: string): Promise<string> {
  let best: { name: string; n: number } | null = null;
  for (const name of Object.keys(cairn.config.storages).sort()) {
    if (name === source) continue;
    const n = await containerCountOnStorage(db, kind, name);
    if (!best || n < best.n) best = { name, n };
  }
  return best?.name ?? source;
}

function assertStorage(cairn: Cairn, field: 'source_storage_name' | 'destination_storage_name', name: string) {
  if (!Object.hasOwn(cairn.config.storages, name)) throw validationFailed({ [field]: ['is not included in the list'] });
}

/**
 * Schedules one container's move (POST /projects/:id/repository_storage_moves and each item of a
 * bulk move): validates, records it as scheduled, makes the container read-only and queues the
 * job, in one transaction. 400 with GitLab's validation body when it cannot move.
 */
export async function scheduleMove(cairn: Cairn, kind: ContainerKind, containerId: number, destination?: string | null) {
  if (destination) assertStorage(cairn, 'destination_storage_name', destination);
  return cairn.db.transaction().execute(async (trx) => {
    const c = await kind.locate(trx, containerId, true);
    if (!c) throw validationFailed({ [kind.name]: ["can't be blank"] });
    // A container moving already is read-only: GitLab's "is read-only" refusal of a second move.
    if (c.readOnly) throw validationFailed({ [kind.name]: ['is read-only'] });
    // The previous move still has the other storage's copy to remove (cleanupMove): a move back
    // now would build its copy where that removal is about to happen.
    const cleaning = await trx
      .selectFrom('repository_storage_moves')
      .select('id')
      .where('container_type', '=', kind.type)
      .where('container_id', '=', c.id)
      .where('state', '=', 'replicated')
      .executeTakeFirst();
    if (cleaning) throw validationFailed({ [kind.name]: ['is still being moved: its previous storage move is removing the source copy'] });
    const dest = destination || (await pickDestination(cairn, trx, kind, c.storage));
    if (dest === c.storage) throw validationFailed({ destination_storage_name: ['must be different from the source storage'] });
    const move = await trx
      .insertInto('repository_storage_moves')
      .values({ container_type: kind.type, container_id: c.id, state: 'scheduled', source_storage_name: c.storage, destination_storage_name: dest, error_message: null })
      .returningAll()
      .executeTakeFirstOrThrow();
    await setReadOnly(trx, kind, c.id, true);
    await enqueue(trx, RUN_JOB, { moveId: move.id }, { maxAttempts: MAX_RUNS + 2 });
    return move;
  });
}

/**
 * POST /<kind>_repository_storage_moves: validates the storages, then queues one job that
 * schedules a move for every container of the kind on the source storage (202).
 */
export async function enqueueBulkMove(cairn: Cairn, kind: ContainerKind, source: string, destination?: string | null): Promise<void> {
  // Grape's `values:` check of the bulk API's parameters.
  for (const [field, value] of [['source_storage_name', source], ['destination_storage_name', destination]] as const) {
    if (value !== undefined && value !== null && !Object.hasOwn(cairn.config.storages, value)) throw invalidParam(field, 'does not have a valid value');
  }
  if (destination === source) throw validationFailed({ destination_storage_name: ['must be different from the source storage'] });
  await enqueue(cairn.db, BULK_JOB, { kind: kind.name, source, destination: destination ?? null });
}

/**
 * Schedules a move for each container of the kind on `source` (the bulk job's work; `cairn
 * storage move` calls it directly). Containers that cannot move (one already moving) are left
 * out, as GitLab does. Returns the moves scheduled.
 */
export async function scheduleBulkMoves(cairn: Cairn, kind: ContainerKind, source: string, destination?: string | null): Promise<{ id: number }[]> {
  const scheduled: { id: number }[] = [];
  for (const id of await containerIdsOnStorage(cairn.db, kind, source)) {
    try {
      const located = await kind.locate(cairn.db, id);
      if (!located || located.storage !== source || located.readOnly) continue;
      scheduled.push(await scheduleMove(cairn, kind, id, destination));
    } catch {
      // Not movable now (read-only, deleted meanwhile, or no other storage): skipped.
    }
  }
  return scheduled;
}

defineJob(BULK_JOB, async (cairn, payload) => {
  const kind = containerKind(payload.kind as ContainerKindName);
  if (!kind) throw new Error(`no container kind "${payload.kind}"`);
  await scheduleBulkMoves(cairn, kind, payload.source, payload.destination);
});

defineJob(RUN_JOB, async (cairn, payload, job) => {
  await runMove(cairn, Number(payload.moveId), job?.attempts ?? 1);
});

defineJob(CLEANUP_JOB, async (cairn, payload) => {
  await cleanupMove(cairn, Number(payload.moveId));
});

function paths(cairn: Cairn, storage: string, diskPath: string) {
  const dir = repositoryPath(cairn.config.storages[storage], diskPath);
  return { dir, temp: dir + TEMP_SUFFIX };
}

/**
 * Runs (or resumes) one move. Every step can be repeated after a crash: a copy that was under
 * way is discarded and made again while the record still points at the source; once the record
 * has switched (replicated) only the removal of the source is left, to the cleanup job queued with
 * the switch.
 */
export async function runMove(cairn: Cairn, moveId: number, run = 1): Promise<void> {
  const { db } = cairn;
  const move = await db.selectFrom('repository_storage_moves').selectAll().where('id', '=', moveId).executeTakeFirst();
  if (!move) return;
  const kind = containerKindOfType(move.container_type);
  if (!kind) throw new Error(`no container kind for ${move.container_type}`);
  const container = { type: move.container_type, id: Number(move.container_id) };
  const { source_storage_name: source, destination_storage_name: dest } = move;

  if (move.state === 'scheduled' || move.state === 'started') {
    if (move.state === 'scheduled') await moveTo(db, moveId, 'start');
    const located = await kind.locate(db, container.id);
    const diskPaths = located?.diskPaths ?? [];
    const discardCopies = async () => {
      // Never the live copy: only while the container's record points elsewhere.
      if (!located || located.storage === dest) return;
      for (const p of diskPaths) {
        const d = paths(cairn, dest, p);
        await removeRepository(d.temp);
        await removeRepository(d.dir);
      }
    };
    const fail = async (message: string) => {
      await discardCopies().catch(() => {});
      await db.transaction().execute(async (trx) => {
        if (await moveTo(trx, moveId, 'fail', { error_message: message.slice(0, 1000) })) {
          await setReadOnly(trx, kind, container.id, false);
        }
      });
    };
    try {
      if (!located) throw new Error(`${kind.label} no longer exists`);
      if (located.storage !== source) throw new Error(`${kind.label} is not on storage ${source} any more`);
      if (run > MAX_RUNS) throw new Error(`the move was interrupted ${run - 1} times`);
      if (!Object.hasOwn(cairn.config.storages, source) || !Object.hasOwn(cairn.config.storages, dest)) throw new Error('storage is not configured in this process');
      if (!(await waitForWrites(db, container, WRITE_WAIT_MS))) throw new Error(`Timeout waiting for ${kind.name} repository pushes`);
      for (const p of diskPaths) {
        const from = paths(cairn, source, p);
        const to = paths(cairn, dest, p);
        // What an interrupted run left at the destination is discarded: the record still points at the source.
        await removeRepository(to.temp);
        await removeRepository(to.dir);
        if (!(await repositoryExists(from.dir))) continue;
        await copyRepository(from.dir, to.temp);
        const [a, b] = await Promise.all([refsFingerprint(from.dir), refsFingerprint(to.temp)]);
        if (a.refs !== b.refs || a.head !== b.head) throw new Error(`the copy of ${p} does not have the same refs as its source`);
        await checkRepository(to.temp);
        await moveRepository(to.temp, to.dir);
      }
      await db.transaction().execute(async (trx) => {
        if (!(await moveTo(trx, moveId, 'finishReplication'))) return;
        // Where the repositories are and that they are writable again change together; every
        // process's cache drops the container's row when this commits (src/cache/).
        const res = await sql`update ${sql.table(kind.table)} c
                                 set repository_storage = ${dest}, repository_read_only = false, updated_at = now()
                               where c.id = ${container.id} and c.repository_storage = ${source} and ${kind.scope}`.execute(trx);
        if (Number(res.numAffectedRows ?? 0) !== 1) throw new Error(`${kind.label} changed storage during the move`);
        // Replicated: the source copies go later, with this job (cleanupMove), ahead of the other
        // moves of a bulk move waiting in the queue.
        await enqueue(trx, CLEANUP_JOB, { moveId }, { runAt: new Date(Date.now() + cairn.config.storageMoveCleanupDelay * 1000), priority: 1 });
      });
    } catch (err) {
      await fail((err as Error).message ?? String(err));
    }
  }
}

/**
 * Removes a replicated move's source copies, then marks it finished (cleanup_failed when the
 * removal fails). Queued with the switch, to run storageMoveCleanupDelay later: until then reads
 * that located the container before the switch (a clone under way, another process whose cache
 * had not yet dropped the row) still find the source copy.
 */
export async function cleanupMove(cairn: Cairn, moveId: number): Promise<void> {
  const { db } = cairn;
  const move = await db.selectFrom('repository_storage_moves').selectAll().where('id', '=', moveId).executeTakeFirst();
  if (move?.state !== 'replicated') return;
  const kind = containerKindOfType(move.container_type);
  if (!kind) throw new Error(`no container kind for ${move.container_type}`);
  const { source_storage_name: source, destination_storage_name: dest } = move;
  const located = await kind.locate(db, Number(move.container_id));
  try {
    // The container points at the destination, and no other move of it can start before this one
    // is finished (scheduleMove): the source copies are nobody's now.
    if (located && located.storage === dest && Object.hasOwn(cairn.config.storages, source)) {
      for (const p of located.diskPaths) await removeRepository(paths(cairn, source, p).dir);
    }
    await moveTo(db, moveId, 'finishCleanup');
  } catch (err) {
    await moveTo(db, moveId, 'failCleanup', { error_message: String((err as Error).message ?? err).slice(0, 1000) });
  }
}
