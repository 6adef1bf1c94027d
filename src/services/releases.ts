// Releases (GitLab's Releases and Release links APIs): a release names a tag of the project,
// creating it from `ref` when it does not exist yet (the git write comes first: a crash after it
// leaves a tag without its release, which asking again completes), with release notes, the
// milestones it closes and links to its assets.
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import { RELEASE_LINK_TYPES, type Release, type ReleaseLink, type ReleaseLinkType } from '../db/schema/releases.js';
import { findRelease } from '../finders/releases.js';
import { queueHookEvent } from '../hooks/events.js';
import { milestonesByTitle, projectMilestoneScope } from '../finders/milestones.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import { readRef, resolveCommit } from '../git/refs.js';
import { isValidTagName } from '../git/validate.js';
import { apiError, conflict, forbidden, notFound, validationFailed } from '../plugins/errors.js';
import { can, type ProjectAbility } from '../policies/abilities.js';
import type { Caller } from './branches.js';
import { projectRepoPath } from './projects.js';
import { createTag } from './tags.js';

export interface ReleaseLinkInput {
  name?: string;
  url?: string;
  /** GitLab's direct_asset_path (filepath is its older name). */
  direct_asset_path?: string;
  filepath?: string;
  link_type?: string;
}

export interface ReleaseInput {
  tag_name: string;
  name?: string;
  description?: string;
  ref?: string;
  tag_message?: string;
  milestones?: string[];
  released_at?: string;
  assets?: { links?: ReleaseLinkInput[] };
}

const isUniqueViolation = (e: unknown) => (e as { code?: string }).code === '23505';

function assertCan(caller: Caller, ability: ProjectAbility, project: ProjectWithNamespace) {
  if (!can(caller.user, ability, { project, accessLevel: caller.accessLevel })) throw forbidden();
}

/** A timestamp a caller gave (ISO 8601), or a 400. */
function releasedAt(value: string | undefined): Date | undefined {
  if (value === undefined || value === '') return undefined;
  const d = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(d.getTime()) || d.getUTCFullYear() > 9999) throw apiError(400, 'released_at is invalid');
  return d;
}

/** GitLab's Releases::Link validations: the link as stored, or a 400 naming the field. */
export function checkedLink(input: ReleaseLinkInput, current?: ReleaseLink): { name: string; url: string; filepath: string | null; link_type: ReleaseLinkType } {
  const name = input.name ?? current?.name;
  const url = input.url ?? current?.url;
  const rawPath = input.direct_asset_path ?? input.filepath;
  const filepath = rawPath === undefined ? (current?.filepath ?? null) : rawPath === '' ? null : rawPath;
  const linkType = input.link_type ?? current?.link_type ?? 'other';
  const errors: Record<string, string[]> = {};
  if (!name || !name.trim()) errors.name = ["can't be blank"];
  else if (name.length > 255) errors.name = ['is too long (maximum is 255 characters)'];
  if (!url) errors.url = ["can't be blank"];
  else {
    let ok = false;
    try {
      ok = ['http:', 'https:', 'ftp:'].includes(new URL(url).protocol);
    } catch {
      ok = false;
    }
    if (!ok) errors.url = ['is blocked: Only allowed schemes are http, https, ftp'];
    else if (url.length > 2048) errors.url = ['is too long (maximum is 2048 characters)'];
  }
  if (filepath !== null && !/^\/(?:[-.\w]+\/?)*[\da-zA-Z]+$/.test(filepath)) errors.filepath = ['is in an invalid format'];
  if (!(RELEASE_LINK_TYPES as string[]).includes(linkType)) errors.link_type = ['is not included in the list'];
  if (Object.keys(errors).length) throw validationFailed(errors);
  return { name: name!, url: url!, filepath, link_type: linkType as ReleaseLinkType };
}

/** The milestones named by title, in the project and the groups above it; a 400 naming those missing. */
async function milestoneIds(cairn: Cairn, project: ProjectWithNamespace, titles: string[] | undefined): Promise<number[] | undefined> {
  if (titles === undefined) return undefined;
  const wanted = [...new Set(titles.filter((t) => t !== ''))];
  const found = await milestonesByTitle(cairn.db, projectMilestoneScope(project as any, true), wanted);
  const missing = wanted.filter((t) => !found.some((m) => m.title === t));
  if (missing.length) throw apiError(400, `Milestone(s) not found: ${missing.join(', ')}`);
  // One milestone per title: the project's own before a group's.
  const byTitle = new Map<string, number>();
  for (const m of [...found].sort((a, b) => Number(b.project_id !== null) - Number(a.project_id !== null))) if (!byTitle.has(m.title)) byTitle.set(m.title, m.id);
  return [...byTitle.values()];
}

async function setMilestones(db: Database, releaseId: number, ids: number[]) {
  await db.deleteFrom('release_milestones').where('release_id', '=', releaseId).execute();
  if (ids.length) await db.insertInto('release_milestones').values(ids.map((milestone_id) => ({ release_id: releaseId, milestone_id }))).execute();
}

export async function createRelease(cairn: Cairn, project: ProjectWithNamespace, caller: Caller, input: ReleaseInput): Promise<Release> {
  assertCan(caller, 'create_release', project);
  const tag = input.tag_name;
  if (!isValidTagName(tag)) throw apiError(400, 'Tag name invalid');
  if (await findRelease(cairn.db, project.id, tag)) throw conflict('Release already exists');
  const when = releasedAt(input.released_at);
  const links = (input.assets?.links ?? []).map((l) => checkedLink(l));
  for (const key of ['name', 'url', 'filepath'] as const) {
    const values = links.map((l) => l[key]).filter((v) => v !== null);
    if (new Set(values).size !== values.length) throw validationFailed({ [`links.${key}`]: ['has already been taken'] });
  }
  const milestones = await milestoneIds(cairn, project, input.milestones);
  const gitDir = projectRepoPath(cairn, project);
  if (!(await readRef(cairn.catfile, gitDir, `refs/tags/${tag}`))) {
    if (!input.ref) throw apiError(422, 'Ref is not specified');
    await createTag(cairn, project, caller, { name: tag, ref: input.ref, message: input.tag_message || undefined });
  }
  const commit = await resolveCommit(cairn.catfile, gitDir, `refs/tags/${tag}`);
  try {
    return await cairn.db.transaction().execute(async (trx) => {
      const release = await trx
        .insertInto('releases')
        .values({
          project_id: project.id,
          tag,
          name: input.name || tag,
          description: input.description ?? '',
          sha: commit?.oid ?? null,
          author_id: caller.user?.id ?? null,
          released_at: when ?? (sql`now()` as any),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      if (links.length) await trx.insertInto('release_links').values(links.map((l) => ({ ...l, release_id: release.id }))).execute();
      if (milestones?.length) await setMilestones(trx, release.id, milestones);
      await queueHookEvent(cairn, trx, { kind: 'release', projectId: project.id, id: release.id, action: 'create' });
      return release;
    });
  } catch (e) {
    if (isUniqueViolation(e)) throw conflict('Release already exists');
    throw e;
  }
}

export async function updateRelease(cairn: Cairn, project: ProjectWithNamespace, caller: Caller, tag: string, input: Omit<ReleaseInput, 'tag_name' | 'ref' | 'tag_message' | 'assets'>): Promise<Release> {
  const release = await findRelease(cairn.db, project.id, tag);
  if (!release) throw notFound();
  assertCan(caller, 'update_release', project);
  const when = releasedAt(input.released_at);
  const milestones = await milestoneIds(cairn, project, input.milestones);
  return cairn.db.transaction().execute(async (trx) => {
    const set: Record<string, unknown> = { updated_at: sql`now()` };
    if (input.name !== undefined) set.name = input.name || release.tag;
    if (input.description !== undefined) set.description = input.description;
    if (when) set.released_at = when;
    const updated = await trx.updateTable('releases').set(set).where('id', '=', release.id).returningAll().executeTakeFirstOrThrow();
    if (milestones !== undefined) await setMilestones(trx, release.id, milestones);
    await queueHookEvent(cairn, trx, { kind: 'release', projectId: project.id, id: release.id, action: 'update' });
    return updated;
  });
}

/** Deletes the release (its tag stays, as in GitLab); returns it as it was. */
export async function deleteRelease(cairn: Cairn, project: ProjectWithNamespace, caller: Caller, tag: string): Promise<Release> {
  const release = await findRelease(cairn.db, project.id, tag);
  if (!release) throw notFound();
  assertCan(caller, 'destroy_release', project);
  await cairn.db.transaction().execute(async (trx) => {
    // The event's payload is built first, from the release as it is.
    await queueHookEvent(cairn, trx, { kind: 'release', projectId: project.id, id: release.id, action: 'delete' });
    await trx.deleteFrom('releases').where('id', '=', release.id).execute();
  });
  return release;
}

export async function createReleaseLink(cairn: Cairn, release: Release, input: ReleaseLinkInput): Promise<ReleaseLink> {
  const link = checkedLink(input);
  try {
    return await cairn.db.insertInto('release_links').values({ ...link, release_id: release.id }).returningAll().executeTakeFirstOrThrow();
  } catch (e) {
    if (isUniqueViolation(e)) throw validationFailed(uniqueField(e));
    throw e;
  }
}

export async function updateReleaseLink(cairn: Cairn, link: ReleaseLink, input: ReleaseLinkInput): Promise<ReleaseLink> {
  const next = checkedLink(input, link);
  try {
    return await cairn.db.updateTable('release_links').set({ ...next, updated_at: sql`now()` as any }).where('id', '=', link.id).returningAll().executeTakeFirstOrThrow();
  } catch (e) {
    if (isUniqueViolation(e)) throw validationFailed(uniqueField(e));
    throw e;
  }
}

/** Which of a link's unique fields a unique violation was about (GitLab: "has already been taken"). */
function uniqueField(e: unknown): Record<string, string[]> {
  const text = `${(e as { constraint?: string }).constraint ?? ''} ${(e as { detail?: string }).detail ?? ''} ${(e as Error).message ?? ''}`;
  const field = /url/.test(text) ? 'url' : /filepath/.test(text) ? 'filepath' : 'name';
  return { [field]: ['has already been taken'] };
}
