import type { ErrorEvent, ErrorTrackingClientKey, ErrorTrackingSetting, TrackedError } from '../db/schema/error_tracking.js';

const iso = (d: Date | string) => new Date(d).toISOString();

/** Settings as GitLab shows them; the integrated tracker has no external Sentry project (null fields). */
export function presentErrorTrackingSetting(s: ErrorTrackingSetting) {
  return { active: s.active, project_name: null, sentry_external_url: null, api_url: null, integrated: s.integrated };
}

/** GitLab's DSN: `<scheme>://<public_key>@<host>[<relative root>]/api/v4/error_tracking/collector/<project id>`. */
export function sentryDsn(externalUrl: string, publicKey: string, projectId: number): string {
  const url = new URL(externalUrl);
  const root = url.pathname.replace(/\/+$/, '');
  return `${url.protocol}//${encodeURIComponent(publicKey)}@${url.host}${root}/api/v4/error_tracking/collector/${projectId}`;
}

export function presentClientKey(externalUrl: string, k: ErrorTrackingClientKey) {
  return { id: k.id, active: k.active, public_key: k.public_key, sentry_dsn: sentryDsn(externalUrl, k.public_key, k.project_id) };
}

/** An error as GitLab's integrated tracker maps it to Sentry's error shape (to_sentry_error). */
export function presentTrackedError(projectWebUrl: string, e: TrackedError) {
  return {
    id: e.id,
    project_id: e.project_id,
    title: e.description ? `${e.name}: ${e.description}` : e.name,
    type: 'error',
    message: e.description,
    culprit: e.actor,
    platform: e.platform,
    status: e.status,
    count: e.events_count,
    first_seen: iso(e.first_seen_at),
    last_seen: iso(e.last_seen_at),
    external_url: `${projectWebUrl}/-/error_tracking/${e.id}/details`,
  };
}

export function presentErrorEvent(ev: ErrorEvent) {
  return {
    id: Number(ev.id),
    event_id: ev.event_id,
    environment: ev.environment,
    level: ev.level,
    description: ev.description,
    occurred_at: iso(ev.occurred_at),
    payload: ev.payload,
  };
}

export function presentTrackedErrorDetail(projectWebUrl: string, e: TrackedError, latest: ErrorEvent | undefined) {
  return { ...presentTrackedError(projectWebUrl, e), latest_event: latest ? presentErrorEvent(latest) : null };
}
