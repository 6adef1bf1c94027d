import { contributePreset, readPreset } from '../permissions.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { AWARDABLES, type AwardableKind } from '../../awardables/index.js';
import { findNote, type NoteableType } from '../../finders/notes.js';
import { can } from '../../policies/abilities.js';
import { notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentAwardEmoji } from '../../presenters/award_emoji.js';
import { AwardEmojiSchema } from '../../presenters/schemas/award_emoji.js';
import { addAward, findAward, listAwards, removeAward } from '../../services/award_emoji.js';
import { RowId } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';

/**
 * GitLab's emoji reactions API for every registered awardable (src/awardables/): one
 * implementation of list, get, award and delete, served under each kind's prefix and, for kinds
 * with notes, under each of their notes.
 */

/** What the path names: the awardable's type and id. */
interface Target {
  type: string;
  id: number;
  /** A system note (GitLab's Note#emoji_awardable? is false for them). */
  system?: boolean;
}

/** The kind's record, or its note (404 "Note" is GitLab's "404 Not found" for a note not on it). */
async function loadTarget(kind: AwardableKind, request: FastifyRequest, onNote: boolean): Promise<Target> {
  const cairn = request.server.cairn;
  const access = projectOf(request);
  const params = request.params as Record<string, unknown>;
  const found = await kind.find({ cairn, access, params });
  if (!onNote) return { type: kind.type, id: found.id };
  const note = await findNote(cairn.db, { type: kind.type as NoteableType, projectId: null, key: { column: 'noteable_id', value: found.id } }, Number(params.note_id));
  if (!note) throw notFound();
  return { type: 'Note', id: note.id, system: note.system };
}

const ctxOf = (request: FastifyRequest) => ({ baseUrl: request.server.cairn.config.externalUrl, viewer: request.actor?.user ?? null });

export default async function awardEmojiRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = app.cairn.db;

  for (const kind of AWARDABLES) {
    for (const onNote of [false, true]) {
      if (onNote && !kind.notes) continue;
      const base = `/api/v4${kind.prefix}${onNote ? '/notes/:note_id' : ''}/award_emoji`;
      const pathParams = { id: Type.String(), ...kind.params, ...(onNote ? { note_id: RowId } : {}) };
      const Params = Type.Object(pathParams);
      const AwardParams = Type.Object({ ...pathParams, award_id: RowId });
      const read = { project: kind.read, ...(kind.signedIn ? { signedIn: true as const } : {}) };

      app.get(base, route({ matrix: readPreset(kind.read),
        access: read,
        paginated: true,
        schema: { params: Params, response: { 200: Type.Array(AwardEmojiSchema) } },
      }), async (request, reply) => {
        const target = await loadTarget(kind, request, onNote);
        const page = pageParams(request);
        const { rows, total } = await listAwards(db, target.type, target.id, { limit: page.perPage, offset: page.offset });
        setPaginationHeaders(request, reply, page, total);
        const ctx = ctxOf(request);
        return rows.map((a) => presentAwardEmoji(ctx, a));
      });

      app.get(`${base}/:award_id`, route({ matrix: readPreset(kind.read),
        access: read,
        schema: { params: AwardParams, response: { 200: AwardEmojiSchema } },
      }), async (request) => {
        const target = await loadTarget(kind, request, onNote);
        return presentAwardEmoji(ctxOf(request), await findAward(db, target.type, target.id, request.params.award_id as number));
      });

      app.post(base, route({ matrix: contributePreset(kind.read),
        access: { project: kind.read, signedIn: true },
        schema: { params: Params, body: Type.Object({ name: Type.String() }), response: { 201: AwardEmojiSchema } },
      }), async (request, reply) => {
        const access = projectOf(request);
        const target = await loadTarget(kind, request, onNote);
        if (!can(access.user, 'award_emoji', access)) throw notFound('Award Emoji');
        if (target.system) throw notFound('Award Emoji Awardable cannot be awarded emoji');
        const award = await addAward(db, { type: target.type, id: target.id, user: access.user!, name: request.body.name });
        return reply.code(201).send(presentAwardEmoji(ctxOf(request), award));
      });

      app.delete(`${base}/:award_id`, route({
        // Only whoever awarded it (the fixture's are root's) and administrators remove an award:
        // others who may react get GitLab's unauthorized! (401).
        matrix: { is: 'admin', reads: contributePreset(kind.read), refused: 401 },
        access: { project: kind.read, signedIn: true },
        schema: { params: AwardParams, response: { 204: NoContent } },
      }), async (request, reply) => {
        const access = projectOf(request);
        const target = await loadTarget(kind, request, onNote);
        const award = await findAward(db, target.type, target.id, request.params.award_id as number);
        await removeAward(db, award, access.user!);
        return reply.code(204).send();
      });
    }
  }
}
