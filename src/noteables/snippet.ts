import type { Snippet } from '../db/schema/snippets.js';
import { RowId } from '../api/params.js';
import { findReadableSnippet } from '../policies/snippets.js';
import { defineNoteable } from './registry.js';

/**
 * Project snippets: `:snippet_id` in the project. A snippet the caller may not see (its own
 * visibility, policies/snippets.ts) is a 404, and so are its notes and awards. Personal snippets have no
 * notes API (as in GitLab).
 */
export const snippetNoteable = defineNoteable<Snippet>({
  type: 'Snippet',
  parent: 'project',
  prefix: '/projects/:id/snippets/:snippet_id',
  params: { snippet_id: RowId },
  abilities: { read: 'read_snippet', create: 'create_snippet_note', admin: 'admin_note', setCreatedAt: 'set_note_created_at' },
  awards: true,
  async find({ cairn, access, params }) {
    const { snippet } = await findReadableSnippet(cairn, access.user, Number(params.snippet_id), { projectId: access.project.id });
    return { record: snippet, id: snippet.id, iid: null, authorId: snippet.author_id, scope: { type: 'Snippet', projectId: access.project.id, key: { column: 'noteable_id', value: snippet.id } } };
  },
});
