// `npm run docs:api`: writes docs/api-coverage.md, the endpoints Cairn serves, from the route table
// (`app.routeTable`: every route declared with route(), src/api/route.ts). test/api/api_docs.test.ts
// fails when the committed file differs from what the route table gives.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Access } from '../src/api/route.js';
import { API_PREFIX, tagOf } from '../src/api/openapi/document.js';
import type { RouteRecord } from '../src/plugins/responses.js';

export const API_COVERAGE = path.resolve(import.meta.dirname, '..', 'docs', 'api-coverage.md');

const METHOD_ORDER = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
/** git over HTTP is declared once per depth of the repository path (`/:p0/:p1/info/refs` ...). */
const DEPTH_PARAMS = /^((?:\/:p\d+)+)\//;

/**
 * Collections the OpenAPI tags name on their own that GitLab documents with their parent
 * resource: a merge request's diffs, a commit's statuses, a user's status... A new collection
 * not named here is its own resource until it is added.
 */
const FOLDED: Record<string, string> = {
  approvals: 'merge_requests', cancel_merge_when_pipeline_succeeds: 'merge_requests', changes: 'merge_requests',
  closes_issues: 'merge_requests', diffs: 'merge_requests',
  blobs: 'repository', contributors: 'repository', merged_branches: 'branches',
  comments: 'commits', refs: 'commits', statuses: 'commits',
  allowed_agents: 'jobs', bridges: 'jobs', job: 'jobs',
  followers: 'users', identities: 'users', starred_projects: 'users', status: 'users', user: 'users',
  descendant_groups: 'groups', subgroups: 'groups', exists: 'namespaces',
  forks: 'projects', starrers: 'projects',
  billable_members: 'members', memberships: 'members',
  group_repository_storage_moves: 'repository_storage_moves', project_repository_storage_moves: 'repository_storage_moves',
  snippet_repository_storage_moves: 'repository_storage_moves',
  metadata: 'version and metadata', openapi: 'version and metadata', version: 'version and metadata',
};

/** The resource a route belongs to: the REST API's collection (as the OpenAPI tags, folded as above), or what else it serves. */
function areaOf(url: string): string {
  if (url.startsWith(API_PREFIX)) {
    if (url.includes('/award_emoji')) return 'award_emoji';
    // Triggering a pipeline with a trigger token is documented with the tokens, a schedule's
    // variables and pipelines with the schedules, instance variables with the others.
    if (url.endsWith('/trigger/pipeline')) return 'triggers';
    if (url.includes('/pipeline_schedules')) return 'pipeline_schedules';
    // A hook's delivery log and test deliveries are documented with the hooks.
    if (/\/hooks(\/|$)/.test(url)) return 'hooks';
    if (url.startsWith(`${API_PREFIX}admin/ci/variables`)) return 'variables';
    const tag = tagOf(url);
    return FOLDED[tag] ?? tag;
  }
  if (DEPTH_PARAMS.test(url)) return 'git over HTTP';
  if (url.startsWith('/oauth/') || url.startsWith('/.well-known/')) return url.startsWith('/oauth/applications') ? 'pages' : 'OAuth 2.0';
  if (url.startsWith('/users/') || url.startsWith('/-/user_settings/')) return 'pages';
  if (url.startsWith('/-/')) return 'monitoring';
  return 'other';
}

/** Areas outside the REST API come after it, in this order. */
const OTHER_AREAS = ['git over HTTP', 'OAuth 2.0', 'pages', 'monitoring', 'other'];

function whoMayCall(access: Access | undefined): string {
  if (!access) return 'undeclared';
  if ('public' in access) return 'anyone';
  if ('admin' in access && !('custom' in access)) return 'administrators';
  if ('project' in access) {
    const extra = [
      access.signedIn ? 'signed in' : '',
      access.writable ? 'writable repository' : '',
      access.writesRepository ? 'writes the repository: push rights are the service\'s check' : '',
    ].filter(Boolean);
    return `project: \`${access.project}\`${extra.length ? ` (${extra.join(', ')})` : ''}`;
  }
  if ('group' in access) return `group: \`${access.group}\`${access.signedIn ? ' (signed in)' : ''}`;
  if ('custom' in access) return access.custom;
  return 'signed in';
}

function successCodes(route: RouteRecord): string {
  return Object.keys(route.response ?? {})
    .filter((code) => Number(code) >= 200 && Number(code) < 400)
    .sort()
    .join(', ');
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

interface Row {
  area: string;
  method: string;
  url: string;
  who: string;
  answers: string;
}

/** The routes as rows: HEAD (Fastify's own for each GET) left out, git over HTTP's depths folded into one row each. */
function rowsOf(routeTable: RouteRecord[]): Row[] {
  const rows = new Map<string, Row>();
  const depths = new Map<string, number[]>();
  for (const r of routeTable) {
    if (r.method === 'HEAD') continue;
    let url = r.url;
    const depth = DEPTH_PARAMS.exec(url);
    if (depth) {
      url = `/:namespace/:project(.git)/${url.slice(depth[0].length)}`;
      const key = `${r.method} ${url}`;
      depths.set(key, [...(depths.get(key) ?? []), depth[1].split('/').length - 1]);
    }
    const key = `${r.method} ${url}`;
    if (!rows.has(key)) rows.set(key, { area: areaOf(r.url), method: r.method, url, who: whoMayCall(r.access), answers: successCodes(r) });
  }
  for (const [key, counts] of depths) {
    const row = rows.get(key)!;
    row.who = `${row.who}; the repository path is ${Math.min(...counts)} to ${Math.max(...counts)} segments (${/lfs\//.test(row.url) ? "a project's full path" : "a project's full path, or a snippet's"})`;
  }
  const areaRank = (area: string) => (OTHER_AREAS.includes(area) ? `1${OTHER_AREAS.indexOf(area)}` : `0${area}`);
  return [...rows.values()].sort((a, b) =>
    areaRank(a.area).localeCompare(areaRank(b.area)) ||
    a.url.localeCompare(b.url) ||
    METHOD_ORDER.indexOf(a.method) - METHOD_ORDER.indexOf(b.method),
  );
}

/** docs/api-coverage.md for a route table. */
export function apiCoverageMarkdown(routeTable: RouteRecord[]): string {
  const rows = rowsOf(routeTable);
  const areas = [...new Set(rows.map((r) => r.area))];
  // Cairn's own endpoints under /api/v4 (the runner's cache storage) say so in their access rule.
  const apiRows = rows.filter((r) => r.url.startsWith(API_PREFIX) && !r.who.includes("not GitLab's API")).length;
  const out: string[] = [
    '# API coverage',
    '',
    '<!-- Generated from the route table by `npm run docs:api` (scripts/api-docs.ts); do not edit by hand. -->',
    '',
    `Every endpoint Cairn serves: ${apiRows} of GitLab's REST API v4 and ${rows.length - apiRows} others (git over HTTP,`,
    "OAuth 2.0, the HTML pages, monitoring, Cairn's runner cache), grouped by resource. Each is declared with `route()`",
    '(`src/api/route.ts`), which is where this list comes from, so everything listed is implemented',
    '(status) and is checked by the route table, permission matrix and OpenAPI tests. "Who may call"',
    'is the access rule the route declares (a project or group ability is the one `src/policies/abilities.ts`',
    'decides); "answers" are its success statuses, errors being GitLab\'s bodies. An endpoint of GitLab\'s',
    'that is not here is not implemented: Cairn answers it `404 {"error":"404 Not Found"}`. The request',
    'and response forms of the REST API are in the OpenAPI document at `GET /api/v4/openapi.json`.',
    '',
    '| resource | endpoints |',
    '|---|---|',
    ...areas.map((area) => `| [${area}](#${anchor(area)}) | ${rows.filter((r) => r.area === area).length} |`),
  ];
  for (const area of areas) {
    out.push('', `## ${area}`, '', '| resource | endpoint | who may call | answers | status |', '|---|---|---|---|---|');
    for (const r of rows.filter((x) => x.area === area)) {
      out.push(`| ${cell(area)} | \`${r.method} ${r.url}\` | ${cell(r.who)} | ${r.answers} | implemented |`);
    }
  }
  return out.join('\n') + '\n';
}

/** GitHub's heading anchors: lower case, spaces to dashes, punctuation other than - and _ dropped. */
function anchor(heading: string): string {
  return heading.toLowerCase().replace(/[^a-z0-9 _-]/g, '').replace(/ /g, '-');
}

/** The route table of a freshly built app (on a throwaway embedded database). */
async function collectRouteTable(): Promise<RouteRecord[]> {
  const { buildApp } = await import('../src/app.js');
  const { loadConfig } = await import('../src/config.js');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-api-docs-'));
  try {
    const config = loadConfig({ CAIRN_DATA_DIR: dataDir, CAIRN_ROOT_PASSWORD: 'api-docs-only-password' }, { databaseUrl: null, logLevel: 'silent' });
    const app = await buildApp({ config, logger: false });
    await app.ready();
    const table = [...app.routeTable];
    await app.close();
    return table;
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const markdown = apiCoverageMarkdown(await collectRouteTable());
  const before = fs.existsSync(API_COVERAGE) ? fs.readFileSync(API_COVERAGE, 'utf8') : '';
  if (markdown !== before) fs.writeFileSync(API_COVERAGE, markdown);
  console.log(markdown !== before ? 'docs/api-coverage.md updated' : 'docs/api-coverage.md up to date');
}
