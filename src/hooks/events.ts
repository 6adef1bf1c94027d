import crypto from 'node:crypto';
import { sql } from 'kysely';
import type { Cairn, PostReceiveEvent } from '../context.js';
import type { Database } from '../db/index.js';
import type { WebHook } from '../db/schema/webhooks.js';
import { enqueue, defineJob } from '../jobs/queue.js';
import { branchMatches, isProtectedRef } from '../policies/branches.js';
import { DELIVER_JOB, DELIVERY_ATTEMPTS, TRIGGERS, type HookTrigger } from './delivery.js';
import { buildPayload, jobPayload, type HookContext, type HookEvent } from './payloads.js';
import { findProjectRow } from '../finders/projects.js';
import type { CiBuild } from '../db/schema/ci.js';

/**
 * Where hook events start. A service calls `queueHookEvent` inside the transaction of the change
 * (so the event exists exactly when the change commits, and its payload, built there, shows the
 * change as it was made); it is one cheap look when the project has no hooks. The
 * `webhooks.event` job then enqueues one delivery per hook whose switch is on (and whose branch
 * filter passes), webhooks.deliver in src/hooks/delivery.ts. Pushes come from the
 * post-receive hooks (one event per ref, as GitLab sends them).
 */

export const EVENT_JOB = 'webhooks.event';

/** Hooks that may fire for a project: its own and its groups' (the whole ancestry), enabled or not. */
function hooksOfProject(db: Database, projectId: number) {
  return db
    .selectFrom('web_hooks as h')
    .selectAll('h')
    .where((eb) =>
      eb.or([
        eb('h.project_id', '=', projectId),
        eb.and([
          eb('h.type', '=', 'GroupHook'),
          sql<boolean>`h.group_id = any(coalesce((select n.traversal_ids from projects p join namespaces n on n.id = p.namespace_id where p.id = ${projectId}), '{}'::int[]))`,
        ]),
      ]),
    );
}

async function projectHasHooks(db: Database, projectId: number): Promise<boolean> {
  const row = await hooksOfProject(db, projectId).select(sql<number>`1`.as('one')).limit(1).executeTakeFirst();
  return row !== undefined;
}

/**
 * Records a hook event in the caller's transaction (nothing when the project has no hooks). The
 * payload is built here, in that transaction, so it shows the change as it was made.
 */
export async function queueHookEvent(cairn: HookContext, db: Database, event: HookEvent, eventUuid: string = crypto.randomUUID()): Promise<void> {
  if (!(await projectHasHooks(db, event.projectId))) return;
  const built = await buildPayload({ config: cairn.config, db }, event, { protectedRef: (ref, tag) => isProtectedRef({ db }, event.projectId, ref, tag) });
  if (!built) return;
  const branch = event.kind === 'push' && event.ref.startsWith('refs/heads/') ? event.ref.slice('refs/heads/'.length) : null;
  await enqueue(db, EVENT_JOB, { projectId: event.projectId, trigger: built.trigger, data: built.data, branch, eventUuid }, { maxAttempts: 5 });
}

/**
 * A CI job changed status (in the transaction that changed it). Job transitions happen where no
 * settings are at hand (the runner protocol's pick, the job state machine), so the event keeps
 * the job's row as it is now and its payload is built from that row when the event's job runs.
 */
export async function queueJobHookEvent(db: Database, build: CiBuild | null): Promise<void> {
  if (!build || build.type !== 'Ci::Build') return;
  if (!(await projectHasHooks(db, build.project_id))) return;
  await enqueue(db, EVENT_JOB, { projectId: build.project_id, job: build as unknown as Record<string, unknown>, eventUuid: crypto.randomUUID() }, { maxAttempts: 5 });
}

/** A name-based UUID (a push replayed after a crash is the same event, so the same UUID). */
function stableUuid(key: string): string {
  const h = crypto.createHash('sha256').update(key).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/** After a push: a push or tag push event per ref that moved. */
export async function queuePushEvents(cairn: Cairn, event: PostReceiveEvent): Promise<void> {
  if (!(await projectHasHooks(cairn.db, event.projectId))) return;
  for (const c of event.changes) {
    if (!c.ref.startsWith('refs/heads/') && !c.ref.startsWith('refs/tags/')) continue;
    const uuid = stableUuid(`push:${event.projectId}:${c.ref}:${c.oldSha}:${c.newSha}`);
    if (event.resumed) {
      const seen = await sql<{ n: number }>`select count(*)::int as n from background_jobs where kind = ${EVENT_JOB} and payload ->> 'eventUuid' = ${uuid}`.execute(cairn.db);
      if (seen.rows[0]?.n) continue;
    }
    await queueHookEvent(cairn, cairn.db, { kind: 'push', projectId: event.projectId, userId: event.userId, ref: c.ref, before: c.oldSha, after: c.newSha, pushOptions: event.pushOptions }, uuid);
  }
}

/** Does a push to `branch` pass the hook's branch filter (GitLab's push_events_branch_filter with its strategy)? */
export function branchFilterAllows(hook: Pick<WebHook, 'push_events_branch_filter' | 'branch_filter_strategy'>, branch: string): boolean {
  const filter = hook.push_events_branch_filter;
  if (hook.branch_filter_strategy === 'all_branches' || !filter) return true;
  if (hook.branch_filter_strategy === 'regex') {
    try {
      return new RegExp(filter).test(branch);
    } catch {
      return false;
    }
  }
  return filter.split(',').some((p) => p.trim() && branchMatches(p.trim(), branch));
}

defineJob(EVENT_JOB, async (cairn, payload) => {
  if (payload.job) {
    const project = await findProjectRow(cairn.db, Number(payload.projectId));
    if (!project) return;
    const built = await jobPayload(cairn, project, payload.job as CiBuild);
    payload = { ...payload, trigger: built.trigger, data: built.data, branch: null };
  }
  const trigger = payload.trigger as HookTrigger;
  const eventUuid = String(payload.eventUuid);
  const branch = (payload.branch as string | null) ?? null;
  const flag = TRIGGERS[trigger].flag;
  const hooks = (await hooksOfProject(cairn.db, Number(payload.projectId)).execute()).filter((h) => h[flag]);
  const targets = hooks.filter((h) => branch === null || trigger !== 'push_hooks' || branchFilterAllows(h, branch));
  if (!targets.length) return;
  await cairn.db.transaction().execute(async (trx) => {
    for (const hook of targets) {
      // A fan-out that ran before (its job finished but the worker lost it) is not repeated.
      const idempotencyKey = stableUuid(`delivery:${hook.id}:${eventUuid}`);
      const dup = await sql<{ n: number }>`select count(*)::int as n from background_jobs where kind = ${DELIVER_JOB} and payload ->> 'idempotencyKey' = ${idempotencyKey}`.execute(trx);
      if (dup.rows[0]?.n) continue;
      await enqueue(trx, DELIVER_JOB, { hookId: hook.id, trigger, data: payload.data, eventUuid, idempotencyKey }, { maxAttempts: DELIVERY_ATTEMPTS });
    }
  });
});

export function registerHookEvents(cairn: Cairn) {
  cairn.postReceiveHooks.push((event) => queuePushEvents(cairn, event));
}
