import type { Issue } from '../db/schema/work_items.js';
import { RowId } from '../api/params.js';
import { findIssueOrFail } from '../policies/issues.js';
import { issueScope } from '../services/issues.js';
import { defineNoteable } from './registry.js';

/**
 * Issues: `:issue_iid` in the project. A confidential issue, and so its notes, is a 404 to
 * whoever may not see it (policies/issues.ts).
 */
export const issueNoteable = defineNoteable<Issue>({
  type: 'Issue',
  parent: 'project',
  prefix: '/projects/:id/issues/:issue_iid',
  params: { issue_iid: RowId },
  abilities: { read: 'read_issue', create: 'create_issue_note', admin: 'admin_note', setCreatedAt: 'set_note_created_at' },
  async find({ cairn, access, params }) {
    const { issue } = await findIssueOrFail(cairn.db, access, access.user, Number(params.issue_iid));
    return { record: issue, iid: issue.iid, scope: issueScope(issue), locked: issue.discussion_locked === true };
  },
});
