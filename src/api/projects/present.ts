import type { FastifyRequest } from 'fastify';
import { loadProjectExtras } from '../../finders/projects.js';
import { presentProject, presentProjectSimple, presentProjectWithAccess, type ProjectRow } from '../../presenters/projects.js';
import { readmePaths } from '../../services/projects.js';
import type { PresentContext } from '../../presenters/users.js';

export type ProjectForm = 'simple' | 'full' | 'with_access';

export function presentContext(request: FastifyRequest): PresentContext {
  return { baseUrl: request.server.cairn.config.externalUrl };
}

/**
 * Preloads what the project presenters need for a whole list (a fixed number of queries and
 * a few git calls for README lookups), then presents each row in the chosen form.
 */
export async function renderProjects(request: FastifyRequest, rows: ProjectRow[], form: ProjectForm, knownAccessLevel?: number) {
  const cairn = request.server.cairn;
  const user = request.actor?.user ?? null;
  const extras = rows.length === 1
    ? await cairn.cache.load(`project-extras:${user?.id ?? 0}:${rows[0].id}:${knownAccessLevel ?? ''}`, () => loadProjectExtras(cairn.db, user, rows, knownAccessLevel))
    : await loadProjectExtras(cairn.db, user, rows, knownAccessLevel);
  const levels = new Map([...extras].map(([id, x]) => [id, x.accessLevel]));
  const readmes = await readmePaths(cairn, rows, levels);
  const ctx = presentContext(request);
  const present = form === 'simple' ? presentProjectSimple : form === 'full' ? presentProject : presentProjectWithAccess;
  return rows.map((r) => present(ctx, r, { ...extras.get(r.id)!, readmePath: readmes.get(r.id) ?? null }));
}

/** One project; pass the caller's effective level when the request already computed it. */
export async function renderProject(request: FastifyRequest, row: ProjectRow, form: ProjectForm, knownAccessLevel?: number) {
  return (await renderProjects(request, [row], form, knownAccessLevel))[0];
}

/** The list form GitLab picks: simple when asked or anonymous, with permissions for signed-in callers. */
export function listForm(request: FastifyRequest, simple: boolean | undefined): ProjectForm {
  if (simple || !request.actor) return 'simple';
  return 'with_access';
}
