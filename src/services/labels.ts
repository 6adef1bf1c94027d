import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace } from '../db/schema/core.js';
import type { Label } from '../db/schema/work_items.js';
import { labelTitleTaken } from '../finders/labels.js';
import { normalizeColor } from '../lib/colors.js';
import { apiError, conflict, validationFailed } from '../plugins/errors.js';
import type { ProjectRow } from '../presenters/projects.js';

/** A new label's colour when none is given (labels created from issue and merge request titles). */
export const DEFAULT_LABEL_COLOR = '#6699cc';
const MAX_TITLE = 255;
const MAX_DESCRIPTION_BYTES = 512 * 1024;

export type LabelParent = { project: ProjectRow } | { group: Namespace };

/**
 * Text as GitLab's Label model keeps it (its Sanitize.clean, then HTML entities decoded): tags
 * are dropped, the contents of script-like elements with them.
 */
export function sanitizeText(value: string): string {
  return value
    .replace(/<(script|style|iframe|noscript|svg|math|xmp|noembed|noframes|plaintext)\b[^>]*>[\s\S]*?<\/\1\s*>/gi, '')
    .replace(/<\/?[A-Za-z!][^>]*>/g, '')
    .replace(/&(lt|gt|amp|quot|#39|apos);/g, (_m, e: string) => ({ lt: '<', gt: '>', amp: '&', quot: '"', '#39': "'", apos: "'" })[e]!);
}

interface LabelFields {
  title?: string;
  color?: string;
  description?: string | null;
}

/** GitLab's Label validations, with its messages; the colour comes back normalized (keywords as hex). */
function validateLabel(fields: LabelFields, creating: boolean): { errors: Record<string, string[]>; values: LabelFields } {
  const errors: Record<string, string[]> = {};
  const values: LabelFields = {};
  const add = (field: string, message: string) => (errors[field] ??= []).push(message);
  if (fields.title !== undefined || creating) {
    const raw = fields.title ?? '';
    const title = (raw.trim() === '' ? raw : sanitizeText(raw)).trim();
    if (title === '') add('title', "can't be blank");
    if (!/^[^,]+$/.test(title)) add('title', 'is invalid');
    if ([...title].length > MAX_TITLE) add('title', `is too long (maximum is ${MAX_TITLE} characters)`);
    values.title = title;
  }
  if (fields.color !== undefined) {
    const color = normalizeColor(fields.color);
    if (color === null) add('color', 'must be a valid color code');
    else values.color = color;
  }
  if (fields.description !== undefined) {
    const description = fields.description === null || fields.description.trim() === '' ? fields.description : sanitizeText(fields.description);
    if (description && Buffer.byteLength(description) > MAX_DESCRIPTION_BYTES) add('description', `is too long (${MAX_DESCRIPTION_BYTES} bytes). Please consider reducing its length.`);
    values.description = description;
  }
  return { errors, values };
}

function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown }).code === '23505';
}

/** LabelPriority's validation: a whole number, zero or more. */
function checkPriority(priority: number | null | undefined) {
  if (priority !== undefined && priority !== null && priority < 0) throw validationFailed({ priority: ['must be greater than or equal to 0'] });
}

async function prioritize(db: Database, projectId: number, labelId: number, priority: number | null) {
  if (priority === null) {
    await db.deleteFrom('label_priorities').where('project_id', '=', projectId).where('label_id', '=', labelId).execute();
    return;
  }
  await db
    .insertInto('label_priorities')
    .values({ project_id: projectId, label_id: labelId, priority })
    .onConflict((oc) => oc.columns(['project_id', 'label_id']).doUpdateSet({ priority }))
    .execute();
}

export interface CreateLabelInput {
  name: string;
  color: string;
  description?: string | null;
  /** Projects only: the label's priority there. */
  priority?: number | null;
}

/**
 * POST /projects/:id/labels and /groups/:id/labels. A title the parent already sees (its own
 * labels and those of the groups above) is a 409 "Label already exists", as in GitLab.
 */
export async function createLabel(db: Database, parent: LabelParent, input: CreateLabelInput): Promise<Label> {
  const { errors, values } = validateLabel({ title: input.name, color: input.color, description: input.description }, true);
  if (values.title && !errors.title && (await labelTitleTaken(db, parent, values.title))) throw conflict('Label already exists');
  if (Object.keys(errors).length) throw validationFailed(errors);
  checkPriority(input.priority);
  try {
    return await db.transaction().execute(async (trx) => {
      const label = await trx
        .insertInto('labels')
        .values({
          project_id: 'project' in parent ? parent.project.id : null,
          group_id: 'group' in parent ? parent.group.id : null,
          title: values.title!,
          color: values.color!,
          description: values.description ?? null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      if ('project' in parent && input.priority !== undefined && input.priority !== null) await prioritize(trx, parent.project.id, label.id, input.priority);
      return label;
    });
  } catch (error) {
    // Two creations of one title at once: the second meets the unique index.
    if (isUniqueViolation(error)) throw conflict('Label already exists');
    throw error;
  }
}

export interface UpdateLabelInput {
  new_name?: string;
  color?: string;
  description?: string | null;
}

/** The label's own fields (PUT .../labels/:label_id): GitLab's validations, a taken title is a 400. */
export async function updateLabel(db: Database, label: Label, input: UpdateLabelInput): Promise<Label> {
  const { errors, values } = validateLabel({ title: input.new_name, color: input.color, description: input.description }, false);
  if (values.title !== undefined && !errors.title && values.title !== label.title) {
    const taken = await db
      .selectFrom('labels')
      .select('id')
      .where('title', '=', values.title)
      .where(label.project_id !== null ? sql<boolean>`project_id = ${label.project_id}` : sql<boolean>`group_id = ${label.group_id}`)
      .where('id', '<>', label.id)
      .executeTakeFirst();
    if (taken) (errors.title ??= []).push('has already been taken');
  }
  if (Object.keys(errors).length) throw validationFailed(errors);
  const changes = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined));
  if (Object.keys(changes).length === 0) return label;
  try {
    return await db
      .updateTable('labels')
      .set({ ...changes, updated_at: new Date() })
      .where('id', '=', label.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  } catch (error) {
    if (isUniqueViolation(error)) throw validationFailed({ title: ['has already been taken'] });
    throw error;
  }
}

/** Sets (a number) or removes (null) a label's priority in a project; group labels have one per project. */
export async function setLabelPriority(db: Database, projectId: number, labelId: number, priority: number | null): Promise<void> {
  checkPriority(priority);
  await prioritize(db, projectId, labelId, priority);
}

/** Deletes a label: its links, priorities and subscriptions go with it; its events stay, without their label. */
export async function deleteLabel(db: Database, label: Label): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('subscriptions').where('subscribable_type', '=', 'Label').where('subscribable_id', '=', label.id).execute();
    // label_links and label_priorities cascade; resource_label_events keep the event with label_id null.
    await trx.deleteFrom('labels').where('id', '=', label.id).execute();
  });
}

/**
 * PUT /projects/:id/labels/:label_id/promote: the project label becomes a label of the project's
 * group and keeps its id. Labels of the same title in the group's other projects (and its
 * subgroups' projects) merge into it: their issues and merge requests, priorities, events and
 * subscriptions move over, then they are deleted.
 */
export async function promoteLabel(db: Database, label: Label, project: ProjectRow): Promise<Label> {
  const failed = () => apiError(400, 'Failed to promote project label to group label');
  if (project.namespace.type !== 'Group' || label.project_id !== project.id) throw failed();
  const groupId = project.namespace.id;
  return db.transaction().execute(async (trx) => {
    const clash = await trx.selectFrom('labels').select('id').where('group_id', '=', groupId).where('title', '=', label.title).executeTakeFirst();
    if (clash) throw apiError(400, 'Validation failed: Title has already been taken');
    const siblings = (
      await trx
        .selectFrom('labels as l')
        .innerJoin('projects as p', 'p.id', 'l.project_id')
        .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
        .select('l.id')
        .where('l.title', '=', label.title)
        .where('l.id', '<>', label.id)
        .where(sql<boolean>`n.traversal_ids @> array[${groupId}::int]`)
        .execute()
    ).map((r) => r.id);
    if (siblings.length) {
      await sql`
        insert into label_links (label_id, target_type, target_id, created_at)
        select ${label.id}, target_type, target_id, min(created_at) from label_links where label_id = any(${siblings}::int[])
         group by target_type, target_id
        on conflict do nothing`.execute(trx);
      await sql`
        insert into label_priorities (project_id, label_id, priority)
        select project_id, ${label.id}, min(priority) from label_priorities where label_id = any(${siblings}::int[]) group by project_id
        on conflict do nothing`.execute(trx);
      await trx.updateTable('resource_label_events').set({ label_id: label.id }).where('label_id', 'in', siblings).execute();
      await sql`
        insert into subscriptions (user_id, subscribable_type, subscribable_id, project_id, subscribed, created_at, updated_at)
        select user_id, 'Label', ${label.id}, project_id, subscribed, created_at, updated_at from subscriptions
         where subscribable_type = 'Label' and subscribable_id = any(${siblings}::int[])
        on conflict do nothing`.execute(trx);
      await trx.deleteFrom('subscriptions').where('subscribable_type', '=', 'Label').where('subscribable_id', 'in', siblings).execute();
      await trx.deleteFrom('labels').where('id', 'in', siblings).execute();
    }
    return trx
      .updateTable('labels')
      .set({ project_id: null, group_id: groupId, updated_at: new Date() })
      .where('id', '=', label.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}

/**
 * Subscribes a user to a label (from a project, or from its group when `projectId` is null).
 * Returns false when they already were, which the API answers with 304. A user has one
 * subscription per label (the table's key): subscribing through another project moves it there.
 */
export async function subscribeToLabel(db: Database, labelId: number, userId: number, projectId: number | null): Promise<boolean> {
  const existing = await db
    .selectFrom('subscriptions')
    .select(['subscribed', 'project_id'])
    .where('subscribable_type', '=', 'Label')
    .where('subscribable_id', '=', labelId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  if (existing?.subscribed && (existing.project_id === null || existing.project_id === projectId)) return false;
  const now = new Date();
  await db
    .insertInto('subscriptions')
    .values({ user_id: userId, subscribable_type: 'Label', subscribable_id: labelId, project_id: projectId, subscribed: true, created_at: now, updated_at: now })
    .onConflict((oc) => oc.columns(['subscribable_type', 'subscribable_id', 'user_id']).doUpdateSet({ subscribed: true, project_id: projectId, updated_at: now }))
    .execute();
  return true;
}

/** Unsubscribes a user from a label; false (a 304) when they were not subscribed where they ask. */
export async function unsubscribeFromLabel(db: Database, labelId: number, userId: number, projectId: number | null): Promise<boolean> {
  const changed = await db
    .updateTable('subscriptions')
    .set({ subscribed: false, updated_at: new Date() })
    .where('subscribable_type', '=', 'Label')
    .where('subscribable_id', '=', labelId)
    .where('user_id', '=', userId)
    .where('subscribed', '=', true)
    .where((eb) => (projectId === null ? eb('project_id', 'is', null) : eb.or([eb('project_id', 'is', null), eb('project_id', '=', projectId)])))
    .executeTakeFirst();
  return Number(changed.numUpdatedRows) > 0;
}
