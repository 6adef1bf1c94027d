/**
 * Query parameters that carry credentials. Request logs show URLs, and a token sent as
 * `?private_token=` must not end up in them (GitLab filters the same names from its logs).
 */
const SECRET_PARAMS = new Set([
  'private_token', 'access_token', 'job_token', 'token', 'refresh_token', 'client_secret', 'code', 'code_verifier',
  'password', 'authenticity_token', 'feed_token', 'rss_token', 'runner_token',
]);

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
    return SECRET_PARAMS.has(name.toLowerCase()) ? `${pair.slice(0, i)}=[FILTERED]` : pair;
  });
  return `${url.slice(0, q)}?${parts.join('&')}`;
}
