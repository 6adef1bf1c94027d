import { sql } from 'kysely';
import { RE2JS } from 're2js';
import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import { projectFullPath, type ProjectWithNamespace } from '../finders/projects.js';
import type { ParsedCommit } from '../git/catfile.js';
import { listHistory, pathEntry } from '../git/commits.js';
import { listRefs, readBlob, readCommits, resolveCommit } from '../git/refs.js';
import { isReadableRefName, isSafeRevision, normalizeRepoPath } from '../git/validate.js';
import { strftime, type ZonedTime } from '../lib/strftime.js';
import { inTimestampRange } from '../lib/timestamps.js';
import { parseTemplate, renderTemplate, TemplateError, type TemplateNode } from '../lib/template_parser.js';
import { ApiError } from '../plugins/errors.js';
import { can, effectiveLevel } from '../policies/abilities.js';
import { groupAccessLevel, hasAccessBelowGroup } from '../finders/access_levels.js';
import { MEMBER } from '../policies/rules.js';
import { commitTitle, parseTrailers } from '../presenters/commits.js';
import { createCommit } from './commits.js';
import { readFile } from './files.js';
import { projectRepoPath } from './projects.js';
import { MR_STATE } from '../db/work_item_states.js';

/**
 * Changelog generation (GitLab's Repositories::ChangelogService and Gitlab::Changelog): the
 * commits between the previous release's tag and `to` that carry a trailer (`Changelog: added`)
 * become entries of a new Markdown section, grouped by the trailer's value and rendered by the
 * project's template. The section is returned (GET) or written into the changelog file, where
 * sections are kept in version order (POST).
 */

export const DEFAULT_TRAILER = 'Changelog';
export const DEFAULT_FILE = 'CHANGELOG.md';
export const DEFAULT_CONFIG_FILE = '.gitlab/changelog_config.yml';
const DEFAULT_DATE_FORMAT = '%Y-%m-%d';

/** Most commits one changelog may cover (GitLab's COMMITS_LIMIT). */
export const COMMITS_LIMIT = 15_000;
/** Commits read from the repository at a time. */
const COMMITS_PER_PAGE = 1024;

const DEFAULT_TEMPLATE = `{% if categories %}
{% each categories %}
### {{ title }} ({% if single_change %}1 change{% else %}{{ count }} changes{% end %})

{% each entries %}
- [{{ title }}]({{ commit.reference }})\\
{% if author.credit %} by {{ author.reference }}{% end %}\\
{% if merge_request %} ([merge request]({{ merge_request.reference }})){% end %}

{% end %}

{% end %}
{% else %}
No changes.
{% end %}
`;

/** Semantic versions, optionally with a leading v (GitLab's DEFAULT_TAG_REGEX, RE2 syntax). */
export const DEFAULT_TAG_REGEX =
  '^v?(?P<major>0|[1-9]\\d*)\\.(?P<minor>0|[1-9]\\d*)\\.(?P<patch>0|[1-9]\\d*)' +
  '(?:-(?P<pre>(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\\.(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*))*))' +
  '?(?:\\+(?P<meta>[0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*))?$';

/** A semantic version anywhere in a string (GitLab's unbounded_semver_regex): what `version` must contain. */
export const UNBOUNDED_SEMVER =
  /(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:\d*[a-zA-Z-][0-9a-zA-Z-]*|[1-9]\d*|0)(?:\.(?:\d*[a-zA-Z-][0-9a-zA-Z-]*|[1-9]\d*|0))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?/;

/** A release heading in a changelog file: `## 1.2.3 ...`. */
const RELEASE_HEADING = new RegExp(`^##\\s+(${UNBOUNDED_SEMVER.source})`);

/** GitLab's "This reverts commit <sha>" line in a revert's description. */
const REVERT_PATTERN = /^This reverts commit ([0-9a-f]{40})/im;

/** An expected failure: 422 "Failed to generate the changelog: ..." */
export class ChangelogError extends Error {}

export function changelogFailure(message: string): ApiError {
  return new ApiError(422, { message: `Failed to generate the changelog: ${message}` });
}

export interface ChangelogInput {
  version: string;
  from?: string;
  to?: string;
  date?: ZonedTime;
  trailer?: string;
  configFile?: string;
  /** POST only. */
  branch?: string;
  file?: string;
  message?: string;
}

interface ChangelogConfig {
  dateFormat: string;
  template: TemplateNode[];
  categories: Record<string, unknown>;
  tagRegex: string;
  alwaysCreditUserIds: Set<number>;
}

// ---------------------------------------------------------------------------------------------
// Versions

type VersionToken = number | string;

function versionTokens(v: string): VersionToken[] {
  return (v.replace(/^v/i, '').match(/\d+|[a-zA-Z]+/g) ?? []).map((t) => (/^\d/.test(t) ? Number(t) : t));
}

/**
 * Orders versions as GitLab's VersionSorter does: numbers numerically, and a version that goes
 * on with letters (`1.0.0-rc1`) before the one that stops (`1.0.0`).
 */
export function compareVersions(a: string, b: string): number {
  const x = versionTokens(a);
  const y = versionTokens(b);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const p = x[i];
    const q = y[i];
    if (p === undefined) return typeof q === 'string' ? 1 : -1;
    if (q === undefined) return typeof p === 'string' ? -1 : 1;
    if (typeof p === 'number' && typeof q === 'number') {
      if (p !== q) return p - q;
    } else if (typeof p === 'number') return 1;
    else if (typeof q === 'number') return -1;
    else if (p !== q) return p < q ? -1 : 1;
  }
  return 0;
}

function compileTagRegex(source: string): RE2JS {
  try {
    return RE2JS.compile(source);
  } catch (e) {
    throw new ChangelogError(`The regular expression to use for finding the previous tag for a version is invalid: ${(e as Error).message}`);
  }
}

function namedGroup(m: ReturnType<RE2JS['matcher']>, name: string): string | null {
  try {
    return m.group(name);
  } catch {
    return null;
  }
}

/** "major.minor.patch[+meta]" from a match, or null when a part is missing. */
function assembleVersion(m: ReturnType<RE2JS['matcher']>): string | null {
  const [major, minor, patch, meta] = ['major', 'minor', 'patch', 'meta'].map((g) => namedGroup(m, g));
  if (major === null || minor === null || patch === null) return null;
  return `${major}.${minor}.${patch}${meta !== null ? `+${meta}` : ''}`;
}

/**
 * The tag of the last stable release before `version` (GitLab's ChangelogTagFinder): tag names
 * are read with the configured pattern (RE2: linear time on any tag name), pre-releases skipped.
 */
async function previousReleaseTag(cairn: Cairn, gitDir: string, version: string, tagRegex: string): Promise<string | null> {
  const custom = compileTagRegex(tagRegex);
  const standard = compileTagRegex(DEFAULT_TAG_REGEX);
  const requestedMatch = standard.matcher(version);
  const requested = requestedMatch.find() ? assembleVersion(requestedMatch) : null;
  if (!requested) {
    throw new ChangelogError('The requested `version` attribute format is not correct. Use formats such as `1.0.0` or `v1.0.0`.');
  }
  const tagsByVersion = new Map<string, string>();
  const versions = [requested];
  for (const tag of await listRefs(gitDir, 'refs/tags/')) {
    const m = custom.matcher(tag.name);
    if (!m.find()) continue;
    // Compared against the last stable release, never a release candidate after it.
    if (namedGroup(m, 'pre') !== null) continue;
    const v = assembleVersion(m);
    if (!v) continue;
    tagsByVersion.set(v, tag.name);
    versions.push(v);
  }
  versions.sort(compareVersions);
  const index = versions.indexOf(requested);
  return index > 0 ? tagsByVersion.get(versions[index - 1]) ?? null : null;
}

// ---------------------------------------------------------------------------------------------
// Configuration

async function readBlobAtHead(cairn: Cairn, gitDir: string, path: string): Promise<string | null> {
  const normalized = normalizeRepoPath(path);
  if (!normalized) return null;
  const head = await resolveCommit(cairn.catfile, gitDir, 'HEAD');
  if (!head) return null;
  const entry = await pathEntry(cairn.catfile, gitDir, head.oid, normalized);
  if (!entry || entry.type !== 'blob') return null;
  const blob = await readBlob(cairn.catfile, gitDir, entry.oid);
  return blob ? blob.data.toString('utf8') : null;
}

function parseTemplateOrFail(source: string): TemplateNode[] {
  try {
    return parseTemplate(source);
  } catch (e) {
    if (e instanceof TemplateError) throw new ChangelogError(e.message);
    throw e;
  }
}

/**
 * The project's changelog configuration, read from the default branch (GitLab reads it at HEAD
 * whatever `to` is), or the defaults when there is none.
 */
async function loadChangelogConfig(cairn: Cairn, project: ProjectWithNamespace, user: User | null, path: string): Promise<ChangelogConfig> {
  const config: ChangelogConfig = {
    dateFormat: DEFAULT_DATE_FORMAT,
    template: parseTemplateOrFail(DEFAULT_TEMPLATE),
    categories: {},
    tagRegex: DEFAULT_TAG_REGEX,
    alwaysCreditUserIds: new Set(),
  };
  const text = await readBlobAtHead(cairn, projectRepoPath(cairn, project), path);
  if (!text || !text.trim()) return config;
  let hash: unknown;
  try {
    // No aliases (Psych's safe_load refuses them too) and no custom tags.
    // The YAML parser (about 10 MB of memory) loads with the first configuration read.
    const { default: YAML } = await import('yaml');
    hash = YAML.parse(text, { maxAliasCount: 0, customTags: [] });
  } catch {
    throw new ChangelogError(`${path} does not contain valid YAML`);
  }
  if (hash === null || typeof hash !== 'object' || Array.isArray(hash)) return config;
  const h = hash as Record<string, unknown>;
  if (h.date_format !== undefined && h.date_format !== null && h.date_format !== false) config.dateFormat = String(h.date_format);
  if (h.template !== undefined && h.template !== null && h.template !== false) config.template = parseTemplateOrFail(String(h.template));
  if (h.categories !== undefined && h.categories !== null && h.categories !== false) {
    if (typeof h.categories !== 'object' || Array.isArray(h.categories)) throw new ChangelogError('The "categories" configuration key must be a Hash');
    config.categories = h.categories as Record<string, unknown>;
  }
  if (h.tag_regex !== undefined && h.tag_regex !== null && h.tag_regex !== false) config.tagRegex = String(h.tag_regex);
  const groups = h.include_groups === undefined || h.include_groups === null ? [] : Array.isArray(h.include_groups) ? h.include_groups : [h.include_groups];
  for (const groupPath of groups) {
    for (const id of await directMembersOfReadableGroup(cairn, user, String(groupPath))) config.alwaysCreditUserIds.add(id);
  }
  return config;
}

/** The direct members of the group at `fullPath`, when the caller may read that group (GitLab's include_groups). */
async function directMembersOfReadableGroup(cairn: Cairn, user: User | null, fullPath: string): Promise<number[]> {
  if (!user) return [];
  const group = await cairn.db
    .selectFrom('namespaces')
    .selectAll()
    .where('type', '=', 'Group')
    .where(sql<string>`lower(full_path)`, '=', fullPath.toLowerCase())
    .executeTakeFirst();
  if (!group) return [];
  const subject = { group, accessLevel: effectiveLevel(user, await groupAccessLevel(cairn.db, user.id, group)), accessBelow: false };
  if (!can(user, 'read_group', subject)) subject.accessBelow = await hasAccessBelowGroup(cairn.db, user.id, group.id);
  if (!can(user, 'read_group', subject)) return [];
  const rows = await sql<{ user_id: number }>`
    select m.user_id from members m
     where m.source_type = 'Namespace' and m.source_id = ${group.id} and m.user_id is not null and membership_active(m)`.execute(cairn.db);
  return rows.rows.map((r) => r.user_id);
}

// ---------------------------------------------------------------------------------------------
// Commits and what they link to

interface EntryCommit {
  commit: ParsedCommit;
  trailers: Record<string, string>;
  category: string;
}

/**
 * The commits of `from..to` carrying `trailer`, newest first (GitLab's ChangelogCommitsFinder):
 * a commit reverted by a newer commit of the range is left out, and so is a revert without the
 * trailer of its own. The walk is newest first, so a revert is seen before what it reverts; a
 * revert that is itself reverted reverts nothing.
 */
async function commitsWithTrailer(cairn: Cairn, gitDir: string, from: string, to: string, trailer: string): Promise<EntryCommit[]> {
  const { oids, total } = await listHistory(cairn.catfile, gitDir, { ref: `${from}..${to}` }, { offset: 0, limit: COMMITS_LIMIT + 1 });
  if (total > COMMITS_LIMIT) throw new ChangelogError(`The commits range exceeds ${COMMITS_LIMIT} elements.`);
  const reverted = new Set<string>();
  const entries: EntryCommit[] = [];
  for (let start = 0; start < oids.length; start += COMMITS_PER_PAGE) {
    const page = oids.slice(start, start + COMMITS_PER_PAGE);
    const byOid = await readCommits(cairn.catfile, gitDir, page);
    for (const oid of page) {
      const commit = byOid.get(oid);
      if (!commit || reverted.has(oid)) continue;
      const description = commit.message.split('\n').slice(1).join('\n');
      const revertOf = REVERT_PATTERN.exec(description);
      if (revertOf) reverted.add(revertOf[1]);
      const { trailers } = parseTrailers(commit.message);
      if (Object.hasOwn(trailers, trailer)) entries.push({ commit, trailers, category: trailers[trailer] });
    }
  }
  return entries;
}

/** For each commit, the oldest merge request of the project whose merge or squash commit it is. */
async function mergeRequestsByCommit(cairn: Cairn, project: ProjectWithNamespace, oids: string[]): Promise<Map<string, number>> {
  const map = new Map<string, number>();
  if (!oids.length) return map;
  const rows = await cairn.db
    .selectFrom('merge_requests')
    .select(['iid', 'merge_commit_sha', 'squash_commit_sha'])
    .where('target_project_id', '=', project.id)
    .where((eb) => eb.or([eb('merge_commit_sha', 'in', oids), eb('squash_commit_sha', 'in', oids)]))
    .orderBy('id', 'desc')
    .execute();
  // Newest first, so the oldest merge request is written last and wins.
  for (const r of rows) {
    if (r.squash_commit_sha) map.set(r.squash_commit_sha, r.iid);
    if (r.merge_commit_sha) map.set(r.merge_commit_sha, r.iid);
  }
  return map;
}

interface KnownAuthor {
  id: number;
  username: string;
  /** Not a member of the project, and the author of a merge request merged into its default branch. */
  contributor: boolean;
}

/** The users whose e-mail addresses authored these commits, with GitLab's contributor test. */
async function commitAuthors(cairn: Cairn, project: ProjectWithNamespace, commits: ParsedCommit[]): Promise<Map<string, KnownAuthor>> {
  const emails = [...new Set(commits.map((c) => c.author.email.toLowerCase()).filter(Boolean))];
  const byEmail = new Map<string, KnownAuthor>();
  if (!emails.length) return byEmail;
  const users = await cairn.db
    .selectFrom('users')
    .select(['id', 'username', sql<string>`lower(email)`.as('email')])
    .where(sql<string>`lower(email)`, 'in', emails)
    .where('confirmed_at', 'is not', null)
    .execute();
  if (!users.length) return byEmail;
  const ids = users.map((u) => u.id);
  const levels = await sql<{ user_id: number; level: number }>`
    select u.id as user_id, project_access_level(u.id, ${project.id}) as level
      from unnest(${sql.val(ids)}::int[]) as u(id)`.execute(cairn.db);
  const members = new Set(levels.rows.filter((r) => MEMBER.allows(r.level)).map((r) => r.user_id));
  const merged = await cairn.db
    .selectFrom('merge_requests')
    .select('author_id')
    .distinct()
    .where('target_project_id', '=', project.id)
    .where('state_id', '=', MR_STATE.merged)
    .where('target_branch', '=', project.default_branch ?? '')
    .where('author_id', 'in', ids)
    .execute();
  const mergedAuthors = new Set(merged.map((r) => r.author_id));
  for (const u of users) byEmail.set(u.email, { id: u.id, username: u.username, contributor: !members.has(u.id) && mergedAuthors.has(u.id) });
  return byEmail;
}

// ---------------------------------------------------------------------------------------------
// The release section

interface Release {
  version: string;
  markdown: string;
}

function buildRelease(config: ChangelogConfig, version: string, date: ZonedTime, entries: Map<string, Record<string, unknown>[]>): Release {
  const categories = [];
  for (const [title, list] of entries) {
    if (!list.length) continue;
    categories.push({ title, count: list.length, single_change: list.length === 1, entries: list });
  }
  let body: string;
  try {
    body = renderTemplate(config.template, { categories }).trim();
  } catch (e) {
    if (e instanceof TemplateError) throw new ChangelogError(e.message);
    throw e;
  }
  // The heading is fixed: it is how sections are found again when the next one is added.
  return { version, markdown: `## ${version} (${strftime(config.dateFormat, date)})\n\n${body}\n\n` };
}

/**
 * The changelog with `release` added where its version belongs (GitLab's Generator): above the
 * section of the highest version below it, or at the end.
 */
export function addReleaseToChangelog(existing: string, release: Release): string {
  const lines = existing.match(/[^\n]*\n|[^\n]+$/g) ?? [];
  const locations = new Map<string, number>();
  lines.forEach((line, index) => {
    const m = RELEASE_HEADING.exec(line);
    if (m) locations.set(m[1], index);
  });
  const versions = [release.version, ...locations.keys()];
  versions.sort((a, b) => compareVersions(b, a));
  const newIndex = versions.indexOf(release.version);
  const insertBefore = versions[newIndex + 1];
  const out = [...lines];
  if (insertBefore !== undefined) {
    out.splice(locations.get(insertBefore)!, 0, release.markdown);
  } else {
    if (versions.length > 1) out.push('\n');
    out.push(release.markdown.replace(/\s+$/, ''));
    out.push('\n');
  }
  return out.join('');
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Generates the release section for `input` (GitLab's ChangelogService#execute up to the commit). */
async function generateRelease(cairn: Cairn, project: ProjectWithNamespace, user: User | null, input: ChangelogInput, branch: string): Promise<Release> {
  const gitDir = projectRepoPath(cairn, project);
  const trailer = input.trailer ?? DEFAULT_TRAILER;
  const config = await loadChangelogConfig(cairn, project, user, input.configFile || DEFAULT_CONFIG_FILE);

  let from = input.from;
  if (!from) {
    const tag = await previousReleaseTag(cairn, gitDir, input.version, config.tagRegex);
    if (!tag) throw new ChangelogError('The commit start range is unspecified, and no previous tag could be found to use instead');
    from = `refs/tags/${tag}`;
    if (!isReadableRefName(from)) throw new ChangelogError('Invalid or not found commit value in the given range');
  }
  const to = input.to ?? branch;
  const [fromCommit, toCommit] = await Promise.all(
    [from, to].map((rev) => (isSafeRevision(rev) ? resolveCommit(cairn.catfile, gitDir, rev) : Promise.resolve(null))),
  );
  if (!fromCommit || !toCommit) throw new ChangelogError('Invalid or not found commit value in the given range');

  const commits = await commitsWithTrailer(cairn, gitDir, fromCommit.oid, toCommit.oid, trailer);
  const [mergeRequests, authors] = await Promise.all([
    mergeRequestsByCommit(cairn, project, commits.map((c) => c.commit.oid)),
    commitAuthors(cairn, project, commits.map((c) => c.commit)),
  ]);

  const fullPath = projectFullPath(project);
  const entries = new Map<string, Record<string, unknown>[]>();
  // Categories named in the configuration come first, in its order.
  for (const display of Object.values(config.categories)) entries.set(String(display), []);
  for (const { commit, trailers, category } of commits) {
    const entry: Record<string, unknown> = {
      title: commitTitle(commit.message),
      commit: { reference: `${fullPath}@${commit.oid}`, trailers },
    };
    const author = authors.get(commit.author.email.toLowerCase());
    if (author) {
      const credit = author.contributor || config.alwaysCreditUserIds.has(author.id);
      entry.author = { reference: `@${author.username}`, contributor: author.contributor, credit };
    }
    const mr = mergeRequests.get(commit.oid);
    if (mr !== undefined) entry.merge_request = { reference: `${fullPath}!${mr}` };
    const displayName = Object.hasOwn(config.categories, category) && config.categories[category] ? String(config.categories[category]) : category;
    const list = entries.get(displayName);
    if (list) list.push(entry);
    else entries.set(displayName, [entry]);
  }
  return buildRelease(config, input.version, input.date ?? { epochMs: Date.now(), offsetMinutes: 0 }, entries);
}

function asApiError(e: unknown): unknown {
  return e instanceof ChangelogError ? changelogFailure(e.message) : e;
}

/** GET: the release section alone, as it would open a new changelog. */
export async function changelogNotes(cairn: Cairn, project: ProjectWithNamespace, user: User | null, input: ChangelogInput): Promise<string> {
  try {
    const release = await generateRelease(cairn, project, user, input, project.default_branch ?? 'main');
    return addReleaseToChangelog('', release);
  } catch (e) {
    throw asApiError(e);
  }
}

const STALE = 'changelog-stale';
const COMMIT_ATTEMPTS = 3;

/**
 * POST: the release section written into `file` on `branch` with one commit (the commits
 * service: protected branches, compare-and-swap). A changelog that already has a section for the
 * version is left alone. When the file changed between reading and committing, it is read again.
 */
export async function commitChangelog(cairn: Cairn, project: ProjectWithNamespace, user: User, accessLevel: number, input: ChangelogInput): Promise<void> {
  const branch = input.branch || project.default_branch || 'main';
  const file = input.file ?? DEFAULT_FILE;
  let release: Release;
  try {
    release = await generateRelease(cairn, project, user, input, branch);
  } catch (e) {
    throw asApiError(e);
  }
  const existingHeading = new RegExp(`^##\\s*${escapeRegExp(release.version)}`, 'm');
  for (let attempt = 1; ; attempt++) {
    let current: { content: string; lastCommitId: string } | null = null;
    try {
      const found = await readFile(cairn, project, `refs/heads/${branch}`, file);
      current = { content: found.content.toString('utf8'), lastCommitId: found.lastCommitId };
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
    }
    if (current && existingHeading.test(current.content)) return;
    try {
      await createCommit(cairn, {
        project,
        user,
        accessLevel,
        branch,
        startBranch: branch,
        message: input.message || `Add changelog for version ${input.version}`,
        actions: [
          {
            action: current ? 'update' : 'create',
            file_path: file,
            content: addReleaseToChangelog(current?.content ?? '', release),
            last_commit_id: current?.lastCommitId,
          },
        ],
        staleMessage: () => STALE,
      });
      return;
    } catch (e) {
      const stale = e instanceof ApiError && (e.body as { message?: unknown }).message === STALE;
      const appeared = e instanceof ApiError && !current && (e.body as { message?: unknown }).message === 'A file with this name already exists';
      if ((stale || appeared) && attempt < COMMIT_ATTEMPTS) continue;
      if (stale) throw new ApiError(400, { message: `The file has changed since you started editing it: ${file}` });
      throw e;
    }
  }
}

/**
 * The release date as a caller writes it (Grape's DateTime): ISO 8601, a date alone meaning
 * midnight UTC, with its UTC offset kept (the heading shows the date where it was given).
 * Null when it is not a date, or not within years 1 to 9999 (lib/timestamps.ts).
 */
export function parseReleaseDate(text: string): ZonedTime | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i.exec(text.trim());
  if (m) {
    const [, y, mo, d, h = '0', mi = '0', s = '0', frac = '0', zone] = m;
    let offset = 0;
    if (zone && zone.toUpperCase() !== 'Z') {
      const digits = zone.slice(1).replace(':', '');
      offset = (zone[0] === '-' ? -1 : 1) * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2, 4) || '0'));
      if (Math.abs(offset) >= 24 * 60) return null;
    }
    const fields = [Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s)];
    // Not Date.UTC, which reads years 0 to 99 as 1900 to 1999.
    const check = new Date(0);
    check.setUTCFullYear(fields[0], fields[1], fields[2]);
    check.setUTCHours(fields[3], fields[4], fields[5], Number(frac.slice(0, 3).padEnd(3, '0')));
    const utc = check.getTime();
    // Dates roll 2021-02-30 over to March; a date that does not exist is refused.
    if (check.getUTCMonth() !== fields[1] || check.getUTCDate() !== fields[2] || fields[3] > 23 || fields[4] > 59 || fields[5] > 60) return null;
    const epochMs = utc - offset * 60000;
    return inTimestampRange(new Date(epochMs)) ? { epochMs, offsetMinutes: offset } : null;
  }
  const loose = Date.parse(text);
  return !/\d/.test(text) || !inTimestampRange(new Date(loose)) ? null : { epochMs: loose, offsetMinutes: 0 };
}
