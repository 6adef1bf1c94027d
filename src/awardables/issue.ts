import { RowId } from '../api/params.js';
import { findIssueOrFail } from '../policies/issues.js';
import { defineAwardable } from './registry.js';

/** Issues and their notes (`/projects/:id/issues/:issue_iid/...`); a confidential issue is a 404 to whoever may not see it. */
export const issueAwardable = defineAwardable({
  type: 'Issue',
  prefix: '/projects/:id/issues/:issue_iid',
  params: { issue_iid: RowId },
  read: 'read_issue',
  notes: true,
  async find({ cairn, access, params }) {
    const { issue } = await findIssueOrFail(cairn.db, access, access.user, Number(params.issue_iid));
    return { id: issue.id };
  },
});
