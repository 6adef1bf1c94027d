import type { FastifyInstance } from 'fastify';
import { LivenessSchema, ReadinessSchema, VersionSchema } from '../../presenters/schemas/meta.js';
import { CAIRN_VERSION, GITLAB_COMPAT_VERSION } from '../../version.js';
import { RawBody, route } from '../route.js';

const versionBody = () => ({
  version: GITLAB_COMPAT_VERSION,
  revision: `cairn-${CAIRN_VERSION}`,
  kas: { enabled: false, externalUrl: null, externalK8sProxyUrl: null, version: null },
  enterprise: false,
});

export default async function metaRoutes(app: FastifyInstance) {
  const version = route({ matrix: 'signedIn',  access: { signedIn: true }, schema: { response: { 200: VersionSchema } } });
  app.get('/api/v4/version', version, async () => versionBody());
  app.get('/api/v4/metadata', version, async () => versionBody());

  // Probes for load balancers and orchestrators: no credential is even looked at.
  const health = { access: { public: true }, config: { skipApiAuth: true } } as const;
  app.get('/-/health', route({ matrix: 'public',  ...health, schema: { response: { 200: RawBody('text/plain') } } }), async (_req, reply) => reply.type('text/plain').send('GitLab OK'));
  app.get('/-/liveness', route({ matrix: 'public',  ...health, schema: { response: { 200: LivenessSchema } } }), async () => ({ status: 'ok' }));
  app.get('/-/readiness', route({ matrix: 'public',  ...health, schema: { response: { 200: ReadinessSchema, 503: ReadinessSchema } } }), async (request, reply) => {
    // Stopping (GitLab's shutdown blackout): still serving, but no longer to be sent requests.
    if (app.cairn.draining) return reply.code(503).send({ status: 'failed', master_check: [{ status: 'failed', message: 'shutting down' }], db_check: [{ status: 'ok' }] });
    try {
      await app.cairn.db.selectFrom('users').select('id').limit(1).execute();
      return { status: 'ok', master_check: [{ status: 'ok' }], db_check: [{ status: 'ok' }] };
    } catch (err) {
      request.log.warn({ err }, 'readiness: database check failed');
      return reply.code(503).send({ status: 'failed', master_check: [{ status: 'ok' }], db_check: [{ status: 'failed', message: 'database unreachable' }] });
    }
  });
}
