import { RowId } from '../api/params.js';
import { findReadableSnippet } from '../policies/snippets.js';
import { defineAwardable } from './registry.js';

/** Project snippets and their notes (`/projects/:id/snippets/:snippet_id/...`); a snippet the caller may not see is a 404. */
export const snippetAwardable = defineAwardable({
  type: 'Snippet',
  prefix: '/projects/:id/snippets/:snippet_id',
  params: { snippet_id: RowId },
  read: 'read_snippet',
  notes: true,
  async find({ cairn, access, params }) {
    const { snippet } = await findReadableSnippet(cairn, access.user, Number(params.snippet_id), { projectId: access.project.id });
    return { id: snippet.id };
  },
});
