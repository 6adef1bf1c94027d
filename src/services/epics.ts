import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import type { Epic } from '../db/schema/work_items.js';
import type { NoteableScope } from '../finders/notes.js';
import { ApiError } from '../plugins/errors.js';
import { afterYear9999, castDate } from './milestones.js';
import { checkIssuableText } from './issuable_text.js';
import { nextInternalId } from './internal_ids.js';
import { setLabels, type LabelChange } from './label_links.js';
import { deleteWorkItemDependents } from './work_items.js';
import { notify } from './notify.js';
import { transition } from '../db/state_machine.js';
import { EPIC_MACHINE } from '../db/work_item_states.js';

/**
 * Minimal group epics (GitLab's Epics API): create, update (title, description, state_event,
 * labels, confidential, fixed start and due dates), delete. iids count per group; a state change
 * is one guarded UPDATE; label changes are label events (resource_label_events), not notes.
 */

export interface EpicParams {
  title?: string;
  description?: string | null;
  confidential?: boolean;
  /** Fixed dates (start_date_fixed / due_date_fixed, or the deprecated start_date / end_date); null clears. */
  startDate?: string | null;
  dueDate?: string | null;
  state_event?: 'close' | 'reopen';
  labelChange?: LabelChange;
}

/** The notes of an epic: epics belong to a group, so their notes have no project. */
export function epicNoteScope(epic: Pick<Epic, 'id'>): NoteableScope {
  return { type: 'Epic', projectId: null, key: { column: 'noteable_id', value: epic.id } };
}

/** A date parameter: null clears it; a value that is not a date (within years 1 to 9999) is refused. */
function dateParam(name: string, value: string | null | undefined): string | null | undefined {
  if (value === undefined || value === null || value === '') return value === '' ? null : value;
  const date = castDate(value);
  if (!date || afterYear9999(date)) throw new ApiError(400, { error: `${name} is invalid` });
  return date;
}

export function epicDates(body: { start_date_fixed?: string | null; start_date?: string | null; due_date_fixed?: string | null; end_date?: string | null; start_date_is_fixed?: boolean; due_date_is_fixed?: boolean }) {
  let startDate = dateParam('start_date_fixed', body.start_date_fixed !== undefined ? body.start_date_fixed : body.start_date);
  let dueDate = dateParam('due_date_fixed', body.due_date_fixed !== undefined ? body.due_date_fixed : body.end_date);
  // Dates are fixed ones only: un-fixing one leaves the epic without it (no milestones feed it).
  if (body.start_date_is_fixed === false) startDate = null;
  if (body.due_date_is_fixed === false) dueDate = null;
  return { startDate, dueDate };
}

async function applyLabels(db: Cairn['db'], epic: Epic, user: User, change: LabelChange | undefined): Promise<boolean> {
  if (!change || (change.labels === undefined && change.add_labels === undefined && change.remove_labels === undefined)) return false;
  const result = await setLabels(db, { targetType: 'Epic', targetId: epic.id, projectId: null, groupId: epic.group_id, userId: user.id, createMissing: true }, change);
  return result.added.length > 0 || result.removed.length > 0;
}

export async function createEpic(cairn: Cairn, groupId: number, user: User, p: EpicParams): Promise<Epic> {
  checkIssuableText(p, true);
  return cairn.db.transaction().execute(async (trx) => {
    const iid = await nextInternalId(trx, 'epics', groupId);
    const epic = await trx
      .insertInto('epics')
      .values({
        iid,
        group_id: groupId,
        title: p.title!.trim(),
        description: p.description ?? null,
        author_id: user.id,
        confidential: p.confidential ?? false,
        start_date: p.startDate ?? null,
        due_date: p.dueDate ?? null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await applyLabels(trx, epic, user, p.labelChange);
    await notify(cairn, trx, { action: 'new_epic', target: { type: 'Epic', id: epic.id }, actorId: user.id });
    return epic;
  });
}

export async function updateEpic(cairn: Cairn, epic: Epic, user: User, p: EpicParams): Promise<Epic> {
  checkIssuableText(p, false);
  const set: Record<string, unknown> = {};
  if (p.title !== undefined) set.title = p.title.trim();
  if (p.description !== undefined) set.description = p.description;
  if (p.confidential !== undefined) set.confidential = p.confidential;
  if (p.startDate !== undefined) set.start_date = p.startDate;
  if (p.dueDate !== undefined) set.due_date = p.dueDate;
  return cairn.db.transaction().execute(async (trx) => {
    const labelsChanged = await applyLabels(trx, epic, user, p.labelChange);
    let current = epic;
    if (p.state_event) {
      current = (await transition(trx, EPIC_MACHINE, epic.id, p.state_event, {
        set: { closed_at: p.state_event === 'close' ? sql<Date>`now()` : null, updated_at: sql<Date>`now()` },
      })) ?? current;
    }
    if (Object.keys(set).length || labelsChanged) {
      current = await trx.updateTable('epics').set({ ...set, updated_at: sql<Date>`now()` }).where('id', '=', epic.id).returningAll().executeTakeFirstOrThrow();
    }
    return current;
  });
}

/** DELETE: the epic, its notes, label links and events, awards and subscriptions. */
export async function deleteEpic(cairn: Cairn, epic: Epic): Promise<void> {
  await cairn.db.transaction().execute(async (trx) => {
    await deleteWorkItemDependents(trx, 'Epic', epic.id);
    await trx.deleteFrom('epics').where('id', '=', epic.id).execute();
  });
}
