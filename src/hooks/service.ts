import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import { HOOK_EVENT_FLAGS, type HookEventFlag, type WebHook } from '../db/schema/webhooks.js';
import { encryptSecret } from '../lib/secrets.js';
import { apiError, missingParam, validationFailed } from '../plugins/errors.js';
import { hookSecrets, interpolateUrl, urlPlaceholders } from './delivery.js';
import { checkHookUrl } from './url_blocker.js';

/**
 * Creating and changing hooks, with GitLab's validations: the URL (http or https, and, unless
 * local requests are allowed, not a local address, also after resolving its host), its
 * `{variable}` placeholders against url_variables, the branch filter of its strategy, custom
 * headers. Secrets are encrypted before they are stored.
 */

export type HookInput = Partial<Record<Exclude<HookEventFlag, 'member_events'>, boolean>> & {
  url?: string;
  name?: string;
  description?: string;
  token?: string;
  enable_ssl_verification?: boolean;
  push_events_branch_filter?: string;
  branch_filter_strategy?: string;
  url_variables?: { key: string; value: string }[];
  custom_headers?: { key: string; value: string }[];
};

const STRATEGIES = ['wildcard', 'regex', 'all_branches'] as const;
const VARIABLE_KEY = /^[A-Za-z0-9_]{1,255}$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,255}$/;
/** Headers Cairn sets itself: a custom header may not replace them. */
const RESERVED_HEADERS = new Set(['content-type', 'content-length', 'user-agent', 'host', 'x-gitlab-event', 'x-gitlab-token', 'x-gitlab-instance', 'x-gitlab-event-uuid', 'x-gitlab-webhook-uuid', 'idempotency-key', 'authorization', 'transfer-encoding', 'connection']);

function pairs(list: { key: string; value: string }[] | undefined, what: 'url_variables' | 'custom_headers'): Record<string, string> | undefined {
  if (list === undefined) return undefined;
  if (list.length > (what === 'url_variables' ? 100 : 20)) throw validationFailed({ [what]: [`is too long (maximum is ${what === 'url_variables' ? 100 : 20} entries)`] }, 422);
  const out: Record<string, string> = {};
  for (const { key, value } of list) {
    if (what === 'url_variables' ? !VARIABLE_KEY.test(key) : !HEADER_NAME.test(key) || RESERVED_HEADERS.has(key.toLowerCase())) throw validationFailed({ [what]: [`key "${key.slice(0, 255)}" is invalid`] }, 422);
    if (!value || value.length > 2048 || /[\r\n\0]/.test(value)) throw validationFailed({ [what]: [`value of "${key}" is invalid`] }, 422);
    if (key in out) throw validationFailed({ [what]: [`key "${key}" is given twice`] }, 422);
    out[key] = value;
  }
  return out;
}

export async function saveProjectHook(cairn: Cairn, projectId: number, current: WebHook | null, input: HookInput): Promise<WebHook> {
  if (!current && (input.url === undefined || input.url === '')) throw missingParam('url');
  const url = (input.url ?? current!.url).trim();
  if (!url || url.length > 2048) throw apiError(422, 'Invalid url given');
  const existing = current ? hookSecrets(cairn, current) : { token: null, urlVariables: {}, customHeaders: {} };
  const urlVariables = pairs(input.url_variables, 'url_variables') ?? existing.urlVariables;
  const customHeaders = pairs(input.custom_headers, 'custom_headers') ?? existing.customHeaders;
  const missing = urlPlaceholders(url).filter((k) => !(k in urlVariables));
  if (missing.length) throw apiError(422, 'Invalid url given');
  const blocked = await checkHookUrl(cairn.config, interpolateUrl(url, urlVariables));
  if (blocked) throw apiError(422, 'Invalid url given');

  const strategy = input.branch_filter_strategy ?? current?.branch_filter_strategy ?? 'wildcard';
  if (!(STRATEGIES as readonly string[]).includes(strategy)) throw apiError(400, 'branch_filter_strategy does not have a valid value');
  let filter = input.push_events_branch_filter ?? current?.push_events_branch_filter ?? '';
  if (strategy === 'all_branches') filter = '';
  if (filter.length > 5000) throw apiError(422, 'Invalid branch filter given');
  if (strategy === 'regex' && filter) {
    try {
      new RegExp(filter);
    } catch {
      throw apiError(422, 'Invalid branch filter given');
    }
  }
  if (input.name !== undefined && input.name.length > 255) throw validationFailed({ name: ['is too long (maximum is 255 characters)'] }, 422);
  if (input.description !== undefined && input.description.length > 2048) throw validationFailed({ description: ['is too long (maximum is 2048 characters)'] }, 422);
  if (input.token !== undefined && input.token.length > 2048) throw validationFailed({ token: ['is too long (maximum is 2048 characters)'] }, 422);

  const flags: Partial<Record<HookEventFlag, boolean>> = {};
  for (const f of HOOK_EVENT_FLAGS) if (f !== 'member_events' && input[f] !== undefined) flags[f] = input[f];
  const values = {
    url,
    ...(input.name !== undefined ? { name: input.name } : {}),
    ...(input.description !== undefined ? { description: input.description } : {}),
    ...(input.token !== undefined ? { token_encrypted: input.token ? encryptSecret(cairn.config, input.token) : null } : {}),
    ...(input.enable_ssl_verification !== undefined ? { enable_ssl_verification: input.enable_ssl_verification } : {}),
    push_events_branch_filter: filter,
    branch_filter_strategy: strategy as WebHook['branch_filter_strategy'],
    url_variables_encrypted: Object.keys(urlVariables).length ? encryptSecret(cairn.config, JSON.stringify(urlVariables)) : null,
    custom_headers_encrypted: Object.keys(customHeaders).length ? encryptSecret(cairn.config, JSON.stringify(customHeaders)) : null,
    ...flags,
  };
  if (!current) {
    return cairn.db.insertInto('web_hooks').values({ type: 'ProjectHook', project_id: projectId, ...values }).returningAll().executeTakeFirstOrThrow();
  }
  return cairn.db
    .updateTable('web_hooks')
    .set({ ...values, updated_at: sql`now()` as any })
    .where('id', '=', current.id)
    .returningAll()
    .executeTakeFirstOrThrow();
}
