/** Scopes an OAuth application may be registered with, with the words the consent page shows. */
export const OAUTH_SCOPES: Record<string, string> = {
  api: 'Full read and write access to the API, including all groups and projects',
  read_api: 'Read access to the API, including all groups and projects',
  read_user: "Read-only access to your profile through the /user API endpoint",
  read_repository: 'Read-only access to repositories through Git-over-HTTP',
  write_repository: 'Read and write access to repositories through Git-over-HTTP',
  sudo: 'Perform API actions as any user (administrators only)',
  admin_mode: 'Perform API actions as an administrator when Admin Mode is enabled',
  openid: 'Authenticate using OpenID Connect',
  profile: 'Read-only access to your profile data using OpenID Connect',
  email: 'Read-only access to your primary email address using OpenID Connect',
};

/** GitLab's default when an authorization or password grant asks for no scope. */
export const DEFAULT_SCOPES = ['api'];

export function isKnownScope(scope: string): boolean {
  return Object.prototype.hasOwnProperty.call(OAUTH_SCOPES, scope);
}

/** "api read_user", "api,read_user" or an array of those -> unique scope names, in order. */
export function parseScopes(value: unknown): string[] {
  const parts: string[] = [];
  const add = (v: unknown) => {
    if (typeof v === 'string') parts.push(...v.split(/[\s,]+/));
    else if (Array.isArray(v)) v.forEach(add);
  };
  add(value);
  return [...new Set(parts.filter(Boolean))];
}

export function isSubset(asked: string[], allowed: string[]): boolean {
  return asked.every((s) => allowed.includes(s));
}
