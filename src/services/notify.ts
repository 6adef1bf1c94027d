import crypto from 'node:crypto';
import type { Config } from '../config.js';
import type { Database } from '../db/index.js';
import { enqueue } from '../jobs/queue.js';
import { mailEnabled } from '../mail/transport.js';
import type { NotificationEvent } from './notification_settings.js';

/**
 * The one call a service makes when something happened that people may be mailed about: it
 * enqueues a "notify" job in the caller's transaction (so the mail goes out if and only if the
 * change commits). The job (services/notifications.ts) works out who gets it and sends. Nothing
 * is enqueued when outgoing mail is not configured (CAIRN_SMTP_URL unset).
 */

export const NOTIFY_JOB = 'notify';

/** What an event is about: the row the mail describes. */
export type NotifyTarget =
  | { type: 'Issue'; id: number }
  | { type: 'MergeRequest'; id: number }
  | { type: 'Epic'; id: number }
  | { type: 'Note'; id: number }
  | { type: 'Pipeline'; id: number }
  | { type: 'Project'; id: number };

export interface NotifyEvent {
  action: NotificationEvent;
  target: NotifyTarget;
  /** Who did it (not mailed about their own action); null for the system (due dates, pipelines). */
  actorId: number | null;
  /** reassign_*: who was assigned before. */
  previousAssigneeIds?: number[];
  /** push_to_merge_request: the commits the push added, oldest first. */
  commits?: { id: string; title: string }[];
  /** moved_project: the full path it had. */
  oldPath?: string;
  /** Makes the event idempotent across enqueues (issue_due: one per issue and date); random otherwise. */
  key?: string;
}

export async function notify(cairn: { config: Pick<Config, 'smtpUrl'> }, db: Database, event: NotifyEvent): Promise<void> {
  if (!mailEnabled(cairn.config)) return;
  await enqueue(db, NOTIFY_JOB, { ...event, key: event.key ?? crypto.randomUUID() });
}

/**
 * A pipeline finished: failed_pipeline, success_pipeline, or fixed_pipeline when the last
 * finished pipeline of the same ref had failed (GitLab's ref status). Mailed to the pipeline's
 * user (services/notifications.ts). Call in the transaction that records the new status.
 */
export async function notifyPipelineFinished(
  cairn: { config: Pick<Config, 'smtpUrl'> },
  db: Database,
  pipeline: { id: number; project_id: number; ref: string; user_id: number | null; parent_pipeline_id: number | null },
  before: string | null,
  after: string | null,
): Promise<void> {
  if (!mailEnabled(cairn.config) || before === after || pipeline.user_id === null || pipeline.parent_pipeline_id !== null) return;
  if (after !== 'success' && after !== 'failed') return;
  let action: NotificationEvent = after === 'failed' ? 'failed_pipeline' : 'success_pipeline';
  if (after === 'success') {
    const previous = await db
      .selectFrom('ci_pipelines')
      .select('status')
      .where('project_id', '=', pipeline.project_id)
      .where('ref', '=', pipeline.ref)
      .where('id', '<', pipeline.id)
      .where('parent_pipeline_id', 'is', null)
      .where('status', 'in', ['success', 'failed'])
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    if (previous?.status === 'failed') action = 'fixed_pipeline';
  }
  await notify(cairn, db, { action, target: { type: 'Pipeline', id: pipeline.id }, actorId: null });
}
