import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Label } from '../db/schema/work_items.js';
import { DEFAULT_LABEL_COLOR, sanitizeText } from './labels.js';

/** What carries labels: an issue or a merge request in the project whose labels it may use, or an epic in its group. */
export interface LabelTarget {
  targetType: 'Issue' | 'MergeRequest' | 'Epic';
  /** The issue's, merge request's or epic's id (not its iid). */
  targetId: number;
  /** The project, or the merge request's target project; null for an epic (see groupId). */
  projectId: number | null;
  /** An epic's group: it sees its group's labels and those of the groups above; new labels are group labels. */
  groupId?: number;
  /** Who makes the change; recorded on each label event (null for the system). */
  userId: number | null;
  /**
   * Whether unknown titles become new project labels. GitLab creates them only for callers who
   * may manage the project's labels: pass `can(actor, 'admin_label', subject)`. Default true.
   */
  createMissing?: boolean;
}

/** Label titles, as arrays or GitLab's comma-separated strings. */
export type LabelTitles = string[] | string;

export interface LabelChange {
  /** The whole set (replaces the current labels); absent: the current labels are kept. */
  labels?: LabelTitles;
  /** Titles to add to the set. */
  add_labels?: LabelTitles;
  /** Titles to take out of the set. */
  remove_labels?: LabelTitles;
}

export interface LabelChangeResult {
  /** The target's labels afterwards, ordered by title. */
  labels: Label[];
  added: Label[];
  removed: Label[];
}

function titlesOf(value: LabelTitles | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const parts = (Array.isArray(value) ? value : [value]).flatMap((v) => String(v).split(','));
  return [...new Set(parts.map((t) => t.trim()).filter((t) => t !== ''))];
}

/**
 * Sets the labels of an issue or merge request, as GitLab's issuable services do on create and
 * update, and records every change as a label event of its own (resource_label_events: label
 * changes are not notes).
 *
 * Contract:
 * - Titles are resolved among the labels the project sees: its own labels, then those of its
 *   group and of every group above (a project label wins over a group label of the same title,
 *   a nearer group over a farther one). Matching is exact (case-sensitive), as GitLab's is.
 * - The new set is `labels` (or, when absent, the current labels), plus `add_labels`, minus
 *   `remove_labels`. Titles are trimmed; empty ones and duplicates are ignored; a string is split
 *   on commas.
 * - An unknown title in `labels` or `add_labels` becomes a project label (colour #6699cc) when
 *   `createMissing` is not false, and is skipped otherwise or when it is not a valid title (too
 *   long). Unknown titles in `remove_labels` are ignored.
 * - Only real changes are written: one `label_links` row per label added, one deleted per label
 *   removed, and one `resource_label_events` row (action `add` or `remove`, the user, one
 *   timestamp for the whole change) for each. Concurrent calls never duplicate a link or an event.
 * - Runs in the caller's transaction when given one (`db.isTransaction`), else in its own.
 * - It checks no permission: the caller has already decided the user may change the target.
 */
export async function setLabels(db: Database, target: LabelTarget, change: LabelChange): Promise<LabelChangeResult> {
  const run = (trx: Database) => applyLabelChange(trx, target, change);
  return db.isTransaction ? run(db) : db.transaction().execute(run);
}

async function applyLabelChange(db: Database, target: LabelTarget, change: LabelChange): Promise<LabelChangeResult> {
  const wanted = titlesOf(change.labels);
  const adding = titlesOf(change.add_labels) ?? [];
  const removing = titlesOf(change.remove_labels) ?? [];

  const current = await db
    .selectFrom('label_links as ll')
    .innerJoin('labels as l', 'l.id', 'll.label_id')
    .selectAll('l')
    .where('ll.target_type', '=', target.targetType)
    .where('ll.target_id', '=', target.targetId)
    .execute();

  const titles = [...new Set([...(wanted ?? []), ...adding, ...removing])];
  const resolved = await resolveTitles(db, target, titles);
  const creatable = [...new Set([...(wanted ?? []), ...adding])].filter((t) => !resolved.has(t));
  if (creatable.length && target.createMissing !== false) {
    for (const [title, label] of await createLabels(db, target, creatable)) resolved.set(title, label);
  }
  const labelsOf = (list: string[]) => list.map((t) => resolved.get(t)).filter((l): l is Label => !!l);

  const next = new Map<number, Label>((wanted === undefined ? current : labelsOf(wanted)).map((l) => [l.id, l]));
  for (const l of labelsOf(adding)) next.set(l.id, l);
  for (const l of labelsOf(removing)) next.delete(l.id);

  const currentIds = new Set(current.map((l) => l.id));
  const toAdd = [...next.values()].filter((l) => !currentIds.has(l.id));
  const toRemove = current.filter((l) => !next.has(l.id));

  const now = new Date();
  const addedIds = toAdd.length
    ? (
        await db
          .insertInto('label_links')
          .values(toAdd.map((l) => ({ label_id: l.id, target_type: target.targetType, target_id: target.targetId, created_at: now })))
          .onConflict((oc) => oc.doNothing())
          .returning('label_id')
          .execute()
      ).map((r) => r.label_id)
    : [];
  const removedIds = toRemove.length
    ? (
        await db
          .deleteFrom('label_links')
          .where('target_type', '=', target.targetType)
          .where('target_id', '=', target.targetId)
          .where('label_id', 'in', toRemove.map((l) => l.id))
          .returning('label_id')
          .execute()
      ).map((r) => r.label_id)
    : [];

  const events = [
    ...addedIds.map((id) => ({ action: 'add', label_id: id })),
    ...removedIds.map((id) => ({ action: 'remove', label_id: id })),
  ];
  if (events.length) {
    await db
      .insertInto('resource_label_events')
      .values(events.map((e) => ({ ...e, target_type: target.targetType, target_id: target.targetId, user_id: target.userId, created_at: now })))
      .execute();
  }

  const byTitle = (a: Label, b: Label) => (a.title < b.title ? -1 : a.title > b.title ? 1 : a.id - b.id);
  const added = toAdd.filter((l) => addedIds.includes(l.id)).sort(byTitle);
  const removed = toRemove.filter((l) => removedIds.includes(l.id)).sort(byTitle);
  const final = new Map(current.map((l) => [l.id, l]));
  for (const l of added) final.set(l.id, l);
  for (const l of removed) final.delete(l.id);
  return { labels: [...final.values()].sort(byTitle), added, removed };
}

/** Title -> label among the labels the project sees (its own first, then the nearest group's). */
async function resolveTitles(db: Database, target: LabelTarget, titles: string[]): Promise<Map<string, Label>> {
  const found = new Map<string, Label>();
  if (titles.length === 0) return found;
  const rows = target.projectId === null
    ? await sql<Label & { rank: number }>`
    select l.*, array_length(n.traversal_ids, 1) - array_position(n.traversal_ids, l.group_id) as rank
      from namespaces n
      join labels l on l.group_id = any(n.traversal_ids)
     where n.id = ${target.groupId ?? 0} and l.title = any(${titles}::text[])
     order by rank, l.id`.execute(db)
    : await sql<Label & { rank: number }>`
    select l.*,
           case when l.project_id is not null then 0 else 1 + array_length(n.traversal_ids, 1) - coalesce(array_position(n.traversal_ids, l.group_id), 0) end as rank
      from projects p
      join namespaces n on n.id = p.namespace_id
      join labels l on l.project_id = p.id or (n.type = 'Group' and l.group_id = any(n.traversal_ids))
     where p.id = ${target.projectId} and l.title = any(${titles}::text[])
     order by rank, l.id`.execute(db);
  for (const { rank: _rank, ...label } of rows.rows) if (!found.has(label.title)) found.set(label.title, label as Label);
  return found;
}

/** New project (or, for an epic, group) labels for unknown titles (requested title -> label); a title another call created meanwhile is taken as it is. */
async function createLabels(db: Database, target: LabelTarget, titles: string[]): Promise<Map<string, Label>> {
  const { projectId } = target;
  const clean = new Map(titles.map((t) => [t, sanitizeText(t).trim()]));
  const valid = [...new Set([...clean.values()].filter((t) => t !== '' && !t.includes(',') && [...t].length <= 255))];
  const created = new Map<string, Label>();
  if (valid.length === 0) return created;
  if (projectId === null) {
    await sql`
      insert into labels (group_id, title, color)
      select ${target.groupId ?? 0}, t, ${DEFAULT_LABEL_COLOR} from unnest(${valid}::text[]) as t
      on conflict (group_id, title) where group_id is not null do nothing`.execute(db);
  } else {
    await sql`
      insert into labels (project_id, title, color)
      select ${projectId}, t, ${DEFAULT_LABEL_COLOR} from unnest(${valid}::text[]) as t
      on conflict (project_id, title) where project_id is not null do nothing`.execute(db);
  }
  const owner = projectId === null ? ('group_id' as const) : ('project_id' as const);
  const rows = await db.selectFrom('labels').selectAll().where(owner, '=', projectId ?? target.groupId ?? 0).where('title', 'in', valid).execute();
  const byTitle = new Map(rows.map((l) => [l.title, l]));
  for (const [asked, title] of clean) {
    const label = byTitle.get(title);
    if (label) created.set(asked, label);
  }
  return created;
}
