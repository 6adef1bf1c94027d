import { Type } from 'typebox';
import type { ParsedCommit } from '../git/catfile.js';
import { findCommitOrFail } from '../services/commits.js';
import { checkDiffPosition, commitScope } from '../services/notes.js';
import { defineNoteable } from './registry.js';

/**
 * Commits: `:sha` is a SHA, branch or tag name (GitLab takes any of them); notes are kept on
 * the commit it names. Comments may sit on lines of the commit's diff. The commits API's own
 * comment form (GET/POST .../comments) lives in api/notes/commit_comments.ts over this kind.
 */
export const commitNoteable = defineNoteable<ParsedCommit>({
  type: 'Commit',
  parent: 'project',
  prefix: '/projects/:id/repository/commits/:sha',
  params: { sha: Type.String() },
  abilities: { read: 'read_commit_note', create: 'create_commit_note', admin: 'admin_note', setCreatedAt: 'set_note_created_at' },
  async find({ cairn, access, params }) {
    const commit = await findCommitOrFail(cairn, access.project, String(params.sha));
    return {
      record: commit,
      scope: commitScope(access.project.id, commit.oid),
      iid: null,
      checkPosition: (position) => checkDiffPosition(cairn, access.project, position),
    };
  },
});
