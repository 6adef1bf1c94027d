import crypto from 'node:crypto';
import type { User } from '../db/schema/core.js';
import type { OAuthApplication } from '../db/schema/oauth.js';
import { splitRedirectUris } from './applications.js';
import { OAUTH_SCOPES } from './scopes.js';

/** Escapes text for HTML element content and double-quoted attributes. */
export function esc(value: unknown): string {
  return String(value ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

const CSS = `
:root { color-scheme: light; --fg: #1f1e24; --muted: #626168; --line: #dcdcde; --bg: #fbfafd; --brand: #1f75cb; --brand-dark: #1068bf; --danger: #dd2b0e; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", Ubuntu, sans-serif; color: var(--fg); background: var(--bg); }
header.top { background: #fff; border-bottom: 1px solid var(--line); padding: .6rem 1.25rem; display: flex; align-items: center; justify-content: space-between; }
header.top .brand { font-weight: 700; font-size: 1.1rem; color: var(--fg); text-decoration: none; display: flex; align-items: center; gap: .5rem; }
header.top .brand svg { width: 1.6rem; height: 1.6rem; }
header.top form { margin: 0; }
main { max-width: 40rem; margin: 2.5rem auto; padding: 0 1rem; }
main.wide { max-width: 60rem; }
.card { background: #fff; border: 1px solid var(--line); border-radius: .5rem; padding: 1.5rem 1.75rem; box-shadow: 0 1px 2px rgba(0,0,0,.04); }
h1 { font-size: 1.5rem; margin: 0 0 1rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .75rem; }
p { margin: .5rem 0 1rem; }
.muted { color: var(--muted); font-size: .9rem; }
label { display: block; font-weight: 600; margin: 1rem 0 .3rem; }
input[type=text], input[type=password], input[type=email], input[type=date], textarea { width: 100%; padding: .55rem .7rem; font: inherit; border: 1px solid #89888d; border-radius: .25rem; background: #fff; }
textarea { min-height: 5rem; font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: .9rem; }
input:focus, textarea:focus, button:focus { outline: 2px solid var(--brand); outline-offset: 2px; }
fieldset { border: 1px solid var(--line); border-radius: .25rem; margin: 1rem 0; padding: .5rem 1rem; }
legend { font-weight: 600; padding: 0 .3rem; }
.check { display: flex; gap: .6rem; align-items: flex-start; font-weight: normal; margin: .5rem 0; }
.check input { margin-top: .35rem; }
.check span small { display: block; color: var(--muted); }
button, .button { display: inline-block; font: inherit; font-weight: 600; padding: .5rem 1rem; border-radius: .25rem; border: 1px solid var(--brand-dark); background: var(--brand); color: #fff; cursor: pointer; text-decoration: none; }
button:hover { background: var(--brand-dark); }
button.secondary { background: #fff; color: var(--fg); border-color: #89888d; }
button.secondary:hover { background: #ececef; }
button.danger { background: #fff; color: var(--danger); border-color: var(--danger); }
button.block { width: 100%; margin-top: 1.5rem; padding: .65rem 1rem; }
.actions { display: flex; gap: .75rem; margin-top: 1.5rem; }
.actions form { margin: 0; }
.alert { border-radius: .25rem; padding: .75rem 1rem; margin: 0 0 1rem; border: 1px solid; }
.alert.error { background: #fdf1ee; border-color: #f5c1b4; color: #8d1300; }
.alert.notice { background: #ecf4ee; border-color: #a2d2b1; color: #0d532a; }
ul.scopes { padding-left: 0; list-style: none; margin: .5rem 0 1rem; }
ul.scopes li { padding: .5rem 0; border-bottom: 1px solid #ececef; }
ul.scopes li:last-child { border-bottom: 0; }
code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: .9rem; word-break: break-all; }
table { width: 100%; border-collapse: collapse; background: #fff; }
th, td { text-align: left; padding: .6rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: .85rem; color: var(--muted); font-weight: 600; }
dl.secret { display: grid; grid-template-columns: max-content 1fr; gap: .4rem 1rem; margin: .5rem 0 0; }
dl.secret dt { font-weight: 600; }
dl.secret dd { margin: 0; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
`;

const LOGO = `<svg viewBox="0 0 32 32" aria-hidden="true"><path fill="#e24329" d="M16 3 5 27h22z"/><path fill="#fc6d26" d="M16 3 9 27h14z"/><path fill="#fca326" d="M16 11l-4 16h8z"/></svg>`;

/**
 * The Content-Security-Policy of every page: nothing loads or runs but the page's own style
 * sheet (allowed by its hash, not 'unsafe-inline'), forms post only here, no framing.
 * Pages have no scripts at all.
 */
export const PAGE_CSP =
  `default-src 'none'; style-src 'sha256-${crypto.createHash('sha256').update(CSS, 'utf8').digest('base64')}'; img-src 'self' data:; ` +
  "frame-ancestors 'none'; base-uri 'none'";

/** The headers of every HTML page. */
export const PAGE_HEADERS: Record<string, string> = {
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'strict-origin-when-cross-origin',
  'content-security-policy': PAGE_CSP,
};

export interface LayoutOptions {
  title: string;
  user?: User | null;
  csrfToken?: string;
  wide?: boolean;
}

export function layout(opts: LayoutOptions, body: string): string {
  const signOut = opts.user
    ? `<form method="post" action="/users/sign_out"><input type="hidden" name="authenticity_token" value="${esc(opts.csrfToken)}">` +
      `<span class="muted">Signed in as <strong>@${esc(opts.user.username)}</strong></span> <button type="submit" class="secondary">Sign out</button></form>`
    : '';
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(opts.title)} · Cairn</title>
<style>${CSS}</style>
</head>
<body>
<header class="top"><a class="brand" href="/">${LOGO}<span>Cairn</span></a>${signOut}</header>
<main${opts.wide ? ' class="wide"' : ''} id="content">
${body}
</main>
</body>
</html>`;
}

const hidden = (name: string, value: unknown) => `<input type="hidden" name="${esc(name)}" value="${esc(value)}">`;

export function signInPage(opts: { csrfToken: string; returnTo: string; login?: string; error?: string }): string {
  const alert = opts.error ? `<div class="alert error" role="alert">${esc(opts.error)}</div>` : '';
  return layout(
    { title: 'Sign in' },
    `<div class="card">
<h1>Sign in to Cairn</h1>
${alert}<form method="post" action="/users/sign_in">
${hidden('authenticity_token', opts.csrfToken)}
${hidden('redirect_to', opts.returnTo)}
<label for="user_login">Username or primary email</label>
<input type="text" id="user_login" name="user[login]" autocomplete="username" autocapitalize="off" spellcheck="false" required autofocus value="${esc(opts.login ?? '')}">
<label for="user_password">Password</label>
<input type="password" id="user_password" name="user[password]" autocomplete="current-password" required>
<button type="submit" class="block">Sign in</button>
</form>
</div>`,
  );
}

export interface AuthorizeFormFields {
  client_id: string;
  redirect_uri: string;
  response_type: string;
  state?: string;
  scope: string;
  code_challenge?: string;
  code_challenge_method?: string;
}

export function authorizePage(opts: {
  user: User;
  csrfToken: string;
  app: OAuthApplication;
  ownerName: string | null;
  scopes: string[];
  fields: AuthorizeFormFields;
}): string {
  const fields = Object.entries(opts.fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => hidden(k, v))
    .join('\n');
  const host = (() => {
    try {
      return new URL(opts.fields.redirect_uri).host || opts.fields.redirect_uri;
    } catch {
      return opts.fields.redirect_uri;
    }
  })();
  const scopes = opts.scopes
    .map((s) => `<li><code>${esc(s)}</code><br><span class="muted">${esc(OAUTH_SCOPES[s] ?? s)}</span></li>`)
    .join('\n');
  const by = opts.ownerName ? `was created by <strong>${esc(opts.ownerName)}</strong>` : 'was registered by an administrator of this instance';
  return layout(
    { title: 'Authorize application', user: opts.user, csrfToken: opts.csrfToken },
    `<div class="card">
<h1>Authorize <span class="app-name">${esc(opts.app.name)}</span> to use your account?</h1>
<p>An application called <strong>${esc(opts.app.name)}</strong> is requesting access to your Cairn account <strong>@${esc(opts.user.username)}</strong>. This application ${by}. Make sure you trust it before you authorize it.</p>
<h2 id="scopes-heading">This application will be able to:</h2>
<ul class="scopes" aria-labelledby="scopes-heading">
${scopes}
</ul>
<p class="muted">After you choose, you will be sent to <span class="mono">${esc(host)}</span>.</p>
<div class="actions">
<form method="post" action="/oauth/authorize">
${hidden('authenticity_token', opts.csrfToken)}
${fields}
<button type="submit">Authorize ${esc(opts.app.name)}</button>
</form>
<form method="post" action="/oauth/authorize">
${hidden('_method', 'delete')}
${hidden('authenticity_token', opts.csrfToken)}
${fields}
<button type="submit" class="secondary">Deny</button>
</form>
</div>
</div>`,
  );
}

export function errorPage(opts: { title: string; error?: string; description: string; user?: User | null; csrfToken?: string }): string {
  return layout(
    { title: opts.title, user: opts.user, csrfToken: opts.csrfToken },
    `<div class="card">
<h1>${esc(opts.title)}</h1>
<div class="alert error" role="alert">${opts.error ? `<strong>${esc(opts.error)}</strong>: ` : ''}${esc(opts.description)}</div>
<p class="muted">You may close this page, or go back to the application and try again.</p>
</div>`,
  );
}

export interface ApplicationsPageOptions {
  user: User;
  csrfToken: string;
  basePath: string;
  applications: OAuthApplication[];
  created?: { app: OAuthApplication; secret: string };
  errors?: Record<string, string[]>;
  form?: { name?: string; redirect_uri?: string; confidential?: boolean; scopes?: string[] };
  notice?: string;
}

export function applicationsPage(opts: ApplicationsPageOptions): string {
  const created = opts.created
    ? `<div class="alert notice" role="status">
<p><strong>Application ${esc(opts.created.app.name)} was created.</strong> Copy the secret now: it is shown only this once.</p>
<dl class="secret">
<dt>Application ID</dt><dd><code id="created-application-id">${esc(opts.created.app.uid)}</code></dd>
<dt>Secret</dt><dd><code id="created-secret">${esc(opts.created.secret)}</code></dd>
<dt>Callback URL</dt><dd><code>${esc(splitRedirectUris(opts.created.app.redirect_uri).join(' '))}</code></dd>
</dl>
</div>`
    : '';
  const notice = opts.notice ? `<div class="alert notice" role="status">${esc(opts.notice)}</div>` : '';
  const errors = opts.errors
    ? `<div class="alert error" role="alert"><p><strong>The application could not be saved:</strong></p><ul>${Object.entries(opts.errors)
        .flatMap(([field, msgs]) => msgs.map((m) => `<li>${esc(field.replace(/_/g, ' '))} ${esc(m)}</li>`))
        .join('')}</ul></div>`
    : '';
  const rows = opts.applications.length
    ? `<table>
<thead><tr><th scope="col">Name</th><th scope="col">Application ID</th><th scope="col">Callback URLs</th><th scope="col">Confidential</th><th scope="col">Scopes</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>
${opts.applications
  .map(
    (a) => `<tr>
<td>${esc(a.name)}</td>
<td><code>${esc(a.uid)}</code></td>
<td>${splitRedirectUris(a.redirect_uri).map((u) => `<code>${esc(u)}</code>`).join('<br>')}</td>
<td>${a.confidential ? 'Yes' : 'No'}</td>
<td>${a.scopes.map((s) => `<code>${esc(s)}</code>`).join(' ')}</td>
<td><form method="post" action="${esc(opts.basePath)}/${a.id}">${hidden('_method', 'delete')}${hidden('authenticity_token', opts.csrfToken)}<button type="submit" class="danger" aria-label="Delete ${esc(a.name)}">Delete</button></form></td>
</tr>`,
  )
  .join('\n')}
</tbody>
</table>`
    : '<p class="muted">You have not registered any applications yet.</p>';
  const form = opts.form ?? {};
  const confidential = form.confidential ?? true;
  const chosen = new Set(form.scopes ?? []);
  const scopeBoxes = Object.entries(OAUTH_SCOPES)
    .map(
      ([s, d]) =>
        `<label class="check"><input type="checkbox" name="scopes[]" value="${esc(s)}"${chosen.has(s) ? ' checked' : ''}><span><code>${esc(s)}</code><small>${esc(d)}</small></span></label>`,
    )
    .join('\n');
  return layout(
    { title: 'Applications', user: opts.user, csrfToken: opts.csrfToken, wide: true },
    `<h1>Applications</h1>
<p class="muted">Register applications that use Cairn as an OAuth 2.0 provider, and manage the ones you registered.</p>
${created}${notice}
<h2>Your applications</h2>
${rows}
<h2>Add new application</h2>
<div class="card">
${errors}<form method="post" action="${esc(opts.basePath)}">
${hidden('authenticity_token', opts.csrfToken)}
<label for="application_name">Name</label>
<input type="text" id="application_name" name="name" required maxlength="255" value="${esc(form.name ?? '')}">
<label for="application_redirect_uri">Redirect URI</label>
<textarea id="application_redirect_uri" name="redirect_uri" required aria-describedby="redirect_help">${esc(form.redirect_uri ?? '')}</textarea>
<p class="muted" id="redirect_help">Use one line per URI. Each must match exactly what the application sends.</p>
${hidden('confidential', '0')}
<label class="check"><input type="checkbox" name="confidential" value="1"${confidential ? ' checked' : ''}><span>Confidential<small>The application keeps its secret confidential (a server). Clear this for native mobile apps and single-page apps, which must use PKCE.</small></span></label>
<fieldset><legend>Scopes</legend>
${scopeBoxes}
</fieldset>
<button type="submit">Save application</button>
</form>
</div>`,
  );
}
