import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { NotificationLevel, NotificationSettingRow, NotificationSourceType } from '../db/schema/notifications.js';
import { ApiError } from '../plugins/errors.js';
import { verifiedEmailsOf } from './users.js';

/**
 * Notification settings (GitLab's NotificationSetting): a user's global level and notification
 * e-mail, and a level per group and per project, where `global` means "as the next level up":
 * project → nearest group up the chain with a level of its own → the global setting. With level
 * custom, event flags say which events to mail about besides those the user takes part in.
 */

export const NOTIFICATION_LEVELS: NotificationLevel[] = ['disabled', 'participating', 'watch', 'global', 'mention', 'custom'];

/** The custom-level event flags, in GitLab's order (the spec's Events). */
export const NOTIFICATION_EVENTS = [
  'new_note',
  'new_issue',
  'reopen_issue',
  'close_issue',
  'reassign_issue',
  'issue_due',
  'new_merge_request',
  'push_to_merge_request',
  'reopen_merge_request',
  'close_merge_request',
  'reassign_merge_request',
  'merge_merge_request',
  'failed_pipeline',
  'fixed_pipeline',
  'success_pipeline',
  'moved_project',
  'merge_when_pipeline_succeeds',
  'new_epic',
] as const;
export type NotificationEvent = (typeof NOTIFICATION_EVENTS)[number];

/** Flags that read true until set otherwise: failures and fixes are more like mentions (GitLab's model). */
const ON_UNLESS_SET = new Set<string>(['failed_pipeline', 'fixed_pipeline']);

/** What a setting row says, or its default when the user has none at that source. */
export interface NotificationSetting {
  level: NotificationLevel;
  events: Record<string, boolean>;
  notification_email?: string | null;
}

export function eventEnabled(setting: Pick<NotificationSetting, 'events'>, event: string): boolean {
  const v = setting.events[event];
  return v === undefined ? ON_UNLESS_SET.has(event) : v;
}

/** Every flag with its value, as GitLab's entity lists them under `events`. */
export function eventFlags(setting: Pick<NotificationSetting, 'events'>): Record<NotificationEvent, boolean> {
  return Object.fromEntries(NOTIFICATION_EVENTS.map((e) => [e, eventEnabled(setting, e)])) as Record<NotificationEvent, boolean>;
}

export interface NotificationSource {
  type: NotificationSourceType;
  id: number;
}
export const GLOBAL_SOURCE: NotificationSource = { type: 'Global', id: 0 };

/** GitLab's defaults: participating globally, global (inherit) on groups and projects. */
function defaultSetting(source: NotificationSource): NotificationSetting {
  return { level: source.type === 'Global' ? 'participating' : 'global', events: {}, notification_email: null };
}

function fromRow(row: NotificationSettingRow): NotificationSetting {
  return { level: row.level, events: row.events ?? {}, notification_email: row.notification_email };
}

export async function getNotificationSetting(db: Database, userId: number, source: NotificationSource): Promise<NotificationSetting> {
  const row = await db
    .selectFrom('notification_settings')
    .selectAll()
    .where('user_id', '=', userId)
    .where('source_type', '=', source.type)
    .where('source_id', '=', source.id)
    .executeTakeFirst();
  return row ? fromRow(row) : defaultSetting(source);
}

/** The address a user's notifications go to: the chosen notification e-mail while it is still one of theirs, else the primary. */
export async function notificationEmailOf(db: Database, user: Pick<User, 'email'>, chosen: string | null | undefined): Promise<string> {
  if (chosen && (await verifiedEmailsOf(db, user)).includes(chosen.toLowerCase())) return chosen;
  return user.email;
}

export interface NotificationSettingUpdate {
  level?: string;
  notification_email?: string;
  events: Partial<Record<NotificationEvent, boolean>>;
}

/**
 * PUT: level (400 "'x' is not a valid level" otherwise, GitLab's enum error), the event flags
 * given, and on the global setting the notification e-mail, which must be one of the user's
 * verified addresses (400 {"message": {"notification_email": [...]}}); blank resets it to the primary.
 */
export async function updateNotificationSetting(db: Database, user: User, source: NotificationSource, update: NotificationSettingUpdate): Promise<NotificationSetting> {
  if (update.level !== undefined && !(NOTIFICATION_LEVELS as string[]).includes(update.level)) {
    throw new ApiError(400, { message: `'${update.level}' is not a valid level` });
  }
  let email: string | null | undefined;
  if (source.type === 'Global' && update.notification_email !== undefined) {
    const given = update.notification_email.trim();
    if (!given) email = null;
    else if (!(await verifiedEmailsOf(db, user)).includes(given.toLowerCase())) {
      throw new ApiError(400, { message: { notification_email: ['must be an email you have verified'] } });
    } else email = given;
  }
  const current = await getNotificationSetting(db, user.id, source);
  const level = (update.level as NotificationLevel | undefined) ?? current.level;
  const flags = Object.fromEntries(Object.entries(update.events).filter(([, v]) => typeof v === 'boolean'));
  const row = await db
    .insertInto('notification_settings')
    .values({
      user_id: user.id,
      source_type: source.type,
      source_id: source.id,
      level,
      events: JSON.stringify({ ...current.events, ...flags }) as any,
      notification_email: email === undefined ? (current.notification_email ?? null) : email,
    })
    .onConflict((oc) =>
      oc.columns(['user_id', 'source_type', 'source_id']).doUpdateSet({
        level,
        // Merged in SQL so that two updates of different flags at once both hold.
        events: sql`notification_settings.events || ${JSON.stringify(flags)}::jsonb`,
        ...(email === undefined ? {} : { notification_email: email }),
        updated_at: sql`now()`,
      }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
  return fromRow(row);
}

/** A user's effective setting where a thing lives: project, then the groups up its chain (nearest first), then global. */
export interface EffectiveSetting extends NotificationSetting {
  /** The chosen notification e-mail (global row), if any. */
  chosenEmail: string | null;
}

/**
 * Effective settings of many users at once, for a project (its id, and its group chain) or a
 * group (chain only). `groupChain` is traversal_ids, root first. One statement.
 */
export async function effectiveSettings(db: Database, userIds: number[], where: { projectId: number | null; groupChain: number[] }): Promise<Map<number, EffectiveSetting>> {
  const out = new Map<number, EffectiveSetting>();
  if (!userIds.length) return out;
  const rows = await db
    .selectFrom('notification_settings')
    .selectAll()
    .where('user_id', 'in', userIds)
    .where((eb) =>
      eb.or([
        eb('source_type', '=', 'Global'),
        ...(where.projectId !== null ? [eb.and([eb('source_type', '=', 'Project'), eb('source_id', '=', where.projectId)])] : []),
        ...(where.groupChain.length ? [eb.and([eb('source_type', '=', 'Namespace'), eb('source_id', 'in', where.groupChain)])] : []),
      ]),
    )
    .execute();
  const byUser = new Map<number, NotificationSettingRow[]>();
  for (const r of rows) (byUser.get(r.user_id) ?? byUser.set(r.user_id, []).get(r.user_id)!).push(r);
  const nearestFirst = [...where.groupChain].reverse();
  for (const userId of userIds) {
    const mine = byUser.get(userId) ?? [];
    const globalRow = mine.find((r) => r.source_type === 'Global');
    const chosenEmail = globalRow?.notification_email ?? null;
    const project = mine.find((r) => r.source_type === 'Project');
    let chosen: NotificationSetting | undefined = project && project.level !== 'global' ? fromRow(project) : undefined;
    for (const gid of nearestFirst) {
      if (chosen) break;
      const g = mine.find((r) => r.source_type === 'Namespace' && r.source_id === gid);
      if (g && g.level !== 'global') chosen = fromRow(g);
    }
    chosen ??= globalRow ? fromRow(globalRow) : defaultSetting(GLOBAL_SOURCE);
    out.set(userId, { ...chosen, chosenEmail });
  }
  return out;
}
