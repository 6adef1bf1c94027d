/**
 * The one set of rules for names a caller gives the git layer: object ids, revisions, revision
 * ranges, ref names, branch and tag names, repository paths. Every check here is pure (no git
 * process), so a name is judged the same way wherever it arrives. A value refused here never
 * reaches git: no option lookalike (`-x`), no object syntax where a ref is expected
 * (`main:../../`), no control characters.
 */

/** Longest revision or ref name a caller may give. */
const MAX_NAME_LENGTH = 1024;

/** The null object id: "no such ref" on either side of a ref update (SHA-1 repositories). */
export const ZERO_OID = '0000000000000000000000000000000000000000';

/** The id of the empty tree (SHA-1): the "parent" a root commit is diffed against. */
export const EMPTY_TREE_OID = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

/** A full SHA-1 object id in git's lower-case hex, as Cairn's repositories name objects. */
export function isOid(value: string): boolean {
  return /^[0-9a-f]{40}$/.test(value);
}

/** A full object id of either hash (SHA-1 or SHA-256), as git prints them in ref files and protocols. */
export function isObjectId(value: string): boolean {
  return /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(value);
}

/** The null object id of either hash (a ref created or deleted by a push). */
export function isZeroOid(value: string): boolean {
  return /^0+$/.test(value);
}

/**
 * One revision a caller may name (branch, tag, id, `main~2`, `v1^{commit}`), to be peeled to an
 * object. Refuses option lookalikes, control characters and whitespace, backslashes, ranges
 * (`..`) and path lookups (`:`, as in `main:README.md` or `main:../../`), so that it can only
 * ever name a commit-ish.
 */
export function isSafeRevision(rev: unknown): rev is string {
  return (
    typeof rev === 'string' &&
    rev.length > 0 &&
    rev.length <= MAX_NAME_LENGTH &&
    !rev.startsWith('-') &&
    !/[\x00-\x20\x7f:\\]/.test(rev) &&
    !rev.includes('..')
  );
}

/**
 * `a..b` / `a...b` split into its sides (an empty side stands for HEAD, as for git), or null
 * when `ref` is a single revision.
 */
export function splitRevisionRange(ref: string): { from: string; operator: '..' | '...'; to: string } | null {
  const m = /^(.*?)(\.\.\.?)(.*)$/.exec(ref);
  return m ? { from: m[1], operator: m[2] as '..' | '...', to: m[3] } : null;
}

/**
 * What a history walk may start from: one safe revision, or a range `a..b` / `a...b` whose
 * non-empty sides are each safe revisions (the commits list's `ref_name`). Never valid where one
 * object is expected: use isSafeRevision there.
 */
export function isSafeRevisionRange(ref: unknown): ref is string {
  if (typeof ref !== 'string' || ref.length > MAX_NAME_LENGTH) return false;
  const range = splitRevisionRange(ref);
  if (!range) return isSafeRevision(ref);
  const sides = [range.from, range.to].filter(Boolean);
  return sides.length > 0 && sides.every(isSafeRevision);
}

const BAD_REF_CHARS = /[\x00-\x20\x7f~^:?*[\\]/;

/** git's check_refname_format for one `/`-separated component of a ref name. */
export function isValidRefComponent(name: string): boolean {
  return !!name && !name.startsWith('.') && !name.endsWith('.lock') && !name.includes('..') && !name.includes('@{') && !BAD_REF_CHARS.test(name);
}

/**
 * Does `git check-ref-format <ref>` accept this full ref name (`refs/heads/x`)? At least two
 * components, none empty, starting with `.` or ending with `.lock`; no `..`, `@{`, control
 * characters, space, `~ ^ : ? * [ \`; not ending with `.`; not `@`.
 */
export function isValidRefName(ref: unknown): ref is string {
  if (typeof ref !== 'string' || !ref || ref === '@' || ref.endsWith('.')) return false;
  const parts = ref.split('/');
  return parts.length >= 2 && parts.every(isValidRefComponent);
}

/**
 * A full ref name that may be looked up as it is (`refs/heads/main`): a valid ref name that
 * git could not read as an option. Anything else (`refs/heads/main:../../`, `refs/heads/x~1`)
 * names no ref.
 */
export function isReadableRefName(ref: unknown): ref is string {
  return isValidRefName(ref) && ref.length <= MAX_NAME_LENGTH && !ref.startsWith('-');
}

/** Branch names that would read as an object id (GitLab refuses them: a 40-character hexadecimal branch name). */
function looksLikeObjectId(name: string): boolean {
  return /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/i.test(name);
}

/**
 * A name a new branch (or a default branch) may have: `git check-ref-format --branch` (a valid
 * `refs/heads/<name>`, not starting with `-`, not `HEAD`) and GitLab's own rules: not
 * `refs/heads/...` or `refs/remotes/...` (Gitlab::GitRefValidator), and not a name that looks
 * like a commit id (GitLab refuses 40-character hexadecimal branch names).
 */
export function isValidBranchName(name: string): boolean {
  if (typeof name !== 'string' || !name || name.startsWith('-') || name === 'HEAD') return false;
  if (name.startsWith('refs/heads/') || name.startsWith('refs/remotes/') || looksLikeObjectId(name)) return false;
  return isReadableRefName(`refs/heads/${name}`);
}

/** A name a new tag may have: a valid `refs/tags/<name>` that does not start with `-`. */
export function isValidTagName(name: string): boolean {
  return typeof name === 'string' && !!name && !name.startsWith('-') && isReadableRefName(`refs/tags/${name}`);
}

/**
 * A repository path as a caller may name it (trailing slashes dropped; '' for the root), or
 * null when it is absolute, option-like, has `.`/`..`/empty segments or control characters.
 */
export function normalizeRepoPath(p: string): string | null {
  if (/[\x00-\x1f\x7f]/.test(p) || p.startsWith('/') || p.startsWith('-')) return null;
  const trimmed = p.replace(/\/+$/, '');
  if (trimmed === '') return '';
  const parts = trimmed.split('/');
  if (parts.some((s) => s === '' || s === '.' || s === '..')) return null;
  return trimmed;
}
