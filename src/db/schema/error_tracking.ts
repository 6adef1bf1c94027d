import type { ColumnType, Generated, Selectable } from 'kysely';
import type { Timestamp } from './core.js';

export interface ErrorTrackingSettingsTable {
  project_id: number;
  active: Generated<boolean>;
  integrated: Generated<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type ErrorTrackingSetting = Selectable<ErrorTrackingSettingsTable>;

export interface ErrorTrackingClientKeysTable {
  id: Generated<number>;
  project_id: number;
  active: Generated<boolean>;
  /** Public by design in Sentry's protocol (it is part of the DSN); unique, looked up on every event. */
  public_key: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type ErrorTrackingClientKey = Selectable<ErrorTrackingClientKeysTable>;

export type ErrorStatus = 'unresolved' | 'resolved' | 'ignored';

export interface ErrorTrackingErrorsTable {
  id: Generated<number>;
  project_id: number;
  fingerprint: string;
  name: string;
  description: string;
  actor: string;
  platform: string | null;
  status: ColumnType<ErrorStatus, ErrorStatus | undefined, ErrorStatus>;
  events_count: Generated<number>;
  first_seen_at: Timestamp;
  last_seen_at: Timestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type TrackedError = Selectable<ErrorTrackingErrorsTable>;

export interface ErrorTrackingErrorEventsTable {
  id: ColumnType<string, never, never>;
  error_id: number;
  event_id: string | null;
  description: string | null;
  environment: string | null;
  level: string | null;
  occurred_at: Timestamp;
  payload: ColumnType<Record<string, unknown>, string, string>;
  created_at: Timestamp;
}
export type ErrorEvent = Selectable<ErrorTrackingErrorEventsTable>;

export interface ErrorTrackingTables {
  error_tracking_settings: ErrorTrackingSettingsTable;
  error_tracking_client_keys: ErrorTrackingClientKeysTable;
  error_tracking_errors: ErrorTrackingErrorsTable;
  error_tracking_error_events: ErrorTrackingErrorEventsTable;
}
