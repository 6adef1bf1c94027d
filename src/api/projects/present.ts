import type { FastifyRequest } from 'fastify';
import { listProjects, loadProjectExtras } from '../../finders/projects.js';
import { registrationTokens } from '../../ci/runners.js';
import { can, featureAvailable } from '../../policies/abilities.js';
import { presentProject, presentProjectSimple, presentProjectWithAccess, type ProjectExtras, type ProjectRow } from '../../presenters/projects.js';
import { readmePaths } from '../../services/projects.js';
import type { PresentContext } from '../../presenters/users.js';

export type ProjectForm = 'simple' | 'full' | 'with_access';

export function presentContext(request: FastifyRequest): PresentContext {
  const { config } = request.server.cairn;
  return { baseUrl: config.externalUrl, sshPort: config.sshPort, viewer: request.actor?.user ?? null };
}

/**
 * Preloads what the project presenters need for a whole list (one query, and README lookups
 * kept in the cache), then presents each row in the chosen form. `complete` is
 * false when a repository could not be read (its README shows as none).
 */
export async function presentProjects(request: FastifyRequest, rows: ProjectRow[], form: ProjectForm, knownAccessLevel?: number) {
  const cairn = request.server.cairn;
  const user = request.actor?.user ?? null;
  const extras = await loadProjectExtras(cairn.db, user, rows, knownAccessLevel);
  const levels = new Map([...extras].map(([id, x]) => [id, x.accessLevel]));
  const readmes = await readmePaths(cairn, rows, levels, request.cacheGeneration);
  const ctx = presentContext(request);
  const present = form === 'simple' ? presentProjectSimple : form === 'full' ? presentProject : presentProjectWithAccess;
  const complete = rows.every((r) => readmes.has(r.id) || !featureAvailable({ project: r, accessLevel: levels.get(r.id) ?? 0 }, 'repository'));
  const sources = form === 'simple' ? new Map() : await loadForkSources(request, [...extras.values()].map((x) => x.forkedFromId));
  // runners_token: decrypted for the projects the caller maintains (the presenter's own check).
  const maintained = form === 'simple' ? [] : rows.filter((r) => can(user, 'admin_project', { project: r, accessLevel: levels.get(r.id) ?? 0 })).map((r) => r.id);
  const tokens = await registrationTokens(cairn, 'project_type', maintained);
  return {
    bodies: rows.map((r) => {
      const x = extras.get(r.id)!;
      return present(ctx, r, {
        ...x,
        readmePath: readmes.get(r.id) ?? null,
        forkedFrom: x.forkedFromId ? sources.get(x.forkedFromId) : undefined,
        runnersToken: tokens.get(r.id),
      });
    }),
    complete,
  };
}

/**
 * The projects a page's forks were forked from, those the caller may read (the finder's
 * visibility rule), with what their simple form needs: shown as `forked_from_project`.
 */
async function loadForkSources(request: FastifyRequest, ids: (number | null | undefined)[]): Promise<Map<number, { row: ProjectRow; extras: ProjectExtras }>> {
  const wanted = [...new Set(ids.filter((id): id is number => !!id))];
  const out = new Map<number, { row: ProjectRow; extras: ProjectExtras }>();
  if (!wanted.length) return out;
  const cairn = request.server.cairn;
  const user = request.actor?.user ?? null;
  const { rows } = await listProjects(cairn.db, user, { ids: wanted }, { limit: wanted.length, offset: 0, withTotal: false });
  const extras = await loadProjectExtras(cairn.db, user, rows);
  const readmes = await readmePaths(cairn, rows, new Map([...extras].map(([id, x]) => [id, x.accessLevel])), request.cacheGeneration);
  for (const row of rows) out.set(row.id, { row, extras: { ...extras.get(row.id)!, readmePath: readmes.get(row.id) ?? null } });
  return out;
}

export async function renderProjects(request: FastifyRequest, rows: ProjectRow[], form: ProjectForm, knownAccessLevel?: number) {
  return (await presentProjects(request, rows, form, knownAccessLevel)).bodies;
}

/** One project; pass the caller's effective level when the request already computed it. */
export async function renderProject(request: FastifyRequest, row: ProjectRow, form: ProjectForm, knownAccessLevel?: number) {
  return (await renderProjects(request, [row], form, knownAccessLevel))[0];
}

/**
 * One project as JSON text, kept in the cache per caller. The row and level were read earlier in
 * the request, so the text is kept only if nothing was written since the request began.
 */
export async function cachedProjectJson(request: FastifyRequest, row: ProjectRow, form: ProjectForm, accessLevel: number): Promise<string> {
  const cache = request.server.cairn.cache;
  const key = `project-json:${form}:${request.actor?.user.id ?? 0}:${row.id}:${accessLevel}`;
  const entry = await cache.load(
    key,
    async () => {
      const { bodies, complete } = await presentProjects(request, [row], form, accessLevel);
      return { json: JSON.stringify(bodies[0]), complete };
    },
    { since: request.cacheGeneration, keep: (e) => e.complete },
  );
  return entry.json;
}

/** The list form GitLab picks: simple when asked or anonymous, with permissions for signed-in callers. */
export function listForm(request: FastifyRequest, simple: boolean | undefined): ProjectForm {
  if (simple || !request.actor) return 'simple';
  return 'with_access';
}
