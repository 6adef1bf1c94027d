import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type } from 'typebox';
import { NoContent, RawBody, route } from '../api/route.js';
import {
  OAuthRevokeSchema,
  OAuthServerMetadataSchema,
  OAuthTokenInfoSchema,
  OAuthTokenSchema,
  OAuthUserinfoSchema,
} from '../presenters/schemas/oauth.js';
import type { User } from '../db/schema/core.js';
import { ApiError } from '../plugins/errors.js';
import { allParams } from '../plugins/params.js';
import { extractToken } from '../plugins/auth.js';
import { deleteApplication, insertApplication, listUserApplications, validateApplication } from './applications.js';
import { applicationsPage, authorizePage, errorPage, PAGE_HEADERS, signInPage, type ApplicationsPageOptions } from './html.js';
import {
  ACCOUNT_LOCKED,
  ACCOUNT_THROTTLED,
  ADDRESS_BANNED,
  TOO_MANY_TOKEN_REQUESTS,
  approveAuthorization,
  AuthorizationPageError,
  AuthorizationRedirectError,
  checkLogin,
  denyRedirect,
  errorRedirect,
  exchangeToken,
  revokeToken,
  userMaySignIn,
  validateAuthorizationRequest,
  type AuthorizationRequest,
} from './provider.js';
import { OAUTH_SCOPES, parseScopes } from './scopes.js';
import { createSession, csrfValid, destroySession, ensureSession, loadSession, safeReturnPath, type LoadedSession } from './sessions.js';
import { epochSeconds, findAccessToken, oauthAccessTokenResolver, secondsLeft, tokenState } from './tokens.js';
import { personalAccessTokenPages } from './personal_access_tokens_page.js';
import { oauthTokenThrottle, signInAddressThrottle } from '../services/auth_failures.js';
import { findUserById } from '../finders/users.js';

/** Where sign-in leads without a redirect_to: the home page (the signed-in user's dashboard). */
const HOME = '/';
const APPLICATION_PATHS = ['/-/user_settings/applications', '/oauth/applications'];
/** Pages and OAuth endpoints authenticate on their own (session cookie, client credentials, the bearer token itself). */
const ownAuth = { skipApiAuth: true };
const Html = RawBody('text/html');

/*
 * Input schemas: the forms of the pages declare theirs. Where the parameters are an OAuth request
 * (/oauth/authorize, /oauth/token, /oauth/revoke), provider.ts reads them itself (a parameter is
 * one non-blank string; an array or object counts as absent) and every problem is an RFC 6749
 * answer: `{"error","error_description"}` at the token endpoints, the error page or a redirect
 * back to the client at /oauth/authorize, in the order RFC 6749 4.1.2.1 prescribes. A schema
 * would refuse some of them first with Grape's 400, which OAuth clients do not understand, so
 * those routes declare none and keep allParams().
 */
const CSRF = Type.Optional(Type.String());
const SignInBody = Type.Object({
  user: Type.Optional(Type.Object({ login: Type.Optional(Type.String()), password: Type.Optional(Type.String()) })),
  login: Type.Optional(Type.String()),
  password: Type.Optional(Type.String()),
  redirect_to: Type.Optional(Type.String()),
  authenticity_token: CSRF,
});
const ApplicationBody = Type.Object({
  name: Type.Optional(Type.String()),
  redirect_uri: Type.Optional(Type.String()),
  /** `scopes[]=a&scopes[]=b` from the form's checkboxes, or one space- or comma-separated string. */
  scopes: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
  confidential: Type.Optional(Type.Boolean()),
  authenticity_token: CSRF,
});
/** `:id` stays a string: anything but an id of one's own application is the page's 404. */
const ApplicationParams = Type.Object({ id: Type.String() });

export function sendPage(reply: FastifyReply, status: number, html: string, headers: Record<string, string> = {}) {
  return reply
    .code(status)
    .headers({
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      ...PAGE_HEADERS,
      ...headers,
    })
    .send(html);
}

export function signInRedirect(reply: FastifyReply, returnTo: string) {
  return reply.redirect(`/users/sign_in?redirect_to=${encodeURIComponent(returnTo)}`, 302);
}

/** Token endpoints are called from browsers by single-page apps (PKCE), so they answer CORS. */
async function cors(_request: FastifyRequest, reply: FastifyReply) {
  reply.header('access-control-allow-origin', '*');
}

function queryString(params: Record<string, string | undefined>): string {
  return new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined) as [string, string][]).toString();
}

function authorizeFields(req: AuthorizationRequest) {
  return {
    client_id: req.app.uid,
    redirect_uri: req.redirectUri,
    response_type: req.responseType,
    state: req.state,
    scope: req.scopes.join(' '),
    code_challenge: req.codeChallenge,
    code_challenge_method: req.codeChallenge ? req.codeChallengeMethod : undefined,
  };
}

export default async function oauthRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  // OAuth access tokens authenticate the API (Authorization: Bearer, access_token) and git over HTTP.
  if (!cairn.tokenResolvers.includes(oauthAccessTokenResolver)) cairn.tokenResolvers.push(oauthAccessTokenResolver);

  const staleForm = (reply: FastifyReply, loaded: LoadedSession | null) =>
    sendPage(reply, 422, errorPage({
      title: 'The change you requested was rejected',
      description: 'The form was stale or did not come from this site. Go back, reload the page and try again.',
      user: loaded?.user,
      csrfToken: loaded?.session.csrf_token,
    }));

  // ------------------------------------------------------------ sign in / out

  app.get('/users/sign_in', route({ matrix: 'public',
    access: { public: true },
    config: ownAuth,
    schema: { querystring: Type.Object({ redirect_to: Type.Optional(Type.String()) }), response: { 200: Html, 302: NoContent } },
  }), async (request, reply) => {
    const returnTo = safeReturnPath(request.query.redirect_to, HOME);
    const loaded = await ensureSession(cairn, request, reply);
    if (loaded.user) return reply.redirect(returnTo, 302);
    return sendPage(reply, 200, signInPage({ csrfToken: loaded.session.csrf_token, returnTo }));
  });

  app.post('/users/sign_in', route({ matrix: { own: 'ok' },
    access: { custom: 'the login and password of the form, with the CSRF token of the session cookie' },
    config: ownAuth,
    schema: { body: SignInBody, response: { 302: NoContent } },
  }), async (request, reply) => {
    // GitLab's protected paths: every POST counts against the address, whatever its outcome.
    const wait = await signInAddressThrottle(cairn, request.ip);
    if (wait) {
      return reply.code(429).headers({ 'retry-after': String(wait), 'cache-control': 'no-store' }).type('text/plain; charset=utf-8').send('Retry later\n');
    }
    const params = request.body;
    const returnTo = safeReturnPath(params.redirect_to, HOME);
    const login = params.user?.login ?? params.login ?? '';
    const password = params.user?.password ?? params.password ?? '';
    const loaded = await loadSession(cairn, request);
    if (!loaded || !csrfValid(loaded.session, params.authenticity_token)) {
      const fresh = loaded ?? { session: await createSession(cairn, request, reply, null), user: null };
      return sendPage(reply, 422, signInPage({
        csrfToken: fresh.session.csrf_token,
        returnTo,
        login,
        error: 'Your session expired or the form did not come from this site. Please sign in again.',
      }));
    }
    const again = (status: number, error: string) => sendPage(reply, status, signInPage({ csrfToken: loaded.session.csrf_token, returnTo, login, error }));
    const result = login && password ? await checkLogin(cairn, request.ip, login, password) : null;
    if (result?.failure === 'banned' || result?.failure === 'throttled') {
      reply.header('retry-after', String(result.retryAfter));
      return again(429, result.failure === 'banned' ? ADDRESS_BANNED : ACCOUNT_THROTTLED);
    }
    if (result?.failure === 'locked') return again(401, ACCOUNT_LOCKED);
    const user = result?.user;
    // One message for an unknown login and a wrong password, so the form does not reveal who has an account.
    if (!user) return again(401, 'Invalid login or password.');
    if (!userMaySignIn(user)) {
      return again(403, user.state === 'deactivated'
        ? 'Your account has been deactivated. Contact an administrator of this Cairn instance.'
        : 'Your account is blocked. Contact an administrator of this Cairn instance if you think this is an error.');
    }
    if (user.two_factor_enabled) return again(403, 'This account uses two-factor authentication, which this sign-in page does not support.');

    // A fresh session id on sign-in, so an id planted before sign-in is worthless (session fixation).
    await cairn.db.deleteFrom('sessions').where('id', '=', loaded.session.id).execute();
    await createSession(cairn, request, reply, user.id);
    await cairn.db
      .updateTable('users')
      .set({
        last_sign_in_at: sql`current_sign_in_at` as any,
        last_sign_in_ip: sql`current_sign_in_ip` as any,
        current_sign_in_at: sql`now()` as any,
        current_sign_in_ip: request.ip ?? null,
        sign_in_count: sql`sign_in_count + 1` as any,
      })
      .where('id', '=', user.id)
      .execute();
    return reply.redirect(returnTo, 302);
  });

  app.get('/users/sign_out', route({ matrix: { own: 'ok' },
    access: { custom: 'the session cookie, ended if there is one' },
    config: ownAuth,
    schema: { response: { 302: NoContent } },
  }), async (request, reply) => {
    const loaded = await loadSession(cairn, request);
    await destroySession(cairn, reply, loaded?.session ?? null);
    return reply.redirect('/users/sign_in', 302);
  });

  app.post('/users/sign_out', route({ matrix: { own: 'ok' },
    access: { custom: 'the session cookie and its CSRF token' },
    config: ownAuth,
    schema: { body: Type.Object({ authenticity_token: CSRF }), response: { 302: NoContent } },
  }), async (request, reply) => {
    const loaded = await loadSession(cairn, request);
    if (loaded && !csrfValid(loaded.session, request.body.authenticity_token)) return staleForm(reply, loaded);
    await destroySession(cairn, reply, loaded?.session ?? null);
    return reply.redirect('/users/sign_in', 302);
  });

  // ------------------------------------------------------------ authorization (consent)

  async function withAuthorizationRequest(
    reply: FastifyReply,
    loaded: LoadedSession,
    params: Record<string, unknown>,
    then: (req: AuthorizationRequest) => Promise<unknown>,
  ) {
    let req: AuthorizationRequest;
    try {
      req = await validateAuthorizationRequest(cairn, params);
    } catch (err) {
      if (err instanceof AuthorizationPageError) {
        // Never redirect to an unverified URI: the error is shown here.
        return sendPage(reply, 400, errorPage({ title: 'An error has occurred', error: err.error, description: err.description, user: loaded.user, csrfToken: loaded.session.csrf_token }));
      }
      if (err instanceof AuthorizationRedirectError) return reply.redirect(errorRedirect(err), 302);
      throw err;
    }
    return then(req);
  }

  const consent = "the session cookie (anonymous visitors are sent to sign in) and the client's request against its registered application";
  app.get('/oauth/authorize', route({ matrix: { own: 'ok' },
    access: { custom: consent },
    config: ownAuth,
    schema: { response: { 200: Html, 302: NoContent } },
  }), async (request, reply) => {
    const loaded = await loadSession(cairn, request);
    if (!loaded?.user) return signInRedirect(reply, request.url);
    const user = loaded.user;
    return withAuthorizationRequest(reply, loaded, request.query as Record<string, unknown>, async (req) => {
      const owner = req.app.owner_id
        ? await cairn.db.selectFrom('users').select(['name', 'username']).where('id', '=', req.app.owner_id).executeTakeFirst()
        : undefined;
      return sendPage(reply, 200, authorizePage({
        user,
        csrfToken: loaded.session.csrf_token,
        app: req.app,
        ownerName: owner ? `${owner.name} (@${owner.username})` : null,
        scopes: req.scopes,
        fields: authorizeFields(req),
      }));
    });
  });

  async function decide(request: FastifyRequest, reply: FastifyReply, deny: boolean) {
    const params = allParams(request);
    const loaded = await loadSession(cairn, request);
    if (!loaded?.user) {
      const fields = ['client_id', 'redirect_uri', 'response_type', 'state', 'scope', 'code_challenge', 'code_challenge_method'];
      const q = Object.fromEntries(fields.map((f) => [f, typeof params[f] === 'string' ? (params[f] as string) : undefined]));
      return signInRedirect(reply, `/oauth/authorize?${queryString(q)}`);
    }
    if (!csrfValid(loaded.session, params.authenticity_token ?? request.headers['x-csrf-token'])) return staleForm(reply, loaded);
    const user = loaded.user as User;
    return withAuthorizationRequest(reply, loaded, params, async (req) => {
      const target = deny ? denyRedirect(req) : await approveAuthorization(cairn, req, user);
      return reply.redirect(target, 302);
    });
  }

  const decision = route({ matrix: { own: 'ok' },
    access: { custom: `${consent}, with the CSRF token of the session` },
    config: ownAuth,
    schema: { response: { 302: NoContent } },
  });
  app.post('/oauth/authorize', decision, async (request, reply) => {
    const method = allParams(request)._method;
    return decide(request, reply, typeof method === 'string' && method.toLowerCase() === 'delete');
  });
  app.delete('/oauth/authorize', decision, async (request, reply) => decide(request, reply, true));

  // ------------------------------------------------------------ token endpoints

  /** A token endpoint's declaration; they answer CORS. */
  const api = (spec: Parameters<typeof route>[0]) => ({ ...route({ ...spec, config: ownAuth }), onRequest: cors });
  for (const path of ['/oauth/token', '/oauth/revoke', '/oauth/token/info', '/oauth/userinfo', '/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
    app.options(path, api({ matrix: 'public', access: { public: true }, schema: { response: { 204: NoContent } } }), async (_request, reply) =>
      reply
        .code(204)
        .headers({
          'access-control-allow-methods': 'GET, POST, OPTIONS',
          'access-control-allow-headers': 'Authorization, Content-Type',
          'access-control-max-age': '600',
        })
        .send(),
    );
  }

  async function refuseTooManyTokenRequests(request: FastifyRequest) {
    const wait = await oauthTokenThrottle(cairn, request.ip);
    if (wait) {
      throw new ApiError(429, { error: 'too_many_requests', error_description: TOO_MANY_TOKEN_REQUESTS }, { 'retry-after': String(wait), 'cache-control': 'no-store' });
    }
  }

  app.post('/oauth/token', api({ matrix: { own: 'ok' },
    access: { custom: 'the grant (code with PKCE or redirect URI, refresh token, or resource owner password) and the client credentials (HTTP Basic or form; confidential clients must authenticate)' },
    schema: { response: { 200: OAuthTokenSchema } },
  }), async (request, reply) => {
    await refuseTooManyTokenRequests(request);
    const body = await exchangeToken(cairn, request, allParams(request));
    return reply.headers({ 'cache-control': 'no-store', pragma: 'no-cache' }).send(body);
  });

  app.post('/oauth/revoke', api({ matrix: { own: 'ok' },
    access: { custom: "a confidential client's token only with that client's credentials (RFC 7009)" },
    schema: { response: { 200: OAuthRevokeSchema } },
  }), async (request) => {
    await refuseTooManyTokenRequests(request);
    return revokeToken(cairn, request, allParams(request));
  });

  const invalidToken = (description: string) =>
    new ApiError(401, { error: 'invalid_token', error_description: description }, {
      'www-authenticate': `Bearer realm="Cairn", error="invalid_token", error_description="${description}"`,
    });

  async function bearerToken(request: FastifyRequest) {
    const found = extractToken(request);
    const token = found && found.channel === 'bearer' ? found.token : undefined;
    const row = token ? await findAccessToken(cairn.db, token) : undefined;
    if (!row) throw invalidToken('The access token is invalid');
    const state = tokenState(row);
    if (state === 'revoked') throw invalidToken('The access token was revoked');
    if (state === 'expired') throw invalidToken('The access token expired');
    return row;
  }

  app.get('/oauth/token/info', api({
    // Describes the bearer OAuth access token: 401 to every other credential.
    matrix: { own: 401, cells: { 'oauth:api': 'ok', 'oauth:read_api': 'ok', 'oauth:read_user': 'ok', 'oauth:openid': 'ok' } },
    access: { custom: 'the bearer OAuth access token being described' },
    schema: { response: { 200: OAuthTokenInfoSchema } },
  }), async (request) => {
    const row = await bearerToken(request);
    const expiresIn = secondsLeft(row);
    return {
      resource_owner_id: row.resource_owner_id,
      scope: row.scopes,
      expires_in: expiresIn,
      application: row.application_uid ? { uid: row.application_uid } : null,
      created_at: epochSeconds(row.created_at),
      // Deprecated aliases GitLab still sends.
      scopes: row.scopes,
      expires_in_seconds: expiresIn,
    };
  });

  async function userinfo(request: FastifyRequest) {
    const row = await bearerToken(request);
    if (!row.scopes.includes('openid')) {
      throw new ApiError(403, { error: 'insufficient_scope', error_description: 'The request requires higher privileges than provided by the access token.', scope: 'openid' });
    }
    const user = await findUserById(cairn.db, row.resource_owner_id!);
    if (!user || !userMaySignIn(user)) throw invalidToken('The access token is invalid');
    const groups = await cairn.db
      .selectFrom('namespaces')
      .select('full_path')
      .where('type', '=', 'Group')
      .where('id', 'in', sql<number>`(select group_id from group_authorizations(${user.id}))`)
      .orderBy('full_path')
      .execute();
    const base = cairn.config.externalUrl;
    const withEmail = row.scopes.includes('email');
    const email = withEmail ? user.email : user.public_email || undefined;
    return {
      sub: String(user.id),
      name: user.name,
      nickname: user.username,
      preferred_username: user.username,
      ...(email ? { email, email_verified: withEmail ? user.confirmed_at !== null : true } : {}),
      website: user.website_url || undefined,
      profile: `${base}/${user.username}`,
      picture: user.avatar_path ? `${base}/uploads/-/system/user/avatar/${user.id}/${user.avatar_path}` : undefined,
      groups: [...new Set(groups.map((g) => g.full_path))],
    };
  }
  const userinfoRoute = api({
    // An OAuth access token with the openid scope; others 401, OAuth tokens without it 403.
    matrix: { own: 401, cells: { 'oauth:api': 403, 'oauth:read_api': 403, 'oauth:read_user': 403, 'oauth:openid': 'ok' } },
    access: { custom: 'a bearer OAuth access token with the openid scope, of a user who may sign in' },
    schema: { response: { 200: OAuthUserinfoSchema } },
  });
  app.get('/oauth/userinfo', userinfoRoute, async (request) => userinfo(request));
  app.post('/oauth/userinfo', userinfoRoute, async (request) => userinfo(request));

  const metadata = () => {
    const base = cairn.config.externalUrl;
    return {
      issuer: base,
      authorization_endpoint: `${base}/oauth/authorize`,
      token_endpoint: `${base}/oauth/token`,
      revocation_endpoint: `${base}/oauth/revoke`,
      userinfo_endpoint: `${base}/oauth/userinfo`,
      scopes_supported: Object.keys(OAUTH_SCOPES),
      response_types_supported: ['code', 'token'],
      response_modes_supported: ['query', 'fragment'],
      grant_types_supported: ['authorization_code', 'implicit', 'password', 'refresh_token'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
      revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
      code_challenge_methods_supported: ['plain', 'S256'],
      subject_types_supported: ['public'],
      claims_supported: ['sub', 'name', 'nickname', 'preferred_username', 'email', 'email_verified', 'website', 'profile', 'picture', 'groups'],
    };
  };
  const discovery = api({ matrix: 'public', access: { public: true }, schema: { response: { 200: OAuthServerMetadataSchema } } });
  app.get('/.well-known/openid-configuration', discovery, async () => metadata());
  app.get('/.well-known/oauth-authorization-server', discovery, async () => metadata());

  // ------------------------------------------------------------ the user's own applications

  for (const basePath of APPLICATION_PATHS) {
    const render = (reply: FastifyReply, status: number, loaded: LoadedSession, extra: Partial<ApplicationsPageOptions> & { applications: ApplicationsPageOptions['applications'] }) =>
      sendPage(reply, status, applicationsPage({ user: loaded.user!, csrfToken: loaded.session.csrf_token, basePath, ...extra }));

    const own = "the session cookie: the signed-in user's own applications (anonymous visitors are sent to sign in)";
    app.get(basePath, route({ matrix: { own: 'ok' },
      access: { custom: own },
      config: ownAuth,
      schema: { response: { 200: Html, 302: NoContent } },
    }), async (request, reply) => {
      const loaded = await loadSession(cairn, request);
      if (!loaded?.user) return signInRedirect(reply, basePath);
      return render(reply, 200, loaded, { applications: await listUserApplications(cairn.db, loaded.user.id) });
    });

    app.post(basePath, route({ matrix: { own: 'ok' },
      access: { custom: `${own}, with the CSRF token of the session` },
      config: ownAuth,
      schema: { body: ApplicationBody, response: { 201: Html, 302: NoContent } },
    }), async (request, reply) => {
      const loaded = await loadSession(cairn, request);
      if (!loaded?.user) return signInRedirect(reply, basePath);
      const params = request.body;
      if (!csrfValid(loaded.session, params.authenticity_token)) return staleForm(reply, loaded);
      const confidential = params.confidential ?? false;
      const checked = validateApplication({ name: params.name, redirectUri: params.redirect_uri, scopes: params.scopes, confidential, ownerId: loaded.user.id });
      if ('errors' in checked) {
        return render(reply, 400, loaded, {
          applications: await listUserApplications(cairn.db, loaded.user.id),
          errors: checked.errors,
          form: {
            name: params.name ?? '',
            redirect_uri: params.redirect_uri ?? '',
            confidential,
            scopes: parseScopes(params.scopes),
          },
        });
      }
      const created = await insertApplication(cairn.db, checked.value, loaded.user.id);
      return render(reply, 201, loaded, { applications: await listUserApplications(cairn.db, loaded.user.id), created });
    });

    const remove = async (request: FastifyRequest, reply: FastifyReply, id: string, csrfToken: string | undefined) => {
      const loaded = await loadSession(cairn, request);
      if (!loaded?.user) return signInRedirect(reply, basePath);
      if (!csrfValid(loaded.session, csrfToken ?? request.headers['x-csrf-token'])) return staleForm(reply, loaded);
      const owned = /^\d{1,9}$/.test(id)
        ? await cairn.db.selectFrom('oauth_applications').select('id').where('id', '=', Number(id)).where('owner_id', '=', loaded.user.id).executeTakeFirst()
        : undefined;
      if (!owned) {
        return sendPage(reply, 404, errorPage({ title: 'Not found', description: 'No such application among yours.', user: loaded.user, csrfToken: loaded.session.csrf_token }));
      }
      await deleteApplication(cairn.db, owned.id);
      return reply.redirect(basePath, 302);
    };
    const removal = { custom: `${own}, with the CSRF token of the session (form or X-CSRF-Token)` };
    app.post(`${basePath}/:id`, route({ matrix: { own: 'ok' },
      access: removal,
      config: ownAuth,
      schema: { params: ApplicationParams, body: Type.Object({ _method: Type.Optional(Type.String()), authenticity_token: CSRF }), response: { 302: NoContent } },
    }), async (request, reply) => {
      const method = request.body._method;
      if (method?.toLowerCase() !== 'delete') {
        return sendPage(reply, 405, errorPage({ title: 'Method not allowed', description: 'Applications can only be deleted here.' }));
      }
      return remove(request, reply, request.params.id, request.body.authenticity_token);
    });
    // A DELETE's form fields arrive merged into the query (plugins/params.ts).
    app.delete(`${basePath}/:id`, route({ matrix: { own: 'ok' },
      access: removal,
      config: ownAuth,
      schema: { params: ApplicationParams, querystring: Type.Object({ authenticity_token: CSRF }), response: { 302: NoContent } },
    }), async (request, reply) => remove(request, reply, request.params.id, request.query.authenticity_token));
  }

  // ------------------------------------------------------------ the user's personal access tokens

  await personalAccessTokenPages(app);
}
