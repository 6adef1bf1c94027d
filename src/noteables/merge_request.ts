import type { MergeRequest } from '../db/schema/work_items.js';
import { RowId } from '../api/params.js';
import { renderSingle } from '../api/merge_requests/routes.js';
import { findMergeRequest, loadMergeRequestExtras } from '../finders/merge_requests.js';
import { MergeRequestSingleSchema } from '../presenters/schemas/merge_requests.js';
import { mergeRequestNoteScope, mergeRequestNotFound } from '../services/merge_requests.js';
import { checkDiffPosition } from '../services/notes.js';
import { defineNoteable } from './registry.js';

/**
 * Merge requests: threads resolve (by developers and up, the merge request's author and each
 * note's author), DiffNotes sit on lines of the merge request's diff (its diff_refs:
 * base_sha/start_sha/head_sha; the source head is kept in the target repository, forks
 * included, so every version's commits are there). Every call is authenticated, as every merge
 * request call is in the spec. Reviewers count as participants of its subscription.
 */
export const mergeRequestNoteable = defineNoteable<MergeRequest>({
  type: 'MergeRequest',
  parent: 'project',
  prefix: '/projects/:id/merge_requests/:merge_request_iid',
  params: { merge_request_iid: RowId },
  resolvable: true,
  signedIn: true,
  abilities: {
    read: 'read_merge_request',
    create: 'read_merge_request',
    admin: 'admin_note',
    setCreatedAt: 'set_note_created_at',
    resolve: 'resolve_note',
  },
  awards: true,
  labelEvents: true,
  subscriptions: {
    response: MergeRequestSingleSchema,
    async participants({ cairn, found: { record: mr } }) {
      const extras = (await loadMergeRequestExtras(cairn.db, [mr], (m) => m)).get(mr.id)!;
      return [mr.author_id, ...extras.assignees.map((u) => u.id), ...extras.reviewers.map((u) => u.id)];
    },
    present: (request, access, found) => renderSingle(request, access, found.record),
  },
  async find({ cairn, access, params }) {
    const mr = await findMergeRequest(cairn.db, access.project.id, Number(params.merge_request_iid));
    if (!mr) throw mergeRequestNotFound();
    return {
      record: mr,
      id: mr.id,
      scope: mergeRequestNoteScope(mr),
      iid: mr.iid,
      authorId: mr.author_id,
      locked: mr.discussion_locked === true,
      checkPosition: (position) => checkDiffPosition(cairn, access.project, position),
    };
  },
});
