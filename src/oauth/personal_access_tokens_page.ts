import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type } from 'typebox';
import { NoContent, RawBody, route } from '../api/route.js';
import type { PersonalAccessToken, User } from '../db/schema/core.js';
import {
  dateAfterDays,
  expiryDateError,
  insertPersonalAccessToken,
  MAX_TOKEN_LIFETIME_DAYS,
  PAT_SCOPES,
  revokeToken,
  tokenValidationErrors,
} from '../services/tokens.js';
import { errorPage, esc, layout, PAGE_CSP } from './html.js';
import { ASSETS } from '../web/layout.js';
import { sendPage, signInRedirect } from './routes.js';
import { csrfValid, loadSession, type LoadedSession } from './sessions.js';
import { parseScopes } from './scopes.js';

export const PERSONAL_ACCESS_TOKENS_PATH = '/-/user_settings/personal_access_tokens';

/** What each scope allows, in the words of GitLab's token page. */
const SCOPE_DESCRIPTIONS: Record<string, string> = {
  api: 'Grants complete read and write access to the API, including all groups and projects.',
  read_api: 'Grants read access to the API, including all groups and projects.',
  read_user: 'Grants read-only access to your profile through the /user API endpoint.',
  create_runner: 'Grants create access to the runners.',
  manage_runner: 'Grants access to manage the runners.',
  k8s_proxy: 'Grants permission to perform Kubernetes API calls using the agent for Kubernetes.',
  read_repository: 'Grants read-only access to repositories on private projects using Git-over-HTTP or the Repository Files API.',
  write_repository: 'Grants read-write access to repositories on private projects using Git-over-HTTP (not using the API).',
  read_registry: 'Grants read-only access to container registry images on private projects.',
  write_registry: 'Grants write access to container registry images on private projects.',
  sudo: 'Grants permission to perform API actions as any user in the system, when authenticated as an admin user.',
  admin_mode: 'Grants permission to perform API actions as an administrator, when Admin Mode is enabled.',
  read_service_ping: 'Grants access to download Service Ping payload via API when authenticated as an admin user.',
  ai_features: 'Grants access to AI features.',
  self_rotate: 'Grants permission to rotate this token using the personal access token API.',
};

/** Scopes only administrators may give their tokens (GitLab shows them to administrators only). */
const ADMIN_SCOPES = new Set(['sudo', 'admin_mode', 'read_service_ping']);

/**
 * The scopes the page offers: those Cairn honours. The API still accepts GitLab's others
 * (k8s_proxy, the registry's, ai_features...) for clients that ask for them, but a person
 * choosing here would get a scope that opens nothing.
 */
const HONOURED_SCOPES = new Set(['api', 'read_api', 'read_user', 'read_repository', 'write_repository', 'self_rotate', 'sudo', 'admin_mode']);

export function scopesFor(user: User): string[] {
  return PAT_SCOPES.filter((s) => HONOURED_SCOPES.has(s) && (user.admin || !ADMIN_SCOPES.has(s)));
}

const CSRF = Type.Optional(Type.String());
const CreateBody = Type.Object({
  name: Type.Optional(Type.String()),
  expires_at: Type.Optional(Type.String()),
  /** `scopes[]=api&scopes[]=read_user` from the checkboxes. */
  scopes: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
  authenticity_token: CSRF,
});
const TokenParams = Type.Object({ id: Type.String() });
const Html = RawBody('text/html');
const ownAuth = { skipApiAuth: true };

const hidden = (name: string, value: unknown) => `<input type="hidden" name="${esc(name)}" value="${esc(value)}">`;
const day = (value: Date | string | null) => (value === null ? null : (typeof value === 'string' ? value : value.toISOString()).slice(0, 10));
const timeTag = (value: Date | string | null, never: string) => {
  const d = day(value);
  return d ? `<time datetime="${esc(typeof value === 'string' ? value : (value as Date).toISOString())}">${esc(d)}</time>` : `<span class="muted">${esc(never)}</span>`;
};

export interface TokensPageOptions {
  user: User;
  csrfToken: string;
  tokens: PersonalAccessToken[];
  created?: { row: PersonalAccessToken; token: string };
  errors?: string[];
  notice?: string;
  form?: { name?: string; expires_at?: string; scopes?: string[] };
}

export function personalAccessTokensPage(opts: TokensPageOptions): string {
  const created = opts.created
    ? `<div class="alert notice" role="status">
<p><strong>Your new personal access token ${esc(opts.created.row.name)} has been created.</strong> Copy it now: it is shown only this once.</p>
<label for="created-token">Your new personal access token</label>
<input type="text" id="created-token" readonly value="${esc(opts.created.token)}" class="mono">
<button type="button" class="secondary" data-copy="created-token">Copy token</button>
<script src="${ASSETS.script.path}" defer></script>
</div>`
    : '';
  const notice = opts.notice ? `<div class="alert notice" role="status">${esc(opts.notice)}</div>` : '';
  const errors = opts.errors?.length
    ? `<div class="alert error" role="alert"><p><strong>The token could not be created:</strong></p><ul>${opts.errors.map((e) => `<li>${esc(e)}</li>`).join('')}</ul></div>`
    : '';
  const rows = opts.tokens.length
    ? `<table aria-labelledby="active-heading">
<thead><tr><th scope="col">Token name</th><th scope="col">Scopes</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>
${opts.tokens
  .map(
    (t) => `<tr data-token-id="${t.id}">
<td>${esc(t.name)}</td>
<td>${t.scopes.map((s) => `<code>${esc(s)}</code>`).join(' ')}</td>
<td>${timeTag(t.created_at, '')}</td>
<td>${timeTag(t.last_used_at, 'Never')}</td>
<td>${timeTag(t.expires_at, 'Never')}</td>
<td><form method="post" action="${PERSONAL_ACCESS_TOKENS_PATH}/${t.id}/revoke">${hidden('authenticity_token', opts.csrfToken)}<button type="submit" class="danger" aria-label="Revoke ${esc(t.name)}">Revoke</button></form></td>
</tr>`,
  )
  .join('\n')}
</tbody>
</table>`
    : '<p class="muted">This user has no active personal access tokens.</p>';
  const form = opts.form ?? {};
  const chosen = new Set(form.scopes ?? []);
  const scopeBoxes = scopesFor(opts.user)
    .map(
      (s) =>
        `<label class="check"><input type="checkbox" name="scopes[]" value="${esc(s)}"${chosen.has(s) ? ' checked' : ''}><span><code>${esc(s)}</code><small>${esc(SCOPE_DESCRIPTIONS[s] ?? s)}</small></span></label>`,
    )
    .join('\n');
  const min = dateAfterDays(1);
  const max = dateAfterDays(MAX_TOKEN_LIFETIME_DAYS);
  return layout(
    { title: 'Personal access tokens', user: opts.user, csrfToken: opts.csrfToken, wide: true },
    `<h1>Personal access tokens</h1>
<p class="muted">You can generate a personal access token for each application you use that needs access to the Cairn API. You can also use personal access tokens to authenticate against Git over HTTP. They are the only accepted password when you have Two-Factor Authentication (2FA) enabled.</p>
${created}${notice}
<h2 id="active-heading">Active personal access tokens (${opts.tokens.length})</h2>
${rows}
<h2>Add a personal access token</h2>
<div class="card">
${errors}<form method="post" action="${PERSONAL_ACCESS_TOKENS_PATH}">
${hidden('authenticity_token', opts.csrfToken)}
<label for="token_name">Token name</label>
<input type="text" id="token_name" name="name" required maxlength="255" value="${esc(form.name ?? '')}" aria-describedby="name_help">
<p class="muted" id="name_help">For example, the application using the token or the purpose of the token.</p>
<label for="token_expires_at">Expiration date</label>
<input type="date" id="token_expires_at" name="expires_at" min="${min}" max="${max}" value="${esc(form.expires_at ?? dateAfterDays(30))}" aria-describedby="expiry_help">
<p class="muted" id="expiry_help">At most ${MAX_TOKEN_LIFETIME_DAYS} days from today; left empty, the token expires on ${max}.</p>
<fieldset><legend>Select scopes</legend>
<p class="muted">Scopes set the permission levels granted to the token.</p>
${scopeBoxes}
</fieldset>
<button type="submit">Create token</button>
</form>
</div>`,
  );
}

/** The user's active tokens (not revoked, not expired, not impersonation tokens), newest first. */
async function activeTokens(cairn: FastifyInstance['cairn'], userId: number): Promise<PersonalAccessToken[]> {
  return cairn.db
    .selectFrom('personal_access_tokens')
    .selectAll()
    .where('user_id', '=', userId)
    .where('impersonation', '=', false)
    .where('revoked', '=', false)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<string>`current_date`)]))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
}

/**
 * The signed-in user's personal access tokens page, as GitLab's /-/user_settings/personal_access_tokens:
 * the active tokens (revoke each), and a form to create one (name, expiry, scopes) whose token is
 * shown once, on the answer to the form. Session cookie and per-session CSRF token as the
 * applications page; anonymous visitors are sent to sign in.
 */
export async function personalAccessTokenPages(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const base = PERSONAL_ACCESS_TOKENS_PATH;

  const render = async (reply: FastifyReply, status: number, loaded: LoadedSession, extra: Partial<TokensPageOptions> = {}) => {
    const html = personalAccessTokensPage({ user: loaded.user!, csrfToken: loaded.session.csrf_token, tokens: await activeTokens(cairn, loaded.user!.id), ...extra });
    // The copy button's script: the site's own, nothing inline.
    return sendPage(reply, status, html, extra.created ? { 'content-security-policy': `${PAGE_CSP}; script-src 'self'` } : {});
  };
  const staleForm = (reply: FastifyReply, loaded: LoadedSession) =>
    sendPage(reply, 422, errorPage({
      title: 'The change you requested was rejected',
      description: 'The form was stale or did not come from this site. Go back, reload the page and try again.',
      user: loaded.user,
      csrfToken: loaded.session.csrf_token,
    }));

  const own = "the session cookie: the signed-in user's own tokens (anonymous visitors are sent to sign in)";
  app.get(base, route({ matrix: { own: 'ok' },
    access: { custom: own },
    config: ownAuth,
    schema: { querystring: Type.Object({ revoked: Type.Optional(Type.String()) }), response: { 200: Html, 302: NoContent } },
  }), async (request, reply) => {
    const loaded = await loadSession(cairn, request);
    if (!loaded?.user) return signInRedirect(reply, base);
    const revoked = request.query.revoked ? 'The personal access token was revoked.' : undefined;
    return render(reply, 200, loaded, { notice: revoked });
  });

  app.post(base, route({ matrix: { own: 'ok' },
    access: { custom: `${own}, with the CSRF token of the session` },
    config: ownAuth,
    schema: { body: CreateBody, response: { 201: Html, 302: NoContent } },
  }), async (request, reply) => {
    const loaded = await loadSession(cairn, request);
    if (!loaded?.user) return signInRedirect(reply, base);
    const body = request.body;
    if (!csrfValid(loaded.session, body.authenticity_token)) return staleForm(reply, loaded);
    const user = loaded.user;
    const name = (body.name ?? '').trim();
    const scopes = parseScopes(body.scopes);
    const expiresInput = (body.expires_at ?? '').trim();
    const errors: string[] = [];
    if (!name) errors.push("Name can't be blank");
    else if (name.length > 255) errors.push('Name is too long (maximum is 255 characters)');
    if (!scopes.length) errors.push('Select at least one scope');
    const refused = scopes.filter((s) => !scopesFor(user).includes(s));
    if (refused.length) errors.push(`Scopes can only contain available scopes (not ${refused.join(', ')})`);
    const expiresAt = expiresInput || dateAfterDays(MAX_TOKEN_LIFETIME_DAYS);
    const dateProblem = expiresInput ? expiryDateError(expiresInput) : null;
    if (dateProblem) errors.push(dateProblem.charAt(0).toUpperCase() + dateProblem.slice(1));
    if (!errors.length) {
      const model = tokenValidationErrors({ name, scopes, expiresAt });
      for (const [field, messages] of Object.entries(model)) for (const m of messages) errors.push(`${field.charAt(0).toUpperCase()}${field.slice(1).replace(/_/g, ' ')} ${m}`);
    }
    if (errors.length) return render(reply, 400, loaded, { errors, form: { name: body.name, expires_at: expiresInput, scopes } });
    const created = await insertPersonalAccessToken(cairn.db, { userId: user.id, name, scopes, expiresAt });
    return render(reply, 201, loaded, { created });
  });

  const revoke = async (request: FastifyRequest, reply: FastifyReply, id: string, csrfToken: string | undefined) => {
    const loaded = await loadSession(cairn, request);
    if (!loaded?.user) return signInRedirect(reply, base);
    if (!csrfValid(loaded.session, csrfToken ?? request.headers['x-csrf-token'])) return staleForm(reply, loaded);
    const token = /^\d{1,9}$/.test(id)
      ? await cairn.db
          .selectFrom('personal_access_tokens')
          .select(['id', 'revoked'])
          .where('id', '=', Number(id))
          .where('user_id', '=', loaded.user.id)
          .where('impersonation', '=', false)
          .executeTakeFirst()
      : undefined;
    if (!token) {
      return sendPage(reply, 404, errorPage({ title: 'Not found', description: 'No such token among yours.', user: loaded.user, csrfToken: loaded.session.csrf_token }));
    }
    if (!token.revoked) await revokeToken(cairn.db, token.id);
    return reply.redirect(`${base}?revoked=1`, 302);
  };
  const revocation = { custom: `${own}, with the CSRF token of the session (form or X-CSRF-Token)` };
  app.post(`${base}/:id/revoke`, route({ matrix: { own: 'ok' },
    access: revocation,
    config: ownAuth,
    schema: { params: TokenParams, body: Type.Object({ authenticity_token: CSRF }), response: { 302: NoContent } },
  }), async (request, reply) => revoke(request, reply, request.params.id, request.body.authenticity_token));
  // GitLab's own form sends PUT .../:id/revoke; its fields arrive merged into the query (plugins/params.ts).
  app.put(`${base}/:id/revoke`, route({ matrix: { own: 'ok' },
    access: revocation,
    config: ownAuth,
    schema: { params: TokenParams, querystring: Type.Object({ authenticity_token: CSRF }), response: { 302: NoContent } },
  }), async (request, reply) => revoke(request, reply, request.params.id, request.query.authenticity_token));
}
