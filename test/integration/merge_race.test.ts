import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openTestDatabase, type TestDatabase } from '../helpers/database.js';
import { startServe as startCairn } from '../helpers/serve.js';

// "A merge is one compare-and-swap on the target ref: two concurrent merges of one merge request,
// from two processes, give exactly one merge." Two real `cairn serve` processes on one
// PostgreSQL and one data directory (as test/integration/two_processes.test.ts), PUT .../merge
// sent to both at once.

const TOKEN = 'merge-race-root-token-123';

const startServe = (databaseUrl: string, dataDir: string) => startCairn({ databaseUrl, dataDir, rootToken: TOKEN });

interface Commit { id: string; parent_ids: string[]; message: string }
interface MergeRequestBody { iid: number; id: number; sha: string; state: string; merged_at: string | null; merge_commit_sha: string | null; merge_user: { id: number } | null }

describe('two processes merging one merge request at once', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL' }, () => {
  let testDb: TestDatabase;
  let dataDir: string;
  let a: { url: string; child: ChildProcess };
  let b: { url: string; child: ChildProcess };
  let base: string;
  let seq = 0;

  const call = async (server: string, method: string, p: string, body?: unknown) => {
    const res = await fetch(`${server}/api/v4${p}`, {
      method,
      headers: { 'private-token': TOKEN, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };

  /** A branch from main with one new file, and a merge request from it into main (created through `server`). */
  const openMergeRequest = async (server: string, branch: string): Promise<MergeRequestBody> => {
    const commit = await call(server, 'POST', `${base}/repository/commits`, {
      branch, start_branch: 'main', commit_message: `${branch} #${++seq}`, actions: [{ action: 'create', file_path: `${branch}.txt`, content: `${branch}\n` }],
    });
    assert.equal(commit.status, 201, JSON.stringify(commit.body));
    const mr = await call(server, 'POST', `${base}/merge_requests`, { source_branch: branch, target_branch: 'main', title: `Merge ${branch}` });
    assert.equal(mr.status, 201, JSON.stringify(mr.body));
    return mr.body;
  };

  /** PUT .../merge twice through each process, all at once. */
  const mergeFromBoth = (iid: number) =>
    Promise.all([a, b, a, b].map((s) => call(s.url, 'PUT', `${base}/merge_requests/${iid}/merge`, {})));

  const mainCommits = async (): Promise<Commit[]> => {
    const res = await call(a.url, 'GET', `${base}/repository/commits?ref_name=main&per_page=100`);
    assert.equal(res.status, 200);
    return res.body;
  };

  before(async () => {
    testDb = await openTestDatabase();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-merge-race-'));
    [a, b] = await Promise.all([startServe(testDb.databaseUrl!, dataDir), startServe(testDb.databaseUrl!, dataDir)]);
    const project = await call(a.url, 'POST', '/projects', { name: 'merge-race', visibility: 'private' });
    assert.equal(project.status, 201, JSON.stringify(project.body));
    base = `/projects/${project.body.id}`;
    const first = await call(a.url, 'POST', `${base}/repository/commits`, {
      branch: 'main', commit_message: 'initial', actions: [{ action: 'create', file_path: 'README.md', content: '# race\n' }],
    });
    assert.equal(first.status, 201, JSON.stringify(first.body));
  });
  after(async () => {
    for (const s of [a, b]) s?.child.kill('SIGTERM');
    await Promise.all([a, b].map((s) => s && new Promise((r) => (s.child.exitCode !== null ? r(null) : s.child.once('exit', r)))));
    await testDb?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('gives exactly one merge per merge request, round after round', async () => {
    const rounds = 10;
    for (let i = 0; i < rounds; i++) {
      const mainBefore = (await mainCommits())[0].id;
      // Created through one process, merged through both: the merge request's row is new to b.
      const mr = await openMergeRequest(i % 2 ? a.url : b.url, `round-${i}`);
      // Lists read (and kept by each process's page cache) before the merge...
      const openIids = async (server: string) => {
        const res = await call(server, 'GET', `${base}/merge_requests?state=opened`);
        assert.equal(res.status, 200);
        return (res.body as MergeRequestBody[]).map((m) => m.iid);
      };
      for (const s of [a, b, a, b]) assert.ok((await openIids(s.url)).includes(mr.iid));
      const results = await mergeFromBoth(mr.iid);
      // ...follow it in both processes.
      for (const s of [a, b]) assert.ok(!(await openIids(s.url)).includes(mr.iid));
      const statuses = results.map((r) => r.status);
      const won = results.filter((r) => r.status === 200);
      assert.equal(won.length, 1, `round ${i}: ${JSON.stringify(statuses)} ${JSON.stringify(results.map((r) => r.body?.message))}`);
      // The others merge a merge request that is being merged or was: 405 (spec: already merged).
      assert.ok(statuses.every((s) => s === 200 || s === 405), `round ${i}: ${JSON.stringify(statuses)}`);
      const merged = won[0].body as MergeRequestBody;
      assert.equal(merged.state, 'merged');
      assert.ok(merged.merged_at);

      // The target moved by exactly one merge commit: old main and the source head as parents.
      const commits = await mainCommits();
      assert.equal(commits[0].id, merged.merge_commit_sha);
      assert.deepEqual(commits[0].parent_ids, [mainBefore, mr.sha]);

      // Both processes read it merged, once: the same merged_at and merge commit as the winner's answer.
      for (const s of [a, b]) {
        const read = await call(s.url, 'GET', `${base}/merge_requests/${mr.iid}`);
        assert.equal(read.status, 200);
        assert.equal(read.body.state, 'merged');
        assert.equal(read.body.merged_at, merged.merged_at);
        assert.equal(read.body.merge_commit_sha, merged.merge_commit_sha);
      }
      // A later merge of it is refused.
      assert.equal((await call(b.url, 'PUT', `${base}/merge_requests/${mr.iid}/merge`, {})).status, 405);
    }
    const commits = await mainCommits();
    const merges = commits.filter((c) => c.parent_ids.length === 2);
    assert.equal(merges.length, rounds);
    // Each source head entered main through exactly one merge commit.
    assert.equal(new Set(merges.map((c) => c.parent_ids[1])).size, rounds);
    const rows = (await sql<{ n: number; at: number }>`
      select count(*)::int as n, count(distinct merged_at)::int as at from merge_requests where state_id = 3 and merged_at is not null`.execute(testDb.database.db)).rows[0];
    assert.deepEqual(rows, { n: rounds, at: rounds });
  });

  it('merging several merge requests into one branch at once merges each once', async () => {
    const mrs: MergeRequestBody[] = [];
    for (let i = 0; i < 4; i++) mrs.push(await openMergeRequest(a.url, `together-${i}`));
    const mainBefore = (await mainCommits())[0].id;
    // Every merge request merged from both processes at once: the target moves under some
    // merges, which are built again on the new target (a merge built on a target that moved is
    // never published: compare-and-swap), so each merge request lands exactly once.
    const rounds = await Promise.all(mrs.map((mr) => mergeFromBoth(mr.iid)));
    for (const [i, results] of rounds.entries()) {
      const statuses = results.map((r) => r.status);
      assert.equal(statuses.filter((s) => s === 200).length, 1, `merge request ${mrs[i].iid}: ${JSON.stringify(statuses)}`);
      assert.ok(statuses.every((s) => s === 200 || s === 405), `merge request ${mrs[i].iid}: ${JSON.stringify(statuses)}`);
    }
    // main's first-parent chain down to where it was (the list is in date order, which ties
    // within a second, so the chain is followed by parents).
    const all = await mainCommits();
    const byId = new Map(all.map((c) => [c.id, c]));
    const newMerges: Commit[] = [];
    for (let c = byId.get(all[0].id); c && c.id !== mainBefore; c = byId.get(c.parent_ids[0])) newMerges.push(c);
    assert.ok(newMerges.every((c) => c.parent_ids.length === 2), 'only merge commits on the first-parent chain');
    assert.equal(newMerges.length, mrs.length);
    assert.deepEqual(new Set(newMerges.map((c) => c.parent_ids[1])), new Set(mrs.map((mr) => mr.sha)));
    assert.equal(newMerges[newMerges.length - 1].parent_ids[0], mainBefore);
  });
});
