import { eventFlags, type NotificationSetting } from '../services/notification_settings.js';

/** GitLab's Entities::NotificationSetting: the level, and every event flag when the level is custom. */
export function presentNotificationSetting(s: NotificationSetting) {
  return { level: s.level, ...(s.level === 'custom' ? { events: eventFlags(s) } : {}) };
}

/** GitLab's Entities::GlobalNotificationSetting: also notification_email (the chosen address, or the primary one). */
export function presentGlobalNotificationSetting(s: NotificationSetting, notificationEmail: string) {
  return { level: s.level, ...(s.level === 'custom' ? { events: eventFlags(s) } : {}), notification_email: notificationEmail };
}
