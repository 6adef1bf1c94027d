import type { FastifyInstance } from 'fastify';
import { CAIRN_VERSION, GITLAB_COMPAT_VERSION } from '../../version.js';

const versionBody = () => ({
  version: GITLAB_COMPAT_VERSION,
  revision: `cairn-${CAIRN_VERSION}`,
  kas: { enabled: false, externalUrl: null, externalK8sProxyUrl: null, version: null },
  enterprise: false,
});

export default async function metaRoutes(app: FastifyInstance) {
  app.get('/api/v4/version', { config: { auth: 'required' } }, async () => versionBody());
  app.get('/api/v4/metadata', { config: { auth: 'required' } }, async () => versionBody());

  const health = { config: { skipApiAuth: true } };
  app.get('/-/health', health, async (_req, reply) => reply.type('text/plain').send('GitLab OK'));
  app.get('/-/liveness', health, async () => ({ status: 'ok' }));
  app.get('/-/readiness', health, async (request, reply) => {
    try {
      await app.cairn.db.selectFrom('users').select('id').limit(1).execute();
      return { status: 'ok', master_check: [{ status: 'ok' }], db_check: [{ status: 'ok' }] };
    } catch (err) {
      request.log.warn({ err }, 'readiness: database check failed');
      return reply.code(503).send({ status: 'failed', master_check: [{ status: 'ok' }], db_check: [{ status: 'failed', message: 'database unreachable' }] });
    }
  });
}
