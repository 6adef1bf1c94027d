import { RowId } from '../api/params.js';
import { renderIssueSingle } from '../api/issues/routes.js';
import { findIssueOrFail, type IssueAccess } from '../policies/issues.js';
import { IssueSingleSchema } from '../presenters/schemas/issues.js';
import { issueScope } from '../services/issues.js';
import { defineNoteable } from './registry.js';

/**
 * Issues: `:issue_iid` in the project. A confidential issue, and so its notes, awards,
 * subscription and label events, is a 404 to whoever may not see it (policies/issues.ts).
 */
export const issueNoteable = defineNoteable<IssueAccess>({
  type: 'Issue',
  parent: 'project',
  prefix: '/projects/:id/issues/:issue_iid',
  params: { issue_iid: RowId },
  abilities: { read: 'read_issue', create: 'create_issue_note', admin: 'admin_note', setCreatedAt: 'set_note_created_at' },
  awards: true,
  labelEvents: true,
  subscriptions: {
    response: IssueSingleSchema,
    participants: async ({ found }) => [found.record.issue.author_id, ...found.record.assigneeIds],
    present: (request, _access, found) => renderIssueSingle(request, found.record),
  },
  async find({ cairn, access, params }) {
    const found = await findIssueOrFail(cairn.db, access, access.user, Number(params.issue_iid));
    const { issue } = found;
    return { record: found, id: issue.id, iid: issue.iid, scope: issueScope(issue), locked: issue.discussion_locked === true };
  },
});
