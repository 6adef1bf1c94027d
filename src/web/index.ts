import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { RawBody, route } from '../api/route.js';
import { ASSETS } from './layout.js';
import { registerCommitPages } from './pages/commits.js';
import { registerProjectPages } from './pages/project.js';
import { PageRegistry, registerPageRoutes } from './router.js';

/**
 * The web interface: server-rendered pages at GitLab's paths (src/web/pages/), one style sheet
 * and one small script (src/web/assets/). Each page module registers its pages here.
 */
export function pageRegistry(): PageRegistry {
  const pages = new PageRegistry();
  registerProjectPages(pages);
  registerCommitPages(pages);
  return pages;
}

export default async function webRoutes(app: FastifyInstance) {
  for (const asset of Object.values(ASSETS)) {
    app.get(asset.path, route({ matrix: 'public',
      access: { public: true },
      config: { skipApiAuth: true },
      schema: { response: { 200: RawBody(asset.type) } },
    }), async (_request, reply) =>
      reply.headers({ 'content-type': asset.type, 'cache-control': 'public, max-age=31536000, immutable' }).send(asset.body));
  }
  registerPageRoutes(app, pageRegistry());
}
