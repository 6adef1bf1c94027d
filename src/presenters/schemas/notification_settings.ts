import { Type } from 'typebox';
import { NOTIFICATION_EVENTS } from '../../services/notification_settings.js';
import { strict } from './common.js';

/** Response schemas of the notification settings forms (src/presenters/notification_settings.ts). */

const Level = Type.Union(['disabled', 'participating', 'watch', 'global', 'mention', 'custom'].map((l) => Type.Literal(l)));

/** Every custom-level flag, as GitLab's entity lists them under `events` (only when the level is custom). */
export const NotificationEventsSchema = Type.Object(Object.fromEntries(NOTIFICATION_EVENTS.map((e) => [e, Type.Boolean()])), strict);

/** A group's or project's setting: {level}, plus events when custom. */
export const NotificationSettingSchema = Type.Object({ level: Level, events: Type.Optional(NotificationEventsSchema) }, strict);

/** The global setting: also the address notifications go to. */
export const GlobalNotificationSettingSchema = Type.Object(
  { level: Level, notification_email: Type.String(), events: Type.Optional(NotificationEventsSchema) },
  strict,
);
