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
