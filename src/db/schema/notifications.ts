import type { ColumnType, Generated, Selectable } from 'kysely';
import type { Timestamp } from './core.js';

type Auto<T> = ColumnType<T, T | undefined, T>;

export type NotificationSourceType = 'Global' | 'Namespace' | 'Project';
export type NotificationLevel = 'disabled' | 'participating' | 'watch' | 'global' | 'mention' | 'custom';

export interface NotificationSettingsTable {
  id: Generated<number>;
  user_id: number;
  source_type: NotificationSourceType;
  source_id: number;
  level: NotificationLevel;
  events: Auto<Record<string, boolean>>;
  notification_email: string | null;
  created_at: Auto<Date>;
  updated_at: Auto<Date>;
}
export type NotificationSettingRow = Selectable<NotificationSettingsTable>;

export interface NotificationDeliveriesTable {
  event_key: string;
  user_id: number;
  created_at: Timestamp;
}

export interface NotificationTables {
  notification_settings: NotificationSettingsTable;
  notification_deliveries: NotificationDeliveriesTable;
}
