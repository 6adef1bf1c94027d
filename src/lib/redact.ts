/**
 * Query parameters that carry credentials. Request logs show URLs, and a token sent as
 * `?private_token=` must not end up in them (GitLab filters the same names from its logs).
 */
const SECRET_PARAMS = new Set([
  'private_token', 'access_token', 'job_token', 'token', 'refresh_token', 'client_secret', 'code', 'code_verifier',
  'password', 'authenticity_token', 'feed_token', 'rss_token', 'runner_token', 'id_token', 'client_assertion',
]);

/** Request headers that carry credentials (the logger censors them wherever they are logged). */
export const SECRET_HEADERS = ['authorization', 'private-token', 'job-token', 'cookie', 'set-cookie', 'x-gitlab-token', 'proxy-authorization'];

/** The URL with the values of credential parameters replaced by [FILTERED]. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const parts = url.slice(q + 1).split('&').map((pair) => {
    const i = pair.indexOf('=');
    if (i < 0) return pair;
    let name = pair.slice(0, i);
    try {
      name = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {}
    // `private_token[]=` and `private_token[x]=` carry the value too.
    const base = name.toLowerCase().replace(/\[.*$/, '').trim();
    return SECRET_PARAMS.has(base) ? `${pair.slice(0, i)}=[FILTERED]` : pair;
  });
  return `${url.slice(0, q)}?${parts.join('&')}`;
}
