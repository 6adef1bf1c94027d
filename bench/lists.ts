// List benchmark: GET /projects, /users, /groups and the four members lists, at 20 and 100 per
// page, as an administrator and as an ordinary user. The server runs in its own process
// (bench/lib.ts), on PostgreSQL when DATABASE_URL is set, on a fresh database.
// Seed: ~120 users, ~120 groups, ~120 projects (private, internal and public, some with a
// README), a project and a group with ~100 members each inside a parent group with members.
// Target: every list >= 2,000 req/s. The largest answer is also served as fixed bytes from a bare
// Fastify process (the floor): above some size, moving the bytes alone costs more than the target
// allows. Run: `node --import tsx bench/lists.ts [filter]`.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { api, BENCH_TOKEN, load, printTable, ROOT, startServer, type BenchServer, type LoadResult } from './lib.js';

export const LIST_TARGET_RPS = 2_000;

const USERS = Number(process.env.BENCH_LIST_USERS || 120);
const GROUPS = Number(process.env.BENCH_LIST_GROUPS || 120);
const PROJECTS = Number(process.env.BENCH_LIST_PROJECTS || 120);
const VISIBILITIES = ['private', 'internal', 'public'] as const;

/** Runs `fn` over `items`, `width` at a time (seeding takes long one by one). */
export async function inParallel<T, R>(items: T[], width: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i], i);
  }));
  return out;
}

export interface Seeded {
  userToken: string;
  projectId: number;
  groupId: number;
}

export async function seed(server: BenchServer): Promise<Seeded> {
  const started = Date.now();
  const users = await inParallel([...Array(USERS).keys()], 4, (i) =>
    api(server, 'POST', '/users', { username: `lister${i}`, name: `List User ${i}`, email: `lister${i}@example.com`, password: 'bench-password-1' }),
  );
  const viewer = users[0];
  const { token: userToken } = await api(server, 'POST', `/users/${viewer.id}/personal_access_tokens`, { name: 'bench', scopes: ['api'] });

  const parent = await api(server, 'POST', '/groups', { name: 'Bench Parent', path: 'bench-parent', visibility: 'internal' });
  const team = await api(server, 'POST', '/groups', { name: 'Bench Team', path: 'bench-team', visibility: 'internal', parent_id: parent.id });
  const groups = await inParallel([...Array(GROUPS - 2).keys()], 4, (i) =>
    api(server, 'POST', '/groups', { name: `Bench Group ${i}`, path: `bench-group-${i}`, visibility: VISIBILITIES[i % 3] }),
  );
  // The viewer belongs to some private groups (and sees the others only if public or internal).
  await inParallel(groups.filter((_, i) => i % 9 === 0), 4, (g) => api(server, 'POST', `/groups/${g.id}/members`, { user_id: viewer.id, access_level: 30 }));

  const project = await api(server, 'POST', '/projects', { name: 'bench-members', namespace_id: team.id, visibility: 'internal', initialize_with_readme: true });
  // In root's namespace, the (internal) team group and public groups; a project is at most as visible as its group.
  const publicGroups = groups.filter((_, i) => VISIBILITIES[i % 3] === 'public').slice(0, 10);
  const namespaces: { id: number | null; max: number }[] = [{ id: null, max: 2 }, { id: team.id, max: 1 }, ...publicGroups.map((g: { id: number }) => ({ id: g.id, max: 2 }))];
  const projects = await inParallel([...Array(PROJECTS - 1).keys()], 4, (i) => {
    const ns = namespaces[i % namespaces.length];
    return api(server, 'POST', '/projects', {
      name: `bench-list-${i}`,
      visibility: VISIBILITIES[Math.min(i % 3, ns.max)],
      initialize_with_readme: i % 2 === 0,
      ...(ns.id ? { namespace_id: ns.id } : {}),
    });
  });
  await inParallel(projects.filter((_, i) => i % 6 === 0), 4, (p) => api(server, 'POST', `/projects/${p.id}/members`, { user_id: viewer.id, access_level: 20 }));

  // Members: 20 on the parent group, 100 on the team group, 100 on the project (overlapping; a
  // project membership may not be below an inherited one).
  await inParallel(users.slice(1, 21), 4, (u) => api(server, 'POST', `/groups/${parent.id}/members`, { user_id: u.id, access_level: 10 }));
  await inParallel(users.slice(0, 100), 4, (u, i) => api(server, 'POST', `/groups/${team.id}/members`, { user_id: u.id, access_level: [10, 20, 30, 40][i % 4] }));
  await inParallel(users.slice(10, 110), 4, (u, i) =>
    api(server, 'POST', `/projects/${project.id}/members`, { user_id: u.id, access_level: 40, ...(i % 5 === 0 ? { expires_at: '2999-01-01' } : {}) }),
  );
  // What autovacuum does on a deployment (it is off on the development machine): statistics, so
  // that plans fit the data.
  if (server.env.DATABASE_URL) {
    const client = new pg.Client({ connectionString: server.env.DATABASE_URL });
    await client.connect();
    await client.query('analyze').finally(() => client.end());
  }
  console.log(`seeded ${USERS} users, ${GROUPS} groups, ${PROJECTS} projects and their members in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return { userToken, projectId: project.id, groupId: team.id };
}

export interface ListBenchRow extends LoadResult {
  ratio?: number;
}

export async function runListBench(filter = process.env.BENCH_LIST_FILTER ?? ''): Promise<ListBenchRow[]> {
  const server = await startServer();
  try {
    const { userToken, projectId, groupId } = await seed(server);
    const lists = [
      '/projects',
      '/users',
      '/groups',
      `/projects/${projectId}/members`,
      `/projects/${projectId}/members/all`,
      `/groups/${groupId}/members`,
      `/groups/${groupId}/members/all`,
    ];
    const callers = [['admin', BENCH_TOKEN], ['user', userToken]] as const;
    const runs: { name: string; url: string; headers: Record<string, string> }[] = [];
    for (const list of lists) {
      for (const perPage of [20, 100]) {
        for (const [who, token] of callers) {
          const name = `GET ${list.replace(`/${projectId}/`, '/:id/').replace(`/${groupId}/`, '/:id/')}?per_page=${perPage} (${who})`;
          if (filter && !name.includes(filter)) continue;
          runs.push({ name, url: `${server.url}/api/v4${list}?per_page=${perPage}`, headers: { 'private-token': token } });
        }
      }
    }
    // Check every list answers, and warm up (JIT, pooled connections, prepared statements).
    let largest: { name: string; bytes: Buffer } | null = null;
    for (const r of runs) {
      const res = await fetch(r.url, { headers: r.headers });
      if (!res.ok) throw new Error(`${r.name}: ${res.status} ${await res.text()}`);
      const bytes = Buffer.from(await res.arrayBuffer());
      if (!largest || bytes.length > largest.bytes.length) largest = { name: r.name, bytes };
      await load('warm-up', r.url, { headers: r.headers, seconds: 1 });
    }
    const seconds = Number(process.env.BENCH_SECONDS || 8);
    const rows: ListBenchRow[] = [];
    for (const r of runs) {
      const result = await load(r.name, r.url, { headers: r.headers, seconds });
      rows.push({ ...result, ratio: result.rps / LIST_TARGET_RPS });
    }
    if (largest) rows.push(await floorFor(largest.name, largest.bytes, seconds));
    return rows;
  } finally {
    await server.stop();
  }
}

/** The same bytes served by a bare Fastify process. */
export async function floorFor(name: string, bytes: Buffer, seconds: number, connections?: number): Promise<ListBenchRow> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-floor-'));
  const port = 20000 + Math.floor(Math.random() * 20000);
  fs.writeFileSync(path.join(tmp, 'page.json'), bytes);
  const floor = fork(path.join(ROOT, 'bench/floor-server.ts'), [String(port), `/page=${tmp}/page.json`], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  try {
    await new Promise((resolve) => floor.once('message', resolve));
    const url = `http://127.0.0.1:${port}/page`;
    await load('warm-up', url, { seconds: 1 });
    const result = await load(`floor: same ${Math.round(bytes.length / 1024)} KB as ${name.replace(/^GET /, '')}`, url, { seconds, connections });
    return { ...result, ratio: result.rps / LIST_TARGET_RPS };
  } finally {
    floor.kill();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}; ratio = req/s over the target of ${LIST_TARGET_RPS}`);
  printTable(await runListBench(process.argv[2]));
}
