import type { Epic } from '../db/schema/work_items.js';
import { RowId } from '../api/params.js';
import { findEpic } from '../finders/epics.js';
import { can } from '../policies/abilities.js';
import { notFound } from '../plugins/errors.js';
import { epicNoteScope } from '../services/epics.js';
import { defineNoteable } from './registry.js';

/**
 * Group epics. As in GitLab (and the spec's prefix), the discussions and notes APIs name an epic
 * by its id, not its iid; a confidential epic is for reporters and up (404 to others, as GitLab's
 * EpicsFinder hides it), and so are its notes and label events. Epic notes have no project and
 * no noteable_iid.
 */
export const epicNoteable = defineNoteable<Epic>({
  type: 'Epic',
  parent: 'group',
  prefix: '/groups/:id/epics/:epic_id',
  params: { epic_id: RowId },
  abilities: { read: 'read_epic', create: 'read_epic', admin: 'admin_note', setCreatedAt: 'set_note_created_at' },
  labelEvents: true,
  async find({ cairn, access, params }) {
    const epic = await findEpic(cairn.db, access.group.id, Number(params.epic_id), true);
    const subject = { group: access.group, accessLevel: access.accessLevel };
    if (!epic || (epic.confidential && !can(access.user, 'read_confidential_epic', subject))) throw notFound();
    return { record: epic, id: epic.id, scope: epicNoteScope(epic), iid: null, authorId: epic.author_id };
  },
});
