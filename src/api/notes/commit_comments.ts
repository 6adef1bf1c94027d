import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { listNotes } from '../../finders/notes.js';
import { commitNoteable } from '../../noteables/index.js';
import { forbidden } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { requireUser } from '../../plugins/auth.js';
import { can } from '../../policies/abilities.js';
import { presentCommitNote } from '../../presenters/notes.js';
import { CommitNoteSchema } from '../../presenters/schemas/notes.js';
import { createCommitComment, noteText } from '../../services/notes.js';
import { ShaParams } from '../params.js';
import { projectOf, route } from '../route.js';

const CommentBody = Type.Object({
  note: Type.String(),
  path: Type.Optional(Type.String()),
  line: Type.Optional(Type.Integer()),
  line_type: Type.Optional(Type.Union([Type.Literal('new'), Type.Literal('old')])),
});

/**
 * The commits API's comments: commit notes in their own "commit comment" form (note, author,
 * created_at, path, line, line_type), over the commit noteable and the one notes table.
 */
export default async function commitCommentRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = fastify.cairn;
  const ctx = { baseUrl: cairn.config.externalUrl };
  const base = '/api/v4/projects/:id/repository/commits/:sha/comments';

  app.get(base, route({ matrix: 'readCode',
    access: { project: commitNoteable.abilities.read },
    paginated: true,
    schema: { params: ShaParams, response: { 200: Type.Array(CommitNoteSchema) } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const { scope } = await commitNoteable.find({ cairn, access, params: request.params });
    const page = pageParams(request);
    const { notes, total } = await listNotes(cairn.db, scope, { orderBy: 'created_at', sort: 'asc', activity: 'all_notes' }, { offset: page.offset, limit: page.perPage });
    setPaginationHeaders(request, reply, page, total);
    return notes.map((n) => presentCommitNote(ctx, n));
  });

  app.post(base, route({ matrix: 'readCode',
    // Readers of the commit get this far, so that an anonymous caller learns nothing of a
    // private project (404) and is asked to sign in on a public one (401); then create_commit_note.
    access: { project: 'read_commit_note' },
    schema: { params: ShaParams, body: CommentBody, response: { 201: CommitNoteSchema } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const user = requireUser(request);
    if (!can(user, 'create_commit_note', { project: access.project, accessLevel: access.accessLevel })) throw forbidden();
    const { record: commit } = await commitNoteable.find({ cairn, access, params: request.params });
    const note = await createCommitComment(cairn, {
      project: access.project,
      user,
      commit,
      note: noteText(request.body.note, 'note'),
      path: request.body.path,
      line: request.body.line,
      lineType: request.body.line_type,
    });
    return reply.code(201).send(presentCommitNote(ctx, note));
  });
}
