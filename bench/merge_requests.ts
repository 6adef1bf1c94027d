// Merge request list benchmark (issue: merge requests): the project list of a project with
// 10,000 merge requests filtered by five parameters at once, and the global list
// (`GET /merge_requests?scope=all`) for a user who belongs to 200 projects, beside the floor (the
// same bytes from a bare Fastify process) in the same run. Target: p99 under 20 ms on PostgreSQL.
// The merge requests are written straight into the database (the lists read rows only; creating
// 10,000 through the API would measure git, not the lists), so this needs DATABASE_URL.
// Run: `DATABASE_URL=postgres://… node --import tsx bench/merge_requests.ts`.
import pg from 'pg';
import { api, load, printTable, startServer, type BenchServer, type LoadResult } from './lib.js';
import { floorFor, inParallel } from './lists.js';

export const MR_P99_TARGET_MS = 20;
const MERGE_REQUESTS = Number(process.env.BENCH_MRS || 10_000);
const PROJECTS = Number(process.env.BENCH_MR_PROJECTS || 200);

export async function seed(server: BenchServer) {
  const started = Date.now();
  const users = await inParallel([...Array(20).keys()], 4, (i) =>
    api(server, 'POST', '/users', { username: `mr-user${i}`, name: `MR User ${i}`, email: `mr-user${i}@example.com`, password: 'bench-password-1' }),
  );
  const viewer = users[0];
  const { token } = await api(server, 'POST', `/users/${viewer.id}/personal_access_tokens`, { name: 'bench', scopes: ['api'] });
  const group = await api(server, 'POST', '/groups', { name: 'MR Bench', path: 'mr-bench', visibility: 'private' });
  const projects = await inParallel([...Array(PROJECTS).keys()], 4, (i) =>
    api(server, 'POST', '/projects', { name: `mr-bench-${i}`, namespace_id: group.id, visibility: 'private' }),
  );
  const big = projects[0];
  const client = new pg.Client({ connectionString: server.env.DATABASE_URL });
  await client.connect();
  try {
    // The viewer is a developer of every project (one membership each, as a user in 200 projects).
    await client.query(
      `insert into members (source_type, source_id, user_id, access_level) select 'Project', p, $1, 30 from unnest($2::int[]) p`,
      [viewer.id, projects.map((p: { id: number }) => p.id)],
    );
    const labels = (await client.query(
      `insert into labels (project_id, title, color) select $1, t, '#d9534f' from unnest(array['bug','feature','docs','ux','backend']) t returning id, title`,
      [big.id],
    )).rows;
    const milestones = (await client.query(
      `insert into milestones (project_id, iid, title) select $1, i, 'v' || i from generate_series(1, 5) i returning id`,
      [big.id],
    )).rows;
    const userIds = users.map((u: { id: number }) => u.id);
    // 10,000 in the big project, with states, authors, branches, labels, milestones, people.
    await client.query(
      `insert into merge_requests (iid, target_project_id, source_project_id, source_branch, target_branch, title, description,
                                   state_id, author_id, milestone_id, merge_status, head_sha, created_at, updated_at)
       select i, $1, $1, 'feature-' || i, case when i % 4 = 0 then 'release' else 'main' end,
              case when i % 10 = 0 then 'Draft: change ' || i else 'Change number ' || i end, 'Description of change ' || i,
              case when i % 5 = 0 then 3 when i % 7 = 0 then 2 else 1 end,
              ($2::int[])[1 + i % array_length($2::int[], 1)],
              ($3::int[])[1 + i % array_length($3::int[], 1)],
              'can_be_merged', md5(i::text) || substr(md5((i+1)::text), 1, 8),
              now() - (i || ' minutes')::interval, now() - (i || ' seconds')::interval
         from generate_series(1, $4::int) i`,
      [big.id, userIds, milestones.map((m) => m.id), MERGE_REQUESTS],
    );
    await client.query(`insert into internal_ids (usage, parent_id, last_value) values ('merge_requests', $1, $2)`, [big.id, MERGE_REQUESTS]);
    await client.query(
      `insert into label_links (label_id, target_type, target_id)
       select ($1::int[])[1 + mr.iid % 5], 'MergeRequest', mr.id from merge_requests mr where mr.target_project_id = $2
       union all
       select ($1::int[])[1 + (mr.iid / 5) % 5], 'MergeRequest', mr.id from merge_requests mr where mr.target_project_id = $2 and (mr.iid / 5) % 5 <> mr.iid % 5`,
      [labels.map((l) => l.id), big.id],
    );
    await client.query(
      `insert into merge_request_assignees (merge_request_id, user_id)
       select mr.id, ($1::int[])[1 + (mr.iid * 7) % array_length($1::int[], 1)] from merge_requests mr where mr.target_project_id = $2`,
      [userIds, big.id],
    );
    await client.query(
      `insert into merge_request_reviewers (merge_request_id, user_id)
       select mr.id, ($1::int[])[1 + (mr.iid * 3) % array_length($1::int[], 1)] from merge_requests mr where mr.target_project_id = $2 and mr.iid % 2 = 0`,
      [userIds, big.id],
    );
    // 25 in each of the other projects, for the global list.
    await client.query(
      `insert into merge_requests (iid, target_project_id, source_project_id, source_branch, target_branch, title, state_id, author_id, head_sha, created_at, updated_at)
       select i, p, p, 'topic-' || i, 'main', 'Topic ' || i, case when i % 3 = 0 then 3 else 1 end, ($2::int[])[1 + i % array_length($2::int[], 1)],
              md5(p::text || i) || substr(md5(i::text), 1, 8), now() - ((p * 25 + i) || ' minutes')::interval, now()
         from unnest($1::int[]) p, generate_series(1, 25) i`,
      [projects.slice(1).map((p: { id: number }) => p.id), userIds],
    );
    await client.query('analyze');
  } finally {
    await client.end();
  }
  console.log(`seeded ${MERGE_REQUESTS} merge requests in one project and ${25 * (PROJECTS - 1)} across ${PROJECTS - 1} more, in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return { token, bigId: big.id, authorId: users[1].id };
}

export async function runMergeRequestBench(): Promise<(LoadResult & { ratio?: number })[]> {
  if (!process.env.DATABASE_URL) {
    console.log('bench/merge_requests.ts seeds through PostgreSQL: set DATABASE_URL (the target is stated on PostgreSQL).');
    return [];
  }
  const server = await startServer();
  let uncached: BenchServer | null = null;
  try {
    const { token, bigId, authorId } = await seed(server);
    // A second process on the same database that keeps nothing in memory (CAIRN_CACHE=0): what
    // a first request for a page costs, or any request after a write.
    uncached = await startServer({ CAIRN_CACHE: '0', CAIRN_EXTERNAL_URL: server.url }, { sharing: server });
    const headers = { 'private-token': token };
    const runs = [
      { name: 'project MRs, 5 filters (20)', url: `/projects/${bigId}/merge_requests?state=opened&labels=feature&milestone=v2&author_id=${authorId}&target_branch=main` },
      { name: 'project MRs, 5 filters + not[] (20)', url: `/projects/${bigId}/merge_requests?state=opened&labels=docs&not[milestone]=v1&reviewer_id=Any&target_branch=main&search=change` },
      { name: 'project MRs, opened (20)', url: `/projects/${bigId}/merge_requests?state=opened` },
      { name: 'project MRs, opened (100)', url: `/projects/${bigId}/merge_requests?state=opened&per_page=100` },
      { name: 'global MRs, user in 200 projects (20)', url: `/merge_requests?scope=all&state=opened` },
      { name: 'global MRs, user in 200 projects, updated (20)', url: `/merge_requests?scope=all&order_by=updated_at` },
    ];
    const targets = [{ server, label: '' }, { server: uncached, label: ', no cache' }];
    let largest: { name: string; bytes: Buffer } | null = null;
    for (const r of runs) {
      let first: string | null = null;
      for (const t of targets) {
        const res = await fetch(`${t.server.url}/api/v4${r.url}`, { headers });
        if (!res.ok) throw new Error(`${r.name}: ${res.status} ${await res.text()}`);
        const bytes = Buffer.from(await res.arrayBuffer());
        const n = (JSON.parse(bytes.toString()) as unknown[]).length;
        if (!n) throw new Error(`${r.name}: empty list, nothing measured`);
        // Both processes answer the same bytes (the cached page is the page).
        if (first === null) first = bytes.toString();
        else if (first !== bytes.toString()) throw new Error(`${r.name}: the two processes answered differently`);
        if (!largest || bytes.length > largest.bytes.length) largest = { name: r.name, bytes };
        await load('warm-up', `${t.server.url}/api/v4${r.url}`, { headers, seconds: 1 });
      }
    }
    const seconds = Number(process.env.BENCH_SECONDS || 6);
    const rows: (LoadResult & { ratio?: number })[] = [];
    // Four connections: a busy team on a 2-core server; the p99 is the figure held to the target.
    for (const t of targets) {
      for (const r of runs) {
        const result = await load(`${r.name}${t.label}`, `${t.server.url}/api/v4${r.url}`, { headers, seconds, connections: 4 });
        rows.push({ ...result, ratio: MR_P99_TARGET_MS / Math.max(result.p99, 0.001) });
      }
    }
    if (largest) rows.push(await floorFor(largest.name, largest.bytes, seconds, 4));
    return rows;
  } finally {
    await uncached?.stop();
    await server.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`merge request lists; ratio = ${MR_P99_TARGET_MS} ms over the p99 (>= 1 meets the target); 4 connections`);
  printTable(await runMergeRequestBench());
}
