import { createHash } from 'node:crypto';

/**
 * Environment names, slugs and tiers as GitLab derives them. Shared by the CI compiler (the
 * slug is a predefined variable) and the environment services.
 */

export const MAX_ENVIRONMENT_NAME = 255;

/** GitLab's rule: letters, digits, '-', '_', '/', '$', '{', '}', '.' and spaces; no '/' at either end. */
export function environmentNameError(name: string): string | null {
  if (!name.trim()) return "can't be blank";
  if (name.length > MAX_ENVIRONMENT_NAME) return `is too long (maximum is ${MAX_ENVIRONMENT_NAME} characters)`;
  if (!/^[a-zA-Z0-9 \-_/${}.]+$/.test(name) || name.startsWith('/') || name.endsWith('/')) {
    return "can contain only letters, digits, '-', '_', '/', '$', '{', '}', '.', and spaces, but it cannot start or end with '/'";
  }
  return null;
}

/**
 * GitLab's environment slug: lowercase letters, digits and '-', starting with a letter, at most 24
 * characters, not ending with '-'. A name that had to change (or was too long) is cut to 17
 * characters and gets a 6-character suffix from its SHA-256, so two names rarely share a slug.
 */
export function environmentSlug(name: string): string {
  let slug = name.toLowerCase().replace(/[^a-z0-9]/g, '-');
  if (!/^[a-z]/.test(slug)) slug = `env-${slug}`;
  slug = slug.replace(/-+/g, '-');
  if (slug.length > 24 || slug !== name) {
    slug = slug.slice(0, 17);
    if (!slug.endsWith('-')) slug += '-';
    return slug + slugSuffix(name);
  }
  return slug.replace(/-$/, '');
}

/** The last 6 base-36 digits of the name's SHA-256 read as one number. */
function slugSuffix(name: string): string {
  const n = BigInt(`0x${createHash('sha256').update(name, 'utf8').digest('hex')}`);
  return n.toString(36).slice(-6);
}

export type Tier = 'production' | 'staging' | 'testing' | 'development' | 'other';

/** The tier of an environment whose configuration names none, guessed from its name as GitLab does. */
export function guessTier(name: string): Tier {
  if (/(dev|review|trunk)/i.test(name)) return 'development';
  if (/(test|tst|int|ac(ce|)pt|qa|qc|control|quality)/i.test(name)) return 'testing';
  if (/(st(a|)g|mod(e|)l|pre|demo|non)/i.test(name)) return 'staging';
  if (/(pr(o|)d|live)/i.test(name)) return 'production';
  return 'other';
}
