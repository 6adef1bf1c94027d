import type { WebHook, WebHookLog } from '../db/schema/webhooks.js';
import { HOOK_EVENT_FLAGS } from '../db/schema/webhooks.js';
import { iso } from './users.js';

/** GitLab's alert_status: permanently disabled after 40 failures in a row, for a while after 4. */
export const PERMANENT_FAILURE_THRESHOLD = 40;
export const TEMPORARY_FAILURE_THRESHOLD = 4;

export function hookAlertStatus(hook: Pick<WebHook, 'recent_failures' | 'disabled_until'>, now = new Date()): 'executable' | 'temporarily_disabled' | 'disabled' {
  if (hook.recent_failures >= PERMANENT_FAILURE_THRESHOLD) return 'disabled';
  if (hook.disabled_until && new Date(hook.disabled_until) > now) return 'temporarily_disabled';
  return 'executable';
}

/** The project hook form. `keys` are the names (never the values) of its URL variables and custom headers. */
export function presentProjectHook(hook: WebHook, keys: { urlVariables: string[]; customHeaders: string[] }) {
  const flags = Object.fromEntries(HOOK_EVENT_FLAGS.filter((f) => f !== 'member_events').map((f) => [f, hook[f]])) as Record<string, boolean>;
  const status = hookAlertStatus(hook);
  return {
    id: hook.id,
    url: hook.url,
    name: hook.name,
    description: hook.description,
    created_at: iso(hook.created_at)!,
    project_id: hook.project_id!,
    ...flags,
    push_events_branch_filter: hook.push_events_branch_filter,
    branch_filter_strategy: hook.branch_filter_strategy,
    enable_ssl_verification: hook.enable_ssl_verification,
    alert_status: status,
    disabled_until: status === 'temporarily_disabled' ? iso(hook.disabled_until) : null,
    url_variables: keys.urlVariables.map((key) => ({ key })),
    custom_headers: keys.customHeaders.map((key) => ({ key })),
  };
}

export function presentHookLog(log: WebHookLog) {
  return {
    id: Number(log.id),
    url: log.url,
    trigger: log.trigger,
    request_headers: log.request_headers,
    request_data: log.request_data,
    response_headers: log.response_headers,
    response_body: log.response_body,
    execution_duration: Number(log.execution_duration),
    response_status: log.response_status,
    internal_error_message: log.internal_error_message,
    created_at: iso(log.created_at)!,
  };
}
