import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { projectRepoPath } from '../../src/services/projects.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('commits API', () => {
  let t: TestContext;
  let project: Project;
  let url: string;
  let guest: TestUser, reporter: TestUser, developer: TestUser, maintainer: TestUser, outsider: TestUser;

  const commit = (body: Record<string, unknown>, opts?: { token?: string | null }) => t.post(`${url}/repository/commits`, body, opts);
  const gitIn = (p: Project, ...args: string[]) => execFileSync('git', ['--git-dir', projectRepoPath(t.app.cairn, p), ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

  before(async () => {
    // Developers commit to main here (its protection is the test's own): no default branch protection.
    t = await createTestContext({ defaultBranchProtection: 0 });
    project = await t.createProject({ visibility: 0 });
    url = `/api/v4/projects/${project.id}`;
    [guest, reporter, developer, maintainer, outsider] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
  });
  after(async () => {
    await t.close();
  });

  it('creates the first commit on an empty repository with every create form', async () => {
    const res = await commit({
      branch: 'main',
      commit_message: 'Initial commit\n\nBody text\n\nSigned-off-by: Ann <ann@example.com>\nChangelog: added',
      author_name: 'Ann Author',
      author_email: 'ann@example.com',
      actions: [
        { action: 'create', file_path: 'README.md', content: '# Hello\n' },
        { action: 'create', file_path: 'bin/run.sh', content: b64('#!/bin/sh\necho hi\n'), encoding: 'base64', execute_filemode: true },
        { action: 'create', file_path: 'docs/guide.md', content: 'one\ntwo\nthree\n' },
      ],
    });
    assert.equal(res.status, 201, res.text);
    const c = res.body;
    assert.match(c.id, /^[0-9a-f]{40}$/);
    assert.equal(c.short_id, c.id.slice(0, 8));
    assert.equal(c.title, 'Initial commit');
    assert.equal(c.author_name, 'Ann Author');
    assert.equal(c.author_email, 'ann@example.com');
    assert.equal(c.committer_name, 'Administrator');
    assert.equal(c.created_at, c.committed_date);
    assert.deepEqual(c.parent_ids, []);
    assert.deepEqual(c.stats, { additions: 6, deletions: 0, total: 6 });
    assert.equal(c.last_pipeline, null);
    assert.equal(c.web_url, `${t.config.externalUrl}/root/${project.path}/-/commit/${c.id}`);
    assert.match(c.committed_date, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000\+00:00$/);
    assert.equal(gitIn(project, 'ls-tree', '-r', 'main').includes('100755 blob'), true);
  });

  it('updates, moves (with and without content), chmods and deletes in one commit; form encoding works', async () => {
    const before = (await t.get(`${url}/repository/commits/main`)).body.id;
    const form = [
      'branch=main',
      'commit_message=Reshape',
      'actions[][action]=update',
      'actions[][file_path]=README.md',
      'actions[][content]=' + encodeURIComponent('# Hello world\n'),
      'actions[][action]=move',
      'actions[][file_path]=docs/manual.md',
      'actions[][previous_path]=docs/guide.md',
      'actions[][action]=chmod',
      'actions[][file_path]=bin/run.sh',
      'actions[][execute_filemode]=false',
      'actions[][action]=create',
      'actions[][file_path]=tmp.txt',
      'actions[][content]=x',
    ].join('&');
    const res = await t.call('POST', `${url}/repository/commits`, { form });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(res.body.parent_ids, [before]);
    const tree = gitIn(project, 'ls-tree', '-r', '--name-only', 'main');
    assert.deepEqual(tree.trim().split('\n').sort(), ['README.md', 'bin/run.sh', 'docs/manual.md', 'tmp.txt']);
    assert.match(gitIn(project, 'ls-tree', 'main', 'bin/run.sh'), /^100644/);

    const res2 = await commit({
      branch: 'main',
      commit_message: 'Move with content and delete',
      actions: [
        { action: 'move', previous_path: 'tmp.txt', file_path: 'moved.txt', content: 'new content' },
        { action: 'delete', file_path: 'docs/manual.md' },
      ],
    });
    assert.equal(res2.status, 201, res2.text);
    assert.equal(gitIn(project, 'show', 'main:moved.txt'), 'new content');
    assert.throws(() => gitIn(project, 'show', 'main:docs/manual.md'));
    const res3 = await commit({ branch: 'main', commit_message: 'restore', stats: false, actions: [{ action: 'create', file_path: 'docs/guide.md', content: 'one\ntwo\nthree\n' }] });
    assert.equal(res3.status, 201);
    assert.equal(res3.body.stats, undefined);
  });

  it('refuses invalid actions with GitLab messages', async () => {
    const cases: [Record<string, unknown>, number, string | RegExp][] = [
      [{ action: 'create', file_path: 'README.md', content: 'x' }, 400, 'A file with this name already exists'],
      [{ action: 'update', file_path: 'nope.md', content: 'x' }, 400, "A file with this name doesn't exist"],
      [{ action: 'delete', file_path: 'nope.md' }, 400, "A file with this name doesn't exist"],
      [{ action: 'chmod', file_path: 'nope.md', execute_filemode: true }, 400, "A file with this name doesn't exist"],
      [{ action: 'move', previous_path: 'nope.md', file_path: 'x.md' }, 400, "A file with this name doesn't exist"],
      [{ action: 'move', previous_path: 'README.md', file_path: 'moved.txt' }, 400, 'A file with this name already exists'],
      [{ action: 'create', file_path: 'docs', content: 'x' }, 400, 'A directory with this name already exists'],
      [{ action: 'create', file_path: 'README.md/inner', content: 'x' }, 400, 'A file with this name already exists'],
      [{ action: 'create', file_path: '../escape', content: 'x' }, 400, 'Path cannot include directory traversal'],
      [{ action: 'create', file_path: 'a/../../b', content: 'x' }, 400, 'Path cannot include directory traversal'],
      [{ action: 'create', file_path: '/etc/passwd', content: 'x' }, 400, 'Invalid path'],
      [{ action: 'create', file_path: '-rf', content: 'x' }, 400, 'Invalid path'],
      [{ action: 'create', file_path: 'a\u0000b', content: 'x' }, 400, 'Invalid path'],
      [{ action: 'create', file_path: '.git/config', content: 'x' }, 400, 'Invalid path'],
    ];
    const head = gitIn(project, 'rev-parse', 'main').trim();
    for (const [action, status, message] of cases) {
      const res = await commit({ branch: 'main', commit_message: 'bad', actions: [action] });
      assert.equal(res.status, status, `${JSON.stringify(action)} -> ${res.text}`);
      assert.equal(res.body.message, message, JSON.stringify(action));
    }
    const unknown = await commit({ branch: 'main', commit_message: 'bad', actions: [{ action: 'explode', file_path: 'x' }] });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.error, 'actions[0][action] does not have a valid value');
    assert.equal((await commit({ branch: 'main', commit_message: 'bad', actions: [] })).body.error, 'actions is empty');
    assert.equal((await commit({ branch: 'main', actions: [] })).body.error, 'commit_message is missing');
    assert.equal((await commit({ commit_message: 'x', actions: [] })).body.error, 'branch is missing');
    assert.equal(gitIn(project, 'rev-parse', 'main').trim(), head, 'nothing was written');
  });

  it('refuses content over the configured maximum size', async () => {
    const big = 'x'.repeat(t.config.maxFileSize + 1);
    const res = await commit({ branch: 'main', commit_message: 'big', actions: [{ action: 'create', file_path: 'big.txt', content: big }] });
    assert.equal(res.status, 400);
    assert.match(res.body.message, /big\.txt.*larger than the allowed size/);
  });

  it('checks last_commit_id per action', async () => {
    const last = (await t.get(`${url}/repository/files/README.md`, { query: { ref: 'main' } })).body.last_commit_id;
    const stale = await commit({ branch: 'main', commit_message: 'stale', actions: [{ action: 'update', file_path: 'README.md', content: 'x', last_commit_id: '1'.repeat(40) }] });
    assert.equal(stale.status, 400);
    assert.equal(stale.body.message, 'The file has changed since you started editing it: README.md');
    const moveStale = await commit({ branch: 'main', commit_message: 'stale', actions: [{ action: 'move', previous_path: 'README.md', file_path: 'R.md', last_commit_id: '1'.repeat(40) }] });
    assert.equal(moveStale.body.message, 'The file has changed since you started editing it: README.md');
    const ok = await commit({ branch: 'main', commit_message: 'fresh', actions: [{ action: 'update', file_path: 'README.md', content: '# Hello again\n', last_commit_id: last }] });
    assert.equal(ok.status, 201, ok.text);
  });

  it('branches: unknown branch without a start is refused; start_branch, start_sha, force', async () => {
    const noStart = await commit({ branch: 'feature', commit_message: 'x', actions: [{ action: 'create', file_path: 'f.txt', content: 'f' }] });
    assert.equal(noStart.status, 400);
    assert.equal(noStart.body.message, 'You can only create or edit files when you are on a branch');

    const main = gitIn(project, 'rev-parse', 'main').trim();
    const created = await commit({ branch: 'feature', start_branch: 'main', commit_message: 'feat', actions: [{ action: 'create', file_path: 'f.txt', content: 'f' }] });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.body.parent_ids, [main]);

    const exists = await commit({ branch: 'feature', start_branch: 'main', commit_message: 'x', actions: [{ action: 'create', file_path: 'g.txt', content: 'g' }] });
    assert.equal(exists.status, 400);
    assert.equal(exists.body.message, "A branch called 'feature' already exists. Switch to that branch in order to make changes");

    const both = await commit({ branch: 'other', start_branch: 'main', start_sha: main, commit_message: 'x', actions: [{ action: 'create', file_path: 'g.txt', content: 'g' }] });
    assert.equal(both.body.message, "You can't pass both start_branch and start_sha");
    const badSha = await commit({ branch: 'other', start_sha: 'abc', commit_message: 'x', actions: [{ action: 'create', file_path: 'g.txt', content: 'g' }] });
    assert.equal(badSha.body.message, "Invalid start_sha 'abc'");
    const missingSha = await commit({ branch: 'other', start_sha: 'f'.repeat(40), commit_message: 'x', actions: [{ action: 'create', file_path: 'g.txt', content: 'g' }] });
    assert.equal(missingSha.body.message, `Cannot find start_sha '${'f'.repeat(40)}'`);

    const fromSha = await commit({ branch: 'from-sha', start_sha: main, commit_message: 'sha', actions: [{ action: 'create', file_path: 'g.txt', content: 'g' }] });
    assert.equal(fromSha.status, 201, fromSha.text);
    assert.deepEqual(fromSha.body.parent_ids, [main]);

    const forced = await commit({ branch: 'feature', start_branch: 'main', force: true, commit_message: 'forced', actions: [{ action: 'create', file_path: 'h.txt', content: 'h' }] });
    assert.equal(forced.status, 201, forced.text);
    assert.deepEqual(forced.body.parent_ids, [main]);
    assert.equal(gitIn(project, 'rev-parse', 'feature').trim(), forced.body.id);

    const badName = await commit({ branch: 'bad..name', start_branch: 'main', commit_message: 'x', actions: [{ action: 'create', file_path: 'z', content: 'z' }] });
    assert.equal(badName.status, 400);
    assert.match(badName.body.message, /Branch name is invalid/);
  });

  it('start_project copies objects from another readable project', async () => {
    const other = await t.createProject({ visibility: 0 });
    const otherUrl = `/api/v4/projects/${other.id}/repository/commits`;
    const seed = await t.post(otherUrl, { branch: 'main', commit_message: 'seed', actions: [{ action: 'create', file_path: 'upstream.txt', content: 'up' }] });
    assert.equal(seed.status, 201);
    const res = await commit({ branch: 'from-other', start_branch: 'main', start_project: other.id, commit_message: 'cross', actions: [{ action: 'create', file_path: 'mine.txt', content: 'm' }] });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(res.body.parent_ids, [seed.body.id]);
    assert.equal(gitIn(project, 'show', 'from-other:upstream.txt'), 'up');
    assert.equal(gitIn(project, 'for-each-ref', 'refs/tmp/').trim(), '', 'temporary ref removed');
    // a developer of this project who cannot read the other project
    const hidden = await commit({ branch: 'x2', start_branch: 'main', start_project: other.id, commit_message: 'x', actions: [{ action: 'create', file_path: 'q', content: 'q' }] }, { token: developer.token });
    assert.equal(hidden.status, 404);
  });

  it('write permissions: developer yes; reporter, guest, outsider, anonymous, read_api no; protected branches honoured; read-only refused', async () => {
    const body = (p: string) => ({ branch: 'main', commit_message: p, actions: [{ action: 'create', file_path: `${p}.txt`, content: p }] });
    assert.equal((await commit(body('dev'), { token: developer.token })).status, 201);
    const rep = await commit(body('rep'), { token: reporter.token });
    assert.equal(rep.status, 403);
    assert.equal(rep.body.message, '403 Forbidden - You are not allowed to push into this branch');
    assert.equal((await commit(body('guest'), { token: guest.token })).status, 403);
    assert.equal((await commit(body('out'), { token: outsider.token })).status, 404);
    assert.equal((await commit(body('anon'), { token: null })).status, 404);
    const readApi = await t.createUser({ scopes: ['read_api'] });
    await t.addMember(project, readApi.user, 40);
    assert.equal((await commit(body('ro'), { token: readApi.token })).status, 403);

    const pb = await t.db.insertInto('protected_branches').values({ project_id: project.id, name: 'main' }).returning('id').executeTakeFirstOrThrow();
    await t.db.insertInto('protected_branch_access_levels').values({ protected_branch_id: pb.id, kind: 'push', access_level: 40 }).execute();
    const devProtected = await commit(body('dev2'), { token: developer.token });
    assert.equal(devProtected.status, 403);
    assert.equal(devProtected.body.message, '403 Forbidden - You are not allowed to push into this branch');
    assert.equal((await commit(body('maint'), { token: maintainer.token })).status, 201);
    await t.db.deleteFrom('protected_branches').where('id', '=', pb.id).execute();

    await t.db.updateTable('projects').set({ repository_read_only: true }).where('id', '=', project.id).execute();
    const ro = await commit(body('readonly'));
    assert.equal(ro.status, 403);
    assert.match(ro.body.message, /read-only/);
    await t.db.updateTable('projects').set({ repository_read_only: false }).where('id', '=', project.id).execute();
  });

  it('lists commits with pagination, ranges, paths, dates, stats, trailers, first_parent and topo order', async () => {
    const all = await t.get(`${url}/repository/commits`, { query: { per_page: 100 } });
    assert.equal(all.status, 200);
    const total = Number(all.headers['x-total']);
    assert.equal(total, all.body.length);
    assert.ok(total >= 6);
    assert.equal(all.body.at(-1).title, 'Initial commit');

    const page2 = await t.get(`${url}/repository/commits`, { query: { per_page: 2, page: 2 } });
    assert.equal(page2.body.length, 2);
    assert.deepEqual(page2.body.map((c: any) => c.id), all.body.slice(2, 4).map((c: any) => c.id));
    assert.equal(page2.headers['x-page'], '2');
    assert.equal(page2.headers['x-per-page'], '2');
    assert.equal(page2.headers['x-next-page'], '3');
    assert.equal(page2.headers['x-prev-page'], '1');
    assert.equal(page2.headers['x-total-pages'], String(Math.ceil(total / 2)));
    assert.match(page2.headers.link, /rel="next"/);

    const first = all.body.at(-1).id;
    const range = await t.get(`${url}/repository/commits`, { query: { ref_name: `${first}..main`, per_page: 100 } });
    assert.equal(range.body.length, total - 1);
    const sym = await t.get(`${url}/repository/commits`, { query: { ref_name: `main...feature`, per_page: 100 } });
    assert.equal(sym.status, 200);
    assert.ok(sym.body.length >= 1);

    const byPath = await t.get(`${url}/repository/commits`, { query: { path: 'README.md' } });
    assert.deepEqual(byPath.body.map((c: any) => c.title), ['fresh', 'Reshape', 'Initial commit']);

    const future = await t.get(`${url}/repository/commits`, { query: { since: '2999-01-01T00:00:00Z' } });
    assert.deepEqual(future.body, []);
    assert.equal(future.headers['x-total'], '0');
    const past = await t.get(`${url}/repository/commits`, { query: { until: '2000-01-01T00:00:00Z' } });
    assert.deepEqual(past.body, []);
    const firstDate = all.body.at(-1).committed_date;
    const inclusive = await t.get(`${url}/repository/commits`, { query: { until: firstDate, since: firstDate } });
    assert.ok(inclusive.body.some((c: any) => c.id === first), 'since/until are inclusive');
    assert.equal((await t.get(`${url}/repository/commits`, { query: { since: 'not a date' } })).status, 400);

    const withStats = await t.get(`${url}/repository/commits`, { query: { with_stats: true, per_page: 100 } });
    assert.deepEqual(withStats.body.at(-1).stats, { additions: 6, deletions: 0, total: 6 });
    assert.equal(all.body[0].stats, undefined);

    const trailers = await t.get(`${url}/repository/commits`, { query: { trailers: true, per_page: 100 } });
    assert.deepEqual(trailers.body.at(-1).trailers, { 'Signed-off-by': 'Ann <ann@example.com>', Changelog: 'added' });
    assert.deepEqual(all.body.at(-1).trailers, {});

    const everything = await t.get(`${url}/repository/commits`, { query: { all: true, per_page: 100 } });
    assert.ok(everything.body.length > total, 'all includes other branches');

    assert.equal((await t.get(`${url}/repository/commits`, { query: { order: 'topo' } })).status, 200);
    assert.equal((await t.get(`${url}/repository/commits`, { query: { order: 'bogus' } })).status, 400);
    assert.equal((await t.get(`${url}/repository/commits`, { query: { first_parent: true } })).status, 200);
    assert.deepEqual((await t.get(`${url}/repository/commits`, { query: { ref_name: 'no-such-branch' } })).body, []);
    assert.deepEqual((await t.get(`${url}/repository/commits`, { query: { ref_name: '--all' } })).body, []);
  });

  it('a list asked for again follows a moved branch and replace refs (loose or packed) at once', async () => {
    const list = async (query: Record<string, unknown> = {}) => {
      const res = await t.get(`${url}/repository/commits`, { query: { per_page: 100, ...query } });
      assert.equal(res.status, 200, res.text);
      return { ids: res.body.map((c: any) => c.id), total: res.headers['x-total'] };
    };
    const initial = await list();
    assert.deepEqual(await list(), initial);

    const moved = await commit({ branch: 'main', commit_message: 'moved', actions: [{ action: 'create', file_path: 'listed-again.txt', content: 'm' }] });
    assert.equal(moved.status, 201, moved.text);
    const current = await list();
    assert.deepEqual(current.ids, [moved.body.id, ...initial.ids]);
    assert.equal(current.total, String(initial.ids.length + 1));

    // Replacing the parent of the tip with a root commit cuts history after it, without any branch moving.
    const repo = projectRepoPath(t.app.cairn, project);
    const parent = current.ids[1];
    const root = gitIn(project, '-c', 'user.name=T', '-c', 'user.email=t@example.com', 'commit-tree', `${parent}^{tree}`, '-m', 'replacement').trim();
    const cut = { ids: [moved.body.id, parent], total: '2' };
    const dropReplaceRef = () => {
      gitIn(project, 'update-ref', '-d', `refs/replace/${parent}`);
      fs.rmSync(path.join(repo, 'refs', 'replace'), { recursive: true, force: true });
    };
    try {
      gitIn(project, 'replace', parent, root);
      assert.deepEqual(await list(), cut);
      assert.deepEqual((await list({ per_page: 1, page: 2 })).ids, [parent]);
      dropReplaceRef();
      assert.deepEqual(await list(), current);

      // Packed, as a clone or pack-refs leaves it, with no refs/replace directory.
      gitIn(project, 'update-ref', `refs/replace/${parent}`, root);
      gitIn(project, 'pack-refs', '--all');
      fs.rmSync(path.join(repo, 'refs', 'replace'), { recursive: true, force: true });
      assert.deepEqual(await list(), cut);
    } finally {
      dropReplaceRef();
    }
    assert.deepEqual(await list(), current);
  });

  it('read permissions: private needs reporter; guests 403; outsiders and anonymous 404; public is open', async () => {
    assert.equal((await t.get(`${url}/repository/commits`, { token: reporter.token })).status, 200);
    assert.equal((await t.get(`${url}/repository/commits`, { token: guest.token })).status, 403);
    assert.equal((await t.get(`${url}/repository/commits`, { token: outsider.token })).status, 404);
    assert.equal((await t.get(`${url}/repository/commits`, { token: null })).status, 404);
    const pub = await t.createProject({ visibility: 20 });
    await t.post(`/api/v4/projects/${pub.id}/repository/commits`, { branch: 'main', commit_message: 'p', actions: [{ action: 'create', file_path: 'p', content: 'p' }] });
    const anon = await t.get(`/api/v4/projects/${pub.id}/repository/commits`, { token: null });
    assert.equal(anon.status, 200);
    assert.equal(anon.body.length, 1);
    const blocked = await t.createUser({ state: 'blocked' });
    assert.equal((await t.get(`/api/v4/projects/${pub.id}/repository/commits`, { token: blocked.token })).status, 401);
    assert.equal((await t.post(`/api/v4/projects/${pub.id}/repository/commits`, { branch: 'main', commit_message: 'p', actions: [{ action: 'create', file_path: 'q', content: 'q' }] }, { token: outsider.token })).status, 403);
  });

  it('reads one commit by sha, branch or tag with stats and last_pipeline; 404 for unknown', async () => {
    const head = gitIn(project, 'rev-parse', 'main').trim();
    gitIn(project, 'tag', 'v1.0', head);
    for (const ref of [head, 'main', 'v1.0', head.slice(0, 10)]) {
      const res = await t.get(`${url}/repository/commits/${ref}`);
      assert.equal(res.status, 200, ref);
      assert.equal(res.body.id, head);
      assert.ok(res.body.stats);
      assert.equal(res.body.last_pipeline, null);
      assert.equal(res.body.project_id, project.id);
    }
    assert.equal((await t.get(`${url}/repository/commits/main`, { query: { stats: false } })).body.stats, undefined);
    const missing = await t.get(`${url}/repository/commits/${'e'.repeat(40)}`);
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body, { message: '404 Commit Not Found' });
    assert.equal((await t.get(`${url}/repository/commits/-bad`)).status, 404);
  });

  it('a sha that is not one revision (object syntax, a range, an option) is 404 Commit Not Found, never 500', async () => {
    for (const sha of ['main:../../', 'main:README.md', 'main:', 'main..main', 'main...main', '-main', '--all']) {
      const id = encodeURIComponent(sha);
      for (const read of [`${url}/repository/commits/${id}`, `${url}/repository/commits/${id}/refs`, `${url}/repository/commits/${id}/diff`]) {
        const res = await t.get(read);
        assert.equal(res.status, 404, `${read}: ${res.text}`);
        assert.deepEqual(res.body, { message: '404 Commit Not Found' }, read);
      }
      const pick = await t.post(`${url}/repository/commits/${id}/cherry_pick`, { branch: 'main' });
      assert.equal(pick.status, 404, `cherry_pick ${sha}: ${pick.text}`);
    }
    const plain = await t.get(`${url}/repository/commits/main:../../`);
    assert.equal(plain.status, 404, plain.text);
    // ref_name of the list may be a range, but each side must be one revision: anything else lists nothing.
    for (const ref of ['main:../../', '-main', '--all', 'main..main:../../']) {
      const list = await t.get(`${url}/repository/commits`, { query: { ref_name: ref } });
      assert.equal(list.status, 200, `ref_name=${ref}: ${list.text}`);
      assert.deepEqual(list.body, [], `ref_name=${ref}`);
      assert.equal(list.headers['x-total'], '0', `ref_name=${ref}`);
    }
    assert.equal((await t.get(`${url}/repository/commits/main`)).status, 200);
  });

  it('lists refs containing a commit by type, paginated', async () => {
    const first = gitIn(project, 'rev-list', '--max-parents=0', 'main').trim();
    const all = await t.get(`${url}/repository/commits/${first}/refs`);
    assert.equal(all.status, 200);
    assert.ok(all.body.some((r: any) => r.type === 'branch' && r.name === 'main'));
    assert.ok(all.body.some((r: any) => r.type === 'tag' && r.name === 'v1.0'));
    const tags = await t.get(`${url}/repository/commits/${first}/refs`, { query: { type: 'tag' } });
    assert.deepEqual(tags.body, [{ type: 'tag', name: 'v1.0' }]);
    const branches = await t.get(`${url}/repository/commits/${first}/refs`, { query: { type: 'branch', per_page: 1 } });
    assert.equal(branches.body.length, 1);
    assert.ok(Number(branches.headers['x-total']) >= 3);
  });

  it('diff: modes, new/renamed/deleted flags, and the per-file size limit', async () => {
    const res = await commit({
      branch: 'main',
      commit_message: 'diff me',
      actions: [
        { action: 'move', previous_path: 'moved.txt', file_path: 'renamed.txt' },
        { action: 'delete', file_path: 'f.txt' },
        { action: 'create', file_path: 'huge.txt', content: 'line\n'.repeat(30000) },
        { action: 'update', file_path: 'README.md', content: '# Changed\n' },
      ],
    }).catch((e) => e);
    // f.txt only exists on feature; use a valid set instead
    assert.equal(res.status, 400);
    const ok = await commit({
      branch: 'main',
      commit_message: 'diff me',
      actions: [
        { action: 'move', previous_path: 'moved.txt', file_path: 'renamed.txt' },
        { action: 'delete', file_path: 'dev.txt' },
        { action: 'create', file_path: 'huge.txt', content: 'line\n'.repeat(30000) },
        { action: 'update', file_path: 'README.md', content: '# Changed\n' },
      ],
    });
    assert.equal(ok.status, 201, ok.text);
    const diff = await t.get(`${url}/repository/commits/${ok.body.id}/diff`);
    assert.equal(diff.status, 200);
    const byPath = Object.fromEntries(diff.body.map((d: any) => [d.new_path, d]));
    assert.equal(byPath['renamed.txt'].renamed_file, true);
    assert.equal(byPath['renamed.txt'].old_path, 'moved.txt');
    assert.equal(byPath['dev.txt'].deleted_file, true);
    assert.equal(byPath['dev.txt'].b_mode, '0');
    assert.equal(byPath['huge.txt'].new_file, true);
    assert.equal(byPath['huge.txt'].a_mode, '0');
    assert.equal(byPath['huge.txt'].b_mode, '100644');
    assert.equal(byPath['huge.txt'].diff, '');
    assert.equal(byPath['huge.txt'].too_large, true);
    assert.match(byPath['README.md'].diff, /^@@ -1 \+1 @@\n-# Hello again\n\+# Changed\n/);
    const paged = await t.get(`${url}/repository/commits/${ok.body.id}/diff`, { query: { per_page: 1 } });
    assert.equal(paged.body.length, 1);
    assert.equal(paged.headers['x-total'], String(diff.body.length));
  });

  it('cherry-picks and reverts with dry_run (a failing dry run adds dry_run: error), messages and GitLab error codes', async () => {
    const pick = await commit({ branch: 'topic', start_branch: 'main', commit_message: 'Add topic file', actions: [{ action: 'create', file_path: 'topic.txt', content: 'topic\n' }] });
    assert.equal(pick.status, 201);
    const sha = pick.body.id;
    const dry = await t.post(`${url}/repository/commits/${sha}/cherry_pick`, { branch: 'main', dry_run: true });
    assert.equal(dry.status, 200);
    assert.deepEqual(dry.body, { dry_run: 'success' });
    const mainBefore = gitIn(project, 'rev-parse', 'main').trim();
    assert.equal(mainBefore, gitIn(project, 'rev-parse', 'main').trim());
    const picked = await t.post(`${url}/repository/commits/${sha}/cherry_pick`, { branch: 'main' }, { token: developer.token });
    assert.equal(picked.status, 201, picked.text);
    assert.equal(picked.body.message, `Add topic file\n\n(cherry picked from commit ${sha})`);
    assert.equal(picked.body.author_name, pick.body.author_name);
    assert.deepEqual(picked.body.parent_ids, [mainBefore]);
    assert.equal(gitIn(project, 'show', 'main:topic.txt'), 'topic\n');

    const again = await t.post(`${url}/repository/commits/${sha}/cherry_pick`, { branch: 'main' });
    assert.equal(again.status, 400);
    assert.equal(again.body.error_code, 'empty');
    assert.match(again.body.message, /^Sorry, we cannot cherry-pick this commit automatically\. This commit may already have been cherry-picked/);
    // A failing dry run answers as the real failure does, plus GitLab's dry_run: "error".
    const againDry = await t.post(`${url}/repository/commits/${sha}/cherry_pick`, { branch: 'main', dry_run: true });
    assert.equal(againDry.status, 400);
    assert.deepEqual(againDry.body, { ...again.body, dry_run: 'error' });
    const againNotDry = await t.post(`${url}/repository/commits/${sha}/cherry_pick`, { branch: 'main', dry_run: false });
    assert.deepEqual([againNotDry.status, againNotDry.body], [400, again.body]);

    // conflicting change on main
    await commit({ branch: 'main', commit_message: 'conflict', actions: [{ action: 'update', file_path: 'topic.txt', content: 'main version\n' }] });
    const topic2 = await commit({ branch: 'topic', commit_message: 'topic edit', actions: [{ action: 'update', file_path: 'topic.txt', content: 'topic version\n' }] });
    const conflict = await t.post(`${url}/repository/commits/${topic2.body.id}/cherry_pick`, { branch: 'main' });
    assert.equal(conflict.status, 400);
    assert.deepEqual(conflict.body, {
      message: 'Sorry, we cannot cherry-pick this commit automatically. This commit may already have been cherry-picked, or a more recent commit may have updated some of its content.',
      error_code: 'conflict',
    });
    const mainTip = gitIn(project, 'rev-parse', 'main').trim();
    const conflictDry = await t.post(`${url}/repository/commits/${topic2.body.id}/cherry_pick`, { branch: 'main', dry_run: true });
    assert.deepEqual([conflictDry.status, conflictDry.body], [400, { ...conflict.body, dry_run: 'error' }]);
    const conflictNotDry = await t.post(`${url}/repository/commits/${topic2.body.id}/cherry_pick`, { branch: 'main', dry_run: false });
    assert.deepEqual([conflictNotDry.status, conflictNotDry.body], [400, conflict.body]);
    assert.equal(gitIn(project, 'rev-parse', 'main').trim(), mainTip);
    // Reverting main's change to topic.txt conflicts once a later commit changed the same line.
    const mainEdit = JSON.parse(gitIn(project, 'log', '-1', '--format="%H"', 'main', '--', 'topic.txt').trim());
    await commit({ branch: 'main', commit_message: 'later edit', actions: [{ action: 'update', file_path: 'topic.txt', content: 'later version\n' }] });
    const revertConflict = await t.post(`${url}/repository/commits/${mainEdit}/revert`, { branch: 'main' });
    assert.equal(revertConflict.status, 400, revertConflict.text);
    assert.deepEqual(revertConflict.body, {
      message: 'Sorry, we cannot revert this commit automatically. This commit may already have been reverted, or a more recent commit may have updated some of its content.',
      error_code: 'conflict',
    });
    const revertConflictDry = await t.post(`${url}/repository/commits/${mainEdit}/revert`, { branch: 'main', dry_run: true });
    assert.deepEqual([revertConflictDry.status, revertConflictDry.body], [400, { ...revertConflict.body, dry_run: 'error' }]);

    const custom = await commit({ branch: 'topic', commit_message: 'other file', actions: [{ action: 'create', file_path: 'other.txt', content: 'o\n' }] });
    const withMessage = await t.post(`${url}/repository/commits/${custom.body.id}/cherry_pick`, { branch: 'main', message: 'Custom message' });
    assert.equal(withMessage.status, 201);
    assert.equal(withMessage.body.message, 'Custom message');

    const revert = await t.post(`${url}/repository/commits/${withMessage.body.id}/revert`, { branch: 'main' });
    assert.equal(revert.status, 201, revert.text);
    assert.equal(revert.body.message, `Revert "Custom message"\n\nThis reverts commit ${withMessage.body.id}`);
    assert.throws(() => gitIn(project, 'show', 'main:other.txt'));
    const revertAgain = await t.post(`${url}/repository/commits/${withMessage.body.id}/revert`, { branch: 'main' });
    assert.deepEqual([revertAgain.status, revertAgain.body], [400, {
      message: 'Sorry, we cannot revert this commit automatically. This commit may already have been reverted, or a more recent commit may have updated some of its content.',
      error_code: 'empty',
    }]);
    const revertAgainDry = await t.post(`${url}/repository/commits/${withMessage.body.id}/revert`, { branch: 'main', dry_run: true });
    assert.deepEqual([revertAgainDry.status, revertAgainDry.body], [400, { ...revertAgain.body, dry_run: 'error' }]);
    const revertAgainNotDry = await t.post(`${url}/repository/commits/${withMessage.body.id}/revert`, { branch: 'main', dry_run: false });
    assert.deepEqual([revertAgainNotDry.status, revertAgainNotDry.body], [400, revertAgain.body]);
    // Failures found before the pick (no branch, no push rights) carry no dry_run field.
    assert.deepEqual((await t.post(`${url}/repository/commits/${sha}/revert`, { branch: 'nope', dry_run: true })).body, { message: '404 Branch Not Found' });
    const deniedDry = await t.post(`${url}/repository/commits/${sha}/cherry_pick`, { branch: 'main', dry_run: true }, { token: reporter.token });
    assert.equal(deniedDry.status, 403);
    assert.equal(deniedDry.body.dry_run, undefined);

    assert.deepEqual((await t.post(`${url}/repository/commits/${sha}/cherry_pick`, { branch: 'nope' })).body, { message: '404 Branch Not Found' });
    assert.deepEqual((await t.post(`${url}/repository/commits/${'a'.repeat(40)}/cherry_pick`, { branch: 'main' })).body, { message: '404 Commit Not Found' });
    assert.equal((await t.post(`${url}/repository/commits/${sha}/cherry_pick`, {})).body.error, 'branch is missing');
    assert.equal((await t.post(`${url}/repository/commits/${sha}/cherry_pick`, { branch: 'main' }, { token: reporter.token })).status, 403);
    assert.equal((await t.post(`${url}/repository/commits/${sha}/revert`, { branch: 'main' }, { token: null })).status, 404);
  });

  it('comments: line comments, the fallback to a plain comment, listing, discussions', async () => {
    const c = await commit({ branch: 'main', commit_message: 'commented', actions: [{ action: 'update', file_path: 'README.md', content: '# Line one\nline two\n' }] });
    const sha = c.body.id;
    const onLine = await t.post(`${url}/repository/commits/${sha}/comments`, { note: 'nice line', path: 'README.md', line: 2, line_type: 'new' }, { token: reporter.token });
    assert.equal(onLine.status, 201, onLine.text);
    assert.equal(onLine.body.note, 'nice line');
    assert.equal(onLine.body.path, 'README.md');
    assert.equal(onLine.body.line, 2);
    assert.equal(onLine.body.line_type, 'new');
    assert.equal(onLine.body.author.username, reporter.user.username);
    assert.ok(onLine.body.created_at);

    const fallback = await t.post(`${url}/repository/commits/main/comments`, { note: 'on branch', path: 'nope.md', line: 99, line_type: 'new' });
    assert.equal(fallback.status, 201);
    assert.equal(fallback.body.path, null);
    assert.equal(fallback.body.line, null);
    assert.equal(fallback.body.line_type, null);
    const plain = await t.post(`${url}/repository/commits/${sha}/comments`, { note: 'plain' });
    assert.equal(plain.status, 201);

    assert.equal((await t.post(`${url}/repository/commits/${sha}/comments`, {})).body.error, 'note is missing');
    assert.equal((await t.post(`${url}/repository/commits/${sha}/comments`, { note: 'x', line_type: 'middle' })).status, 400);
    assert.equal((await t.post(`${url}/repository/commits/${sha}/comments`, { note: 'x' }, { token: guest.token })).status, 403);
    assert.equal((await t.post(`${url}/repository/commits/${sha}/comments`, { note: 'x' }, { token: null })).status, 404);

    const list = await t.get(`${url}/repository/commits/${sha}/comments`);
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.map((n: any) => n.note), ['nice line', 'on branch', 'plain']);
    assert.equal(list.headers['x-total'], '3');

    const discussions = await t.get(`${url}/repository/commits/${sha}/discussions`);
    assert.equal(discussions.status, 200);
    assert.equal(discussions.body.length, 3);
    const d = discussions.body[2];
    assert.match(d.id, /^[0-9a-f]{40}$/);
    assert.equal(d.individual_note, true);
    const n = d.notes[0];
    assert.equal(n.body, 'plain');
    assert.equal(n.type, null);
    assert.equal(n.noteable_type, 'Commit');
    assert.equal(n.noteable_id, null);
    assert.equal(n.noteable_iid, null);
    assert.equal(n.system, false);
    assert.equal(n.resolvable, false);
    assert.equal(n.confidential, false);
    assert.equal(n.attachment, null);
    assert.deepEqual(n.commands_changes, {});
    assert.equal(n.author.username, 'root');
    assert.equal(discussions.body[0].individual_note, false);
    assert.equal(discussions.body[0].notes[0].type, 'LegacyDiffNote');
    assert.equal((await t.get(`${url}/repository/commits/${sha}/discussions`, { token: guest.token })).status, 403);
  });

  it('a pushed commit or tag dated beyond any JavaScript date is listed, dated at the end of year 9999 (never a 500)', async () => {
    const p = await t.createProject();
    const base = `/api/v4/projects/${p.id}`;
    const first = await t.post(`${base}/repository/commits`, { branch: 'main', commit_message: 'x', actions: [{ action: 'create', file_path: 'a', content: 'a' }] });
    assert.equal(first.status, 201);
    const tree = gitIn(p, 'rev-parse', 'main^{tree}').trim();
    // git takes any 64-bit time; 99999999999999 s is year ~3.17 million, -99999999999999 before year 1.
    const hash = (type: string, body: string) =>
      execFileSync('git', ['--git-dir', projectRepoPath(t.app.cairn, p), 'hash-object', '-t', type, '-w', '--stdin'], { input: body, encoding: 'utf8' }).trim();
    const oid = hash('commit', `tree ${tree}\nparent ${first.body.id}\nauthor A <a@example.com> 99999999999999 +0000\ncommitter B <b@example.com> -99999999999999 +0200\n\nfuture\n`);
    gitIn(p, 'update-ref', 'refs/heads/main', oid);
    gitIn(p, 'update-ref', 'refs/tags/far', hash('tag', `object ${oid}\ntype commit\ntag far\ntagger T <t@example.com> 99999999999999 +1400\n\nfar\n`));
    for (const path of ['/repository/commits', `/repository/commits/${oid}`, '/repository/branches', '/repository/branches/main', '/repository/tags']) {
      const res = await t.get(base + path);
      assert.equal(res.status, 200, `${path}: ${res.text.slice(0, 200)}`);
    }
    const c = (await t.get(`${base}/repository/commits/${oid}`)).body;
    assert.equal(c.authored_date, '9999-12-31T23:59:59.000+00:00');
    assert.equal(c.committed_date, '0001-01-01T02:00:00.000+02:00');
    assert.equal((await t.get(`${base}/repository/tags/far`)).body.created_at, '9999-12-31T23:59:59.000+14:00');
  });

  it('concurrency: 20 parallel commits with the same last_commit_id — exactly one wins, fsck is clean', async () => {
    const seed = await commit({ branch: 'race', start_branch: 'main', commit_message: 'seed', actions: [{ action: 'create', file_path: 'counter.txt', content: '0' }] });
    assert.equal(seed.status, 201);
    const last = seed.body.id;
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        commit({ branch: 'race', commit_message: `writer ${i}`, actions: [{ action: 'update', file_path: 'counter.txt', content: String(i + 1), last_commit_id: last }] }),
      ),
    );
    const ok = results.filter((r) => r.status === 201);
    const refused = results.filter((r) => r.status === 400);
    assert.equal(ok.length, 1, results.map((r) => r.text).join('\n'));
    assert.equal(refused.length, 19);
    for (const r of refused) assert.equal(r.body.message, 'The file has changed since you started editing it: counter.txt');
    assert.equal(gitIn(project, 'rev-parse', 'race').trim(), ok[0].body.id);
    assert.deepEqual(ok[0].body.parent_ids, [last]);

    // independent writers without last_commit_id all land: no update is lost
    const many = await Promise.all(
      Array.from({ length: 20 }, (_, i) => commit({ branch: 'race', commit_message: `file ${i}`, actions: [{ action: 'create', file_path: `f${i}.txt`, content: String(i) }] })),
    );
    assert.deepEqual(many.map((r) => r.status), Array(20).fill(201));
    const files = gitIn(project, 'ls-tree', '--name-only', 'race').split('\n').filter((f) => /^f\d+\.txt$/.test(f));
    assert.equal(files.length, 20);
    assert.equal(Number(gitIn(project, 'rev-list', '--count', `${ok[0].body.id}..race`).trim()), 20);
    execFileSync('git', ['--git-dir', projectRepoPath(t.app.cairn, project), 'fsck', '--strict', '--no-dangling'], { encoding: 'utf8' });
  });
});
