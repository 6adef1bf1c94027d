import { RowId } from '../api/params.js';
import { findMergeRequest } from '../finders/merge_requests.js';
import { mergeRequestNotFound } from '../services/merge_requests.js';
import { defineAwardable } from './registry.js';

/** Merge requests and their notes (`/projects/:id/merge_requests/:merge_request_iid/...`). */
export const mergeRequestAwardable = defineAwardable({
  type: 'MergeRequest',
  prefix: '/projects/:id/merge_requests/:merge_request_iid',
  params: { merge_request_iid: RowId },
  read: 'read_merge_request',
  signedIn: true,
  notes: true,
  async find({ cairn, access, params }) {
    const mr = await findMergeRequest(cairn.db, access.project.id, Number(params.merge_request_iid));
    if (!mr) throw mergeRequestNotFound();
    return { id: mr.id };
  },
});
