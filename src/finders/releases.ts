import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { Release, ReleaseLink } from '../db/schema/releases.js';
import { ISSUE_STATE } from '../db/work_item_states.js';
import type { ParsedCommit } from '../git/catfile.js';
import { readCommits } from '../git/refs.js';
import type { ReleaseExtras } from '../presenters/releases.js';
import type { ProjectRow } from '../presenters/projects.js';
import { projectRepoPath } from '../services/projects.js';
import { milestonesByIds } from './milestones.js';
import { findUsersByIds } from './users.js';

export type ReleaseOrder = 'released_at' | 'created_at';

export interface ReleaseFilters {
  orderBy?: ReleaseOrder;
  sort?: 'asc' | 'desc';
  updatedBefore?: Date;
  updatedAfter?: Date;
}

/** A project's releases (or several projects': a group's), filtered; order and page are the caller's. */
export function releasesQuery(db: Database, projectIds: number[], f: ReleaseFilters = {}) {
  let q = db.selectFrom('releases').where('project_id', 'in', projectIds.length ? projectIds : [0]);
  if (f.updatedBefore) q = q.where('updated_at', '<', f.updatedBefore);
  if (f.updatedAfter) q = q.where('updated_at', '>', f.updatedAfter);
  return q;
}

export async function findRelease(db: Database, projectId: number, tag: string): Promise<Release | undefined> {
  return db.selectFrom('releases').selectAll().where('project_id', '=', projectId).where('tag', '=', tag).executeTakeFirst();
}

/**
 * Authors, commits, links and milestones (with their issue counts) of a page of releases, of one
 * project or of several (a group's page): one statement each, and one git batch per repository.
 * `commitsOf` gives the repository whose commits a release shows, or null where the caller may
 * not see its code.
 */
export async function loadReleaseExtras(cairn: Cairn, rows: Release[], commitsOf: (projectId: number) => ProjectRow | null): Promise<ReleaseExtras> {
  const ids = rows.map((r) => r.id);
  const shasByProject = new Map<number, string[]>();
  for (const r of rows) if (r.sha) shasByProject.set(r.project_id, [...(shasByProject.get(r.project_id) ?? []), r.sha]);
  const readAll = async () => {
    const commits = new Map<string, ParsedCommit>();
    await Promise.all(
      [...shasByProject].map(async ([projectId, shas]) => {
        const project = commitsOf(projectId);
        if (!project) return;
        const found = await readCommits(cairn.catfile, projectRepoPath(cairn, project), shas).catch(() => new Map<string, ParsedCommit>());
        for (const [sha, c] of found) commits.set(sha, c);
      }),
    );
    return commits;
  };
  const [authors, commits, links, milestoneLinks] = await Promise.all([
    findUsersByIds(cairn.db, [...new Set(rows.map((r) => r.author_id).filter((id): id is number => id !== null))]),
    readAll(),
    ids.length ? cairn.db.selectFrom('release_links').selectAll().where('release_id', 'in', ids).orderBy('id', 'desc').execute() : Promise.resolve([] as ReleaseLink[]),
    ids.length ? cairn.db.selectFrom('release_milestones').selectAll().where('release_id', 'in', ids).execute() : Promise.resolve([]),
  ]);
  const milestoneIds = [...new Set(milestoneLinks.map((l) => l.milestone_id))];
  const [milestones, stats] = await Promise.all([
    milestonesByIds(cairn.db, milestoneIds),
    milestoneIds.length
      ? sql<{ milestone_id: number; total: number; closed: number }>`
          select milestone_id, count(*)::int as total, count(*) filter (where state_id = ${ISSUE_STATE.closed})::int as closed
            from issues where milestone_id = any(${milestoneIds}::int[]) group by milestone_id`.execute(cairn.db).then((r) => r.rows)
      : Promise.resolve([]),
  ]);
  const statsById = new Map(stats.map((s) => [Number(s.milestone_id), { total: Number(s.total), closed: Number(s.closed) }]));
  const milestoneById = new Map(milestones.map((m) => [m.id, { ...m, issue_stats: statsById.get(m.id) ?? { total: 0, closed: 0 } }]));
  const byRelease = new Map<number, ReleaseLink[]>();
  for (const l of links) byRelease.set(l.release_id, [...(byRelease.get(l.release_id) ?? []), l]);
  const milestonesOf = new Map<number, ReleaseExtras['milestones'] extends Map<number, infer V> ? V : never>();
  for (const l of milestoneLinks) {
    const m = milestoneById.get(l.milestone_id);
    if (m) milestonesOf.set(l.release_id, [...(milestonesOf.get(l.release_id) ?? []), m]);
  }
  return { authors, commits, links: byRelease, milestones: milestonesOf };
}
