import { contributePreset, readPreset } from '../permissions.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { findNote } from '../../finders/notes.js';
import { NOTEABLES, type ProjectNoteableKind } from '../../noteables/index.js';
import { can } from '../../policies/abilities.js';
import { notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentAwardEmoji } from '../../presenters/award_emoji.js';
import { AwardEmojiSchema } from '../../presenters/schemas/award_emoji.js';
import { addAward, findAward, listAwards, removeAward } from '../../services/award_emoji.js';
import { RowId } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';

/**
 * GitLab's emoji reactions API for every registered kind that takes `awards` (src/noteables/):
 * one implementation of list, get, award and delete, served under each kind's prefix and under
 * each of its notes. Who may award: whoever may read the thing and has the project's award_emoji
 * ability; only the awarder or an administrator removes an award.
 */

/** What the path names: the awardable's type and id. */
interface Target {
  type: string;
  id: number;
  /** A system note (GitLab's Note#emoji_awardable? is false for them). */
  system?: boolean;
}

/** The kind's record, or its note (404 "Note" is GitLab's "404 Not found" for a note not on it). */
async function loadTarget(kind: ProjectNoteableKind, request: FastifyRequest, onNote: boolean): Promise<Target> {
  const cairn = request.server.cairn;
  const access = projectOf(request);
  const params = request.params as Record<string, unknown>;
  const found = await kind.find({ cairn, access, params });
  const id = found.id!;
  if (!onNote) return { type: kind.type, id };
  const note = await findNote(cairn.db, { type: kind.type, projectId: null, key: { column: 'noteable_id', value: id } }, Number(params.note_id));
  if (!note) throw notFound();
  return { type: 'Note', id: note.id, system: note.system };
}

const ctxOf = (request: FastifyRequest) => ({ baseUrl: request.server.cairn.config.externalUrl, viewer: request.actor?.user ?? null });

export default async function awardEmojiRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = app.cairn.db;

  for (const kind of NOTEABLES) {
    if (!kind.awards || kind.parent !== 'project') continue;
    for (const onNote of [false, true]) {
      const base = `/api/v4${kind.prefix}${onNote ? '/notes/:note_id' : ''}/award_emoji`;
      const pathParams = { id: Type.String(), ...kind.params, ...(onNote ? { note_id: RowId } : {}) };
      const Params = Type.Object(pathParams);
      const AwardParams = Type.Object({ ...pathParams, award_id: RowId });
      const readAbility = kind.abilities.read;
      const read = { project: readAbility, ...(kind.signedIn ? { signedIn: true as const } : {}) };

      app.get(base, route({ matrix: readPreset(readAbility),
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

      app.get(`${base}/:award_id`, route({ matrix: readPreset(readAbility),
        access: read,
        schema: { params: AwardParams, response: { 200: AwardEmojiSchema } },
      }), async (request) => {
        const target = await loadTarget(kind, request, onNote);
        return presentAwardEmoji(ctxOf(request), await findAward(db, target.type, target.id, request.params.award_id as number));
      });

      app.post(base, route({ matrix: contributePreset(readAbility),
        access: { project: readAbility, signedIn: true },
        schema: { params: Params, body: Type.Object({ name: Type.String() }), response: { 201: AwardEmojiSchema } },
      }), async (request, reply) => {
        const access = projectOf(request);
        const target = await loadTarget(kind, request, onNote);
        if (!can(access.user, 'award_emoji', access)) throw notFound('Award Emoji');
        if (target.system) throw notFound('Award Emoji Awardable cannot be awarded emoji');
        const award = await addAward(db, { type: target.type, id: target.id, user: access.user!, name: request.body.name }, { config: app.cairn.config, projectId: access.project.id });
        return reply.code(201).send(presentAwardEmoji(ctxOf(request), award));
      });

      app.delete(`${base}/:award_id`, route({
        // Only whoever awarded it (the fixture's are root's) and administrators remove an award:
        // others who may react get GitLab's unauthorized! (401).
        matrix: { is: 'admin', reads: contributePreset(readAbility), refused: 401 },
        access: { project: readAbility, signedIn: true },
        schema: { params: AwardParams, response: { 204: NoContent } },
      }), async (request, reply) => {
        const access = projectOf(request);
        const target = await loadTarget(kind, request, onNote);
        const award = await findAward(db, target.type, target.id, request.params.award_id as number);
        await removeAward(db, award, access.user!, { config: app.cairn.config, projectId: access.project.id });
        return reply.code(204).send();
      });
    }
  }
}
