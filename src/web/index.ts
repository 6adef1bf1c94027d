import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { RawBody, route } from '../api/route.js';
import { ASSETS } from './layout.js';
import { registerMergeRequestPages } from './pages/merge_requests.js';
import { registerIssuePages } from './pages/issues.js';
import { registerProjectPages } from './pages/project.js';
import { registerSnippetPages } from './pages/snippets.js';
import { registerJobPages } from './pages/jobs.js';
import { registerPipelinePages } from './pages/pipelines.js';
import { registerSettingsPages } from './pages/settings.js';
import { stopLogStreams } from './log_stream.js';
import { registerFilesPages } from './pages/files.js';
import { registerBranchPages } from './pages/branches.js';
import { registerDashboardPages } from './pages/dashboard.js';
import { PageRegistry, registerPageRoutes } from './router.js';

/**
 * The web interface: server-rendered pages at GitLab's paths (src/web/pages/), one style sheet
 * and one small script (src/web/assets/). Each page module registers its pages here.
 */
export function pageRegistry(): PageRegistry {
  const pages = new PageRegistry();
  registerProjectPages(pages);
  registerMergeRequestPages(pages);
  registerIssuePages(pages);
  registerSnippetPages(pages);
  registerPipelinePages(pages);
  registerJobPages(pages);
  registerSettingsPages(pages);
  registerFilesPages(pages);
  registerBranchPages(pages);
  registerDashboardPages(pages);
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
  // Live job logs are held responses: they end before the server waits for its connections.
  app.addHook('preClose', async () => stopLogStreams(app.cairn));
  registerPageRoutes(app, pageRegistry());
}
