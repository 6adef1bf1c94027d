import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import { forbidden, invalidParam } from '../../plugins/errors.js';
import { checkRateLimit } from '../../plugins/rate_limit.js';
import { ChangelogSchema } from '../../presenters/schemas/repository.js';
import { canPushToBranch } from '../../policies/branches.js';
import { assertRepositoryWritable } from '../../policies/code.js';
import {
  changelogNotes,
  commitChangelog,
  DEFAULT_FILE,
  DEFAULT_TRAILER,
  parseReleaseDate,
  UNBOUNDED_SEMVER,
  type ChangelogInput,
} from '../../services/changelog.js';
import { IdParams } from '../params.js';
import { projectOf, route } from '../route.js';

/**
 * GET /projects/:id/repository/changelog (the release notes of a version) and POST (the same
 * section committed into the changelog file). Anyone who can read the code may generate; only
 * who may push to the branch may commit.
 */

const ReleaseParams = {
  version: Type.String(),
  from: Type.Optional(Type.String()),
  to: Type.Optional(Type.String()),
  date: Type.Optional(Type.String()),
  trailer: Type.Optional(Type.String()),
  config_file: Type.Optional(Type.String()),
};
const GenerateQuery = Type.Object(ReleaseParams);
const CommitBody = Type.Object({
  ...ReleaseParams,
  branch: Type.Optional(Type.String()),
  file: Type.Optional(Type.String()),
  message: Type.Optional(Type.String()),
});

const RATE_LIMITED = { message: { error: 'This changelog has been requested too many times. Try again later.' } };
const NO_COMMIT_RIGHTS = 'You are not allowed to commit a changelog on this branch';

function releaseInput(p: Static<typeof GenerateQuery>): ChangelogInput {
  if (!UNBOUNDED_SEMVER.test(p.version)) throw invalidParam('version');
  const date = p.date === undefined ? undefined : parseReleaseDate(p.date);
  if (date === null) throw invalidParam('date');
  return {
    version: p.version,
    from: p.from || undefined,
    to: p.to || undefined,
    date,
    trailer: p.trailer ?? DEFAULT_TRAILER,
    configFile: p.config_file || undefined,
  };
}

async function limitRate(request: FastifyRequest) {
  const { project } = projectOf(request);
  await checkRateLimit(request, { name: `changelog:project:${project.id}`, limit: request.server.cairn.config.changelogRateLimit, body: RATE_LIMITED });
}

export default async function changelogRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  app.get('/api/v4/projects/:id/repository/changelog', route({ matrix: 'readCode',
    access: { project: 'download_code' },
    schema: { params: IdParams, querystring: GenerateQuery, response: { 200: ChangelogSchema } },
  }), async (request) => {
    const input = releaseInput(request.query);
    await limitRate(request);
    const { project, user } = projectOf(request);
    return { notes: await changelogNotes(cairn, project, user, input) };
  });

  app.post('/api/v4/projects/:id/repository/changelog', route({ matrix: 'readCode',
    access: { project: 'download_code' },
    schema: { params: IdParams, body: CommitBody, response: { 200: Type.Integer({ description: 'the status, as GitLab answers it' }) } },
  }), async (request, reply) => {
    const body = request.body;
    const input: ChangelogInput = { ...releaseInput(body), branch: body.branch || undefined, file: body.file ?? DEFAULT_FILE, message: body.message || undefined };
    await limitRate(request);
    const { project, user, accessLevel } = projectOf(request);
    const branch = input.branch ?? project.default_branch ?? 'main';
    if (!user || project.archived) throw forbidden(NO_COMMIT_RIGHTS);
    if (!(await canPushToBranch(cairn.db, project, user, accessLevel, branch)).allowed) throw forbidden(NO_COMMIT_RIGHTS);
    assertRepositoryWritable(project);
    await commitChangelog(cairn, project, user, accessLevel, { ...input, branch });
    return reply.code(200).send(200);
  });
}
