import { sql } from 'kysely';
import type { Config } from '../config.js';
import type { Database } from '../db/index.js';
import { queueHookEvent } from '../hooks/events.js';
import type { Milestone } from '../db/schema/work_items.js';
import { apiError } from '../plugins/errors.js';
import { nextInternalId } from './internal_ids.js';
import { sanitizeText } from './labels.js';
import { transition, type EventOf } from '../db/state_machine.js';
import { MILESTONE_MACHINE } from '../db/work_item_states.js';

/** A milestone's owner: a project (in a namespace that may be a group) or a group. */
export type MilestoneParent = { projectId: number; namespaceGroupId: number | null } | { groupId: number };

/** Given, a project milestone's changes are sent to the project's hooks (GitLab's milestone events). */
export interface MilestoneHooks {
  config: Config;
}


export interface MilestoneInput {
  title?: string;
  description?: string | null;
  due_date?: string | null;
  start_date?: string | null;
}

/**
 * A date parameter as Rails casts it into a date column: `YYYY-MM-DD` or an ISO timestamp (its
 * date); anything else, and '' or null, is no date. Year 0 is none either (PostgreSQL has no year
 * 0); years past 9999 are kept, for the validations to name (afterYear9999).
 */
export function castDate(value: string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  const m = /^\s*(\d{4,})-(\d{1,2})-(\d{1,2})(?:$|[T\s])/.exec(value);
  if (!m) return null;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const d = new Date(Date.UTC(2000, month - 1, day));
  if (year < 1 || month < 1 || month > 12 || d.getUTCMonth() !== month - 1) return null;
  // February 29th needs a leap year.
  if (month === 2 && day === 29 && !(year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0))) return null;
  return `${String(year).padStart(4, '0')}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}

/** Is this date (castDate's form) after 9999-12-31? Years of five digits and more do not compare as strings. */
export function afterYear9999(date: string): boolean {
  return Number(date.split('-')[0]) > 9999;
}

/** Ruby's Hash#inspect of validation errors, which GitLab puts in "Failed to ... milestone" messages. */
function rubyErrors(errors: Record<string, string[]>): string {
  const entries = Object.entries(errors).map(([field, messages]) => `:${field}=>[${messages.map((m) => JSON.stringify(m)).join(', ')}]`);
  return `{${entries.join(', ')}}`;
}

/** Milestone titles are unique across a project and its group, and across a group and its projects. */
async function titleTaken(db: Database, parent: MilestoneParent, title: string, exceptId: number | null): Promise<boolean> {
  const scope =
    'groupId' in parent
      ? sql<boolean>`(m.group_id = ${parent.groupId} or m.project_id in (select id from projects where namespace_id = ${parent.groupId}))`
      : parent.namespaceGroupId !== null
        ? sql<boolean>`(m.project_id = ${parent.projectId} or m.group_id = ${parent.namespaceGroupId})`
        : sql<boolean>`m.project_id = ${parent.projectId}`;
  const row = await db
    .selectFrom('milestones as m')
    .select('m.id')
    .where(scope)
    .where('m.title', '=', title)
    .where('m.id', '<>', exceptId ?? 0)
    .executeTakeFirst();
  return !!row;
}

/** GitLab's Milestone validations, on the values the milestone would have. */
async function validate(db: Database, parent: MilestoneParent, next: { title: string; due_date: string | null; start_date: string | null }, existing: Milestone | null) {
  const errors: Record<string, string[]> = {};
  const add = (field: string, message: string) => (errors[field] ??= []).push(message);
  if (next.title === '') add('title', "can't be blank");
  else if ((!existing || existing.title !== next.title) && (await titleTaken(db, parent, next.title, existing?.id ?? null))) {
    add('title', 'already being used for another group or project milestone.');
  }
  if (next.start_date && next.due_date && next.due_date <= next.start_date) add('due_date', 'must be greater than start date');
  if (next.start_date && afterYear9999(next.start_date)) add('start_date', 'date must not be after 9999-12-31');
  if (next.due_date && afterYear9999(next.due_date)) add('due_date', 'date must not be after 9999-12-31');
  return errors;
}

function cleanTitle(title: string): string {
  return sanitizeText(title).trim();
}

/** POST /projects/:id/milestones and /groups/:id/milestones. */
export async function createMilestone(db: Database, parent: MilestoneParent, input: MilestoneInput & { title: string }, hooks?: MilestoneHooks): Promise<Milestone> {
  const next = { title: cleanTitle(input.title), due_date: castDate(input.due_date), start_date: castDate(input.start_date) };
  const errors = await validate(db, parent, next, null);
  if (Object.keys(errors).length) throw apiError(400, `Failed to create milestone ${rubyErrors(errors)}`);
  try {
    return await db.transaction().execute(async (trx) => {
      const iid = 'groupId' in parent ? await nextInternalId(trx, 'group_milestones', parent.groupId) : await nextInternalId(trx, 'project_milestones', parent.projectId);
      const created = await trx
        .insertInto('milestones')
        .values({
          iid,
          project_id: 'projectId' in parent ? parent.projectId : null,
          group_id: 'groupId' in parent ? parent.groupId : null,
          title: next.title,
          description: input.description ?? null,
          due_date: next.due_date,
          start_date: next.start_date,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      await milestoneEvent(hooks, trx, created, 'create');
      return created;
    });
  } catch (error) {
    // The same title created twice at once: the second meets the unique index.
    if ((error as { code?: unknown }).code === '23505') {
      throw apiError(400, `Failed to create milestone ${rubyErrors({ title: ['already being used for another group or project milestone.'] })}`);
    }
    throw error;
  }
}

/** PUT .../milestones/:milestone_id: the given fields, then the state event (close, activate) as one guarded update. */
export async function updateMilestone(
  db: Database,
  parent: MilestoneParent,
  milestone: Milestone,
  input: MilestoneInput & { state_event?: EventOf<typeof MILESTONE_MACHINE> },
  hooks?: MilestoneHooks,
): Promise<Milestone> {
  const next = {
    title: input.title !== undefined ? cleanTitle(input.title) : milestone.title,
    due_date: input.due_date !== undefined ? castDate(input.due_date) : milestone.due_date,
    start_date: input.start_date !== undefined ? castDate(input.start_date) : milestone.start_date,
  };
  const errors = await validate(db, parent, next, milestone);
  if (Object.keys(errors).length) throw apiError(400, `Failed to update milestone ${rubyErrors(errors)}`);
  const changes: Record<string, unknown> = {};
  if (input.title !== undefined) changes.title = next.title;
  if (input.description !== undefined) changes.description = input.description;
  if (input.due_date !== undefined) changes.due_date = next.due_date;
  if (input.start_date !== undefined) changes.start_date = next.start_date;
  return db.transaction().execute(async (trx) => {
    let row = milestone;
    if (Object.keys(changes).length) {
      try {
        row = await trx.updateTable('milestones').set({ ...changes, updated_at: new Date() }).where('id', '=', milestone.id).returningAll().executeTakeFirstOrThrow();
      } catch (error) {
        if ((error as { code?: unknown }).code === '23505') {
          throw apiError(400, `Failed to update milestone ${rubyErrors({ title: ['already being used for another group or project milestone.'] })}`);
        }
        throw error;
      }
    }
    if (input.state_event) {
      // A milestone already in the target state is left as it is, as GitLab's state machine leaves it.
      const moved = await transition(trx, MILESTONE_MACHINE, milestone.id, input.state_event, { set: { updated_at: new Date() } });
      if (moved) {
        row = moved;
        await milestoneEvent(hooks, trx, moved, input.state_event === 'close' ? 'close' : 'reopen');
      }
    }
    return row;
  });
}

/** A project milestone's event for the project's hooks (group milestones have no project hooks to go to). */
async function milestoneEvent(hooks: MilestoneHooks | undefined, trx: Database, milestone: Milestone, action: 'create' | 'close' | 'reopen') {
  if (!hooks || milestone.project_id === null) return;
  await queueHookEvent({ config: hooks.config, db: trx }, trx, { kind: 'milestone', projectId: milestone.project_id, id: milestone.id, action });
}

/** DELETE .../milestones/:milestone_id: issues and merge requests lose it (the foreign keys set it null). */
export async function deleteMilestone(db: Database, milestone: Milestone): Promise<void> {
  await db.deleteFrom('milestones').where('id', '=', milestone.id).execute();
}
