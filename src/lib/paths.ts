/**
 * GitLab's rules for namespace and project paths: letters, digits, '_', '-', '.'; must not
 * start with '-' or '.', end with '.', '.git' or '.atom', or contain consecutive special
 * characters.
 */
const PATH_RE = /^[a-zA-Z0-9_][a-zA-Z0-9_.-]*$/;

export const RESERVED_TOP_LEVEL = new Set([
  '-', '.well-known', '404.html', '422.html', '500.html', '502.html', '503.html', 'admin', 'api', 'apple-touch-icon.png',
  'assets', 'dashboard', 'deploy.html', 'explore', 'favicon.ico', 'favicon.png', 'files', 'groups', 'health_check', 'help',
  'import', 'jwt', 'login', 'oauth', 'profile', 'projects', 'public', 'robots.txt', 's', 'search', 'sitemap', 'sitemap.xml',
  'snippets', 'uploads', 'users', 'v2',
]);

export function pathError(path: string): string | null {
  if (!path) return "can't be blank";
  if (path.length > 255) return 'is too long (maximum is 255 characters)';
  if (!PATH_RE.test(path) || /[._-]{2,}/.test(path) || /[.]$/.test(path) || /\.(git|atom)$/i.test(path)) {
    return "can contain only letters, digits, '_', '-' and '.'. Cannot start with '-', end in '.git' or end in '.atom'";
  }
  return null;
}

/** Turns a display name into a path candidate ("My Project!" -> "my-project"). */
export function pathFromName(name: string): string {
  return name
    .trim()
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, '-')
    .replace(/[._-]{2,}/g, '-')
    .replace(/^[-._]+|[-._]+$/g, '')
    .replace(/\.(git|atom)$/, '');
}
