// Project webhooks as GitLab has them: the API (secrets write-only), deliveries to a real HTTP
// receiver for push, tag push, issue, merge request and note events with GitLab's headers and
// payloads, the branch filter, at most 20 commits per push, retries, the auto-disabling after
// failures (temporarily, then for good) and the test delivery that enables a hook again, the
// delivery log, a receiver that is down, slow or answers 500, and the SSRF guard (a hostname
// that resolves to loopback, a redirect to a private address).
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { Project } from '../../src/db/schema/core.js';
import { buildApp, type App } from '../../src/app.js';
import { drainJobs, startWorker } from '../../src/jobs/queue.js';
import { HookLogSchema, ProjectHookSchema } from '../../src/presenters/schemas/hooks.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, runJob } from '../helpers/ci.js';
import { until } from '../helpers/until.js';
import { assertMatches } from '../helpers/contract.js';
import { workTree } from '../helpers/repo.js';

interface Received {
  path: string;
  method: string;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/** An HTTP server that records what it gets; `/status/500` answers 500, `/slow` takes 3 s, `/redirect?to=` redirects. */
async function startReceiver(host = '127.0.0.1') {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const url = new URL(req.url!, 'http://x');
      received.push({ path: url.pathname, method: req.method!, headers: req.headers, body: text ? JSON.parse(text) : null });
      if (url.pathname.startsWith('/status/')) {
        res.statusCode = Number(url.pathname.slice('/status/'.length));
        return res.end('nope');
      }
      if (url.pathname === '/slow') {
        setTimeout(() => res.end('late'), 3000).unref();
        return;
      }
      if (url.pathname === '/redirect') {
        res.statusCode = 302;
        res.setHeader('Location', url.searchParams.get('to')!);
        return res.end();
      }
      res.setHeader('Content-Type', 'text/plain');
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as AddressInfo).port;
  return {
    received,
    base: `http://${host}:${port}`,
    port,
    on: (path: string) => received.filter((r) => r.path === path),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('Project webhooks', () => {
  let t: TestContext;
  let project: Project;
  let maintainer: TestUser, developer: TestUser, outsider: TestUser;
  let rx: Awaited<ReturnType<typeof startReceiver>>;
  const P = () => `/api/v4/projects/${project.id}`;
  const deliver = () => drainJobs(t.app.cairn);
  const hook = async (body: Record<string, unknown>, p: Project = project) => {
    const res = await t.post(`/api/v4/projects/${p.id}/hooks`, body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  };

  before(async () => {
    t = await createTestContext({ webhookAllowLocalRequests: true, webhookTimeout: 1 });
    rx = await startReceiver();
    const group = await t.createGroup();
    project = await t.createProject({ group });
    [maintainer, developer, outsider] = await Promise.all([t.createUser(), t.createUser(), t.createUser()]);
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, developer.user, 30);
    await commitFiles(t, project, { 'README.md': '# hooks\n' });
    await deliver();
  });
  after(async () => {
    await rx?.close();
    await t?.close();
  });

  it('creates, lists, reads, updates and deletes hooks with every event switch; secrets are never shown', async () => {
    const created = await t.post(`${P()}/hooks`, {
      url: `${rx.base}/crud/{secret}`,
      name: 'ci bot',
      description: 'for the bot',
      token: 's3cret-token',
      issues_events: true,
      push_events_branch_filter: 'main',
      url_variables: [{ key: 'secret', value: 'hidden-part' }],
      custom_headers: [{ key: 'X-Custom', value: 'custom-value' }],
    }, { token: maintainer.token });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assertMatches(ProjectHookSchema, created.body, 'created hook');
    const h = created.body;
    assert.equal(h.url, `${rx.base}/crud/{secret}`);
    assert.equal(h.push_events, true);
    assert.equal(h.issues_events, true);
    assert.equal(h.tag_push_events, false);
    assert.equal(h.enable_ssl_verification, true);
    assert.equal(h.branch_filter_strategy, 'wildcard');
    assert.equal(h.alert_status, 'executable');
    assert.equal(h.disabled_until, null);
    assert.deepEqual(h.url_variables, [{ key: 'secret' }]);
    assert.deepEqual(h.custom_headers, [{ key: 'X-Custom' }]);
    assert.equal(h.project_id, project.id);
    const text = JSON.stringify(h);
    for (const secret of ['s3cret-token', 'hidden-part', 'custom-value']) assert.ok(!text.includes(secret), secret);
    // Stored encrypted: the clear text is nowhere in the row.
    const row = await t.db.selectFrom('web_hooks').selectAll().where('id', '=', h.id).executeTakeFirstOrThrow();
    for (const secret of ['s3cret-token', 'hidden-part', 'custom-value']) assert.ok(!JSON.stringify(row).includes(secret), secret);

    const list = await t.get(`${P()}/hooks`, { token: maintainer.token });
    assert.equal(list.status, 200);
    assert.ok(list.body.some((x: any) => x.id === h.id));
    assert.equal(list.headers['x-total'], String(list.body.length));

    const updated = await t.put(`${P()}/hooks/${h.id}`, { merge_requests_events: true, issues_events: false, branch_filter_strategy: 'regex', push_events_branch_filter: '^rel-' }, { token: maintainer.token });
    assert.equal(updated.status, 200, JSON.stringify(updated.body));
    assert.equal(updated.body.merge_requests_events, true);
    assert.equal(updated.body.issues_events, false);
    assert.equal(updated.body.push_events_branch_filter, '^rel-');
    assert.deepEqual(updated.body.url_variables, [{ key: 'secret' }]);

    // Who may: maintainers; a developer is refused, an outsider does not see the project.
    assert.equal((await t.get(`${P()}/hooks`, { token: developer.token })).status, 403);
    assert.equal((await t.get(`${P()}/hooks/${h.id}`, { token: outsider.token })).status, 404);
    assert.equal((await t.get(`${P()}/hooks`, { token: null })).status, 401);

    // Bad input: GitLab's answers.
    assert.deepEqual((await t.post(`${P()}/hooks`, {})).body, { error: 'url is missing' });
    assert.equal((await t.post(`${P()}/hooks`, { url: 'ftp://example.com/x' })).status, 422);
    assert.equal((await t.post(`${P()}/hooks`, { url: `${rx.base}/{missing}` })).status, 422);
    assert.equal((await t.post(`${P()}/hooks`, { url: `${rx.base}/x`, branch_filter_strategy: 'regex', push_events_branch_filter: '(' })).body.message, 'Invalid branch filter given');
    assert.equal((await t.post(`${P()}/hooks`, { url: `${rx.base}/x`, branch_filter_strategy: 'sometimes' })).status, 400);
    assert.equal((await t.post(`${P()}/hooks`, { url: `${rx.base}/x`, custom_headers: [{ key: 'X-Gitlab-Token', value: 'x' }] })).status, 422);
    assert.equal((await t.get(`${P()}/hooks/999999`)).status, 404);

    assert.equal((await t.delete(`${P()}/hooks/${h.id}`, { token: maintainer.token })).status, 204);
    assert.equal((await t.get(`${P()}/hooks/${h.id}`)).status, 404);
  });

  it('delivers a push with GitLab headers, token, custom headers and URL variables, at most 20 commits, per the branch filter', async () => {
    const p = await t.createProject();
    await commitFiles(t, p, { 'a.txt': 'a\n' });
    const h = await hook({ url: `${rx.base}/push/{part}`, token: 'tok-123', url_variables: [{ key: 'part', value: 'p1' }], custom_headers: [{ key: 'X-Extra', value: 'extra' }], tag_push_events: true }, p);
    const filtered = await hook({ url: `${rx.base}/filtered`, push_events_branch_filter: 'feature/*' }, p);
    const sha = await commitFiles(t, p, { 'b.txt': 'b\n', 'a.txt': 'a2\n' }, { message: 'second\n\nbody' });
    await deliver();
    const got = rx.on('/push/p1');
    assert.equal(got.length, 1);
    const [r] = got;
    assert.equal(r.method, 'POST');
    assert.equal(r.headers['x-gitlab-event'], 'Push Hook');
    assert.equal(r.headers['x-gitlab-token'], 'tok-123');
    assert.equal(r.headers['x-extra'], 'extra');
    assert.equal(r.headers['content-type'], 'application/json');
    assert.match(String(r.headers['user-agent']), /^GitLab\//);
    assert.equal(r.headers['x-gitlab-instance'], t.config.externalUrl);
    for (const hname of ['x-gitlab-event-uuid', 'x-gitlab-webhook-uuid', 'idempotency-key']) assert.match(String(r.headers[hname]), /^[0-9a-f-]{36}$/, hname);
    const b = r.body;
    assert.equal(b.object_kind, 'push');
    assert.equal(b.event_name, 'push');
    assert.equal(b.ref, 'refs/heads/main');
    assert.equal(b.after, sha);
    assert.equal(b.checkout_sha, sha);
    assert.equal(b.user_username, 'root');
    assert.equal(b.project_id, p.id);
    assert.equal(b.project.id, p.id);
    assert.equal(b.project.path_with_namespace.endsWith(p.path), true);
    assert.equal(b.repository.name, p.name);
    assert.equal(b.total_commits_count, 1);
    assert.equal(b.commits.length, 1);
    assert.equal(b.commits[0].id, sha);
    assert.equal(b.commits[0].message, 'second\n\nbody');
    assert.equal(b.commits[0].title, 'second');
    assert.deepEqual(b.commits[0].added, ['b.txt']);
    assert.deepEqual(b.commits[0].modified, ['a.txt']);
    assert.deepEqual(b.commits[0].removed, []);
    // The branch filter kept main's push from the feature/* hook.
    assert.equal(rx.on('/filtered').length, 0);

    // 25 new commits on a new branch: 20 in the payload, the count says 25.
    const w = workTree(t, p);
    w.git(['fetch', '-q', w.bare, 'main']);
    w.git(['checkout', '-q', '-b', 'tmp', 'FETCH_HEAD']);
    for (let i = 0; i < 25; i++) w.commit(`c${i}`);
    const tip = w.git(['rev-parse', 'HEAD']);
    w.git(['push', '-q', w.bare, `${tip}:refs/keep/tmp`]);
    const branch = await t.post(`/api/v4/projects/${p.id}/repository/branches`, { branch: 'feature/big', ref: tip });
    assert.equal(branch.status, 201, JSON.stringify(branch.body));
    await deliver();
    const big = rx.on('/push/p1').at(-1)!.body;
    assert.equal(big.ref, 'refs/heads/feature/big');
    assert.equal(big.total_commits_count, 25);
    assert.equal(big.commits.length, 20);
    assert.equal(big.commits.at(-1).id, tip);
    // Empty commits: each one's lists are there, and empty.
    for (const c of big.commits) assert.deepEqual([c.added, c.modified, c.removed], [[], [], []], c.id);
    assert.equal(big.before, '0000000000000000000000000000000000000000');
    // This one passes feature/*.
    assert.equal(rx.on('/filtered').length, 1);

    // A tag push.
    const tag = await t.post(`/api/v4/projects/${p.id}/repository/tags`, { tag_name: 'v1.0', ref: 'main' });
    assert.equal(tag.status, 201, JSON.stringify(tag.body));
    await deliver();
    const tp = rx.on('/push/p1').at(-1)!;
    assert.equal(tp.headers['x-gitlab-event'], 'Tag Push Hook');
    assert.equal(tp.body.object_kind, 'tag_push');
    assert.equal(tp.body.ref, 'refs/tags/v1.0');
    assert.equal(rx.on('/filtered').length, 1);

    // The log: newest first, the token and custom header masked, the URL with its placeholder.
    const log = await t.get(`/api/v4/projects/${p.id}/hooks/${h.id}/events`);
    assert.equal(log.status, 200);
    assert.equal(log.body.length, 3);
    for (const e of log.body) assertMatches(HookLogSchema, e, 'hook log');
    assert.equal(log.body[0].trigger, 'tag_push_hooks');
    assert.equal(log.body[0].response_status, '200');
    assert.equal(log.body[0].url, `${rx.base}/push/{part}`);
    assert.equal(log.body[0].request_headers['X-Gitlab-Token'], '[REDACTED]');
    assert.equal(log.body[0].request_headers['X-Extra'], '[REDACTED]');
    assert.equal(log.body[0].request_data.object_kind, 'tag_push');
    assert.ok(!JSON.stringify(log.body).includes('tok-123'));
    assert.equal((await t.get(`/api/v4/projects/${p.id}/hooks/${filtered.id}/events`, { query: { status: 'successful' } })).body.length, 1);
    assert.equal((await t.get(`/api/v4/projects/${p.id}/hooks/${filtered.id}/events`, { query: { status: 'server_failure' } })).body.length, 0);
    assert.equal((await t.get(`/api/v4/projects/${p.id}/hooks/${filtered.id}/events`, { query: { status: 'bogus' } })).status, 400);
  });

  it('delivers issue events (open, update with changes, close) and confidential issues only to hooks that take them', async () => {
    const p = await t.createProject();
    await hook({ url: `${rx.base}/issues`, push_events: false, issues_events: true }, p);
    await hook({ url: `${rx.base}/confidential`, push_events: false, confidential_issues_events: true }, p);
    const issue = await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'Broken', description: 'it is' });
    assert.equal(issue.status, 201);
    await t.put(`/api/v4/projects/${p.id}/issues/${issue.body.iid}`, { title: 'Really broken' });
    await t.put(`/api/v4/projects/${p.id}/issues/${issue.body.iid}`, { state_event: 'close' });
    const secret = await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'Secret', confidential: true });
    await deliver();
    const got = rx.on('/issues');
    assert.deepEqual(got.map((r) => r.body.object_attributes.action), ['open', 'update', 'close']);
    const [open, update, close] = got.map((r) => r.body);
    assert.equal(got[0].headers['x-gitlab-event'], 'Issue Hook');
    assert.equal(open.object_kind, 'issue');
    assert.equal(open.event_type, 'issue');
    assert.equal(open.object_attributes.iid, issue.body.iid);
    assert.equal(open.object_attributes.title, 'Broken');
    assert.equal(open.object_attributes.state, 'opened');
    assert.equal(open.object_attributes.url.endsWith(`/-/issues/${issue.body.iid}`), true);
    assert.equal(open.user.username, 'root');
    assert.equal(open.project.id, p.id);
    assert.equal(open.repository.name, p.name);
    assert.deepEqual(update.changes.title, { previous: 'Broken', current: 'Really broken' });
    assert.ok(update.changes.updated_at);
    assert.equal(close.object_attributes.state, 'closed');
    assert.deepEqual(close.changes.state_id, { previous: 1, current: 2 });
    const conf = rx.on('/confidential');
    assert.equal(conf.length, 1);
    assert.equal(conf[0].headers['x-gitlab-event'], 'Confidential Issue Hook');
    assert.equal(conf[0].body.event_type, 'confidential_issue');
    assert.equal(conf[0].body.object_attributes.id, secret.body.id);
  });

  it('delivers release events (create, update, delete) with assets and commit, and a test release event', async () => {
    const p = await t.createProject();
    const sha = await commitFiles(t, p, { 'a.txt': 'a\n' }, { message: 'Release me\n\nbody' });
    const h = await hook({ url: `${rx.base}/releases`, push_events: false, tag_push_events: false, releases_events: true }, p);
    await hook({ url: `${rx.base}/no-releases`, push_events: false }, p);
    assert.deepEqual((await t.post(`/api/v4/projects/${p.id}/hooks/${h.id}/test/releases_events`)).body, { message: 'Ensure the project has releases.' });
    const created = await t.post(`/api/v4/projects/${p.id}/releases`, {
      tag_name: 'v1.0/rc',
      ref: 'main',
      name: 'First',
      description: 'notes',
      released_at: '2026-01-02T03:04:05Z',
      assets: { links: [{ name: 'Binary', url: 'https://downloads.example.com/bin', link_type: 'package' }, { name: 'Here', url: `${t.config.externalUrl}/x/y` }] },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal((await t.put(`/api/v4/projects/${p.id}/releases/${encodeURIComponent('v1.0/rc')}`, { name: 'Renamed' })).status, 200);
    assert.equal((await t.delete(`/api/v4/projects/${p.id}/releases/${encodeURIComponent('v1.0/rc')}`)).status, 200);
    await deliver();
    const got = rx.on('/releases');
    assert.deepEqual(got.map((r) => [r.headers['x-gitlab-event'], r.body.action, r.body.name]), [
      ['Release Hook', 'create', 'First'],
      ['Release Hook', 'update', 'Renamed'],
      ['Release Hook', 'delete', 'Renamed'],
    ]);
    const b = got[0].body;
    assert.equal(b.object_kind, 'release');
    assert.equal(b.tag, 'v1.0/rc');
    assert.equal(b.description, 'notes');
    assert.equal(b.released_at, '2026-01-02 03:04:05 UTC');
    assert.match(b.created_at, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
    assert.equal(b.url.endsWith(`/-/releases/${encodeURIComponent('v1.0/rc')}`), true);
    assert.equal(b.project.id, p.id);
    assert.equal(b.assets.count, 6);
    assert.deepEqual(b.assets.links.map((l: any) => [l.name, l.link_type, l.external]), [['Binary', 'package', true], ['Here', 'other', false]]);
    assert.deepEqual(b.assets.sources.map((s: any) => s.format), ['zip', 'tar.gz', 'tar.bz2', 'tar']);
    assert.equal(b.assets.sources[0].url.endsWith(`/-/archive/v1.0/rc/${p.path}-v1.0-rc.zip`), true);
    assert.equal(b.commit.id, sha);
    assert.equal(b.commit.title, 'Release me');
    assert.equal(b.commit.author.email.length > 0, true);
    // The hook without releases_events heard none of it.
    assert.equal(rx.on('/no-releases').length, 0);
    // A test release event: the latest release.
    await t.post(`/api/v4/projects/${p.id}/releases`, { tag_name: 'v2', ref: 'main' });
    await deliver();
    const before = got.length;
    assert.equal((await t.post(`/api/v4/projects/${p.id}/hooks/${h.id}/test/releases_events`)).status, 201);
    const tested = rx.on('/releases').slice(before + 1);
    assert.deepEqual(tested.map((r) => [r.headers['x-gitlab-event'], r.body.tag]), [['Release Hook', 'v2']]);
  });

  it('delivers milestone events (create, close, reopen) for project milestones', async () => {
    const p = await t.createProject();
    await hook({ url: `${rx.base}/milestones`, push_events: false, milestone_events: true }, p);
    const m = await t.post(`/api/v4/projects/${p.id}/milestones`, { title: 'v1.0', description: 'First', due_date: '2026-12-31', start_date: '2026-12-01' });
    assert.equal(m.status, 201, JSON.stringify(m.body));
    // An edit is no event; closing and reopening are.
    await t.put(`/api/v4/projects/${p.id}/milestones/${m.body.id}`, { description: 'First stable' });
    await t.put(`/api/v4/projects/${p.id}/milestones/${m.body.id}`, { state_event: 'close' });
    await t.put(`/api/v4/projects/${p.id}/milestones/${m.body.id}`, { state_event: 'close' });
    await t.put(`/api/v4/projects/${p.id}/milestones/${m.body.id}`, { state_event: 'activate' });
    await deliver();
    const got = rx.on('/milestones');
    assert.deepEqual(got.map((r) => [r.headers['x-gitlab-event'], r.body.action, r.body.object_attributes.state]), [
      ['Milestone Hook', 'create', 'active'],
      ['Milestone Hook', 'close', 'closed'],
      ['Milestone Hook', 'reopen', 'active'],
    ]);
    const b = got[0].body;
    assert.equal(b.object_kind, 'milestone');
    assert.equal(b.event_type, 'milestone');
    assert.equal(b.project.id, p.id);
    assert.deepEqual(
      { ...b.object_attributes, created_at: undefined, updated_at: undefined },
      { id: m.body.id, iid: m.body.iid, title: 'v1.0', description: 'First', state: 'active', created_at: undefined, updated_at: undefined, due_date: '2026-12-31', start_date: '2026-12-01', group_id: null, project_id: p.id },
    );
    assert.match(b.object_attributes.created_at, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
  });

  it('delivers emoji events (award, revoke) with what was awarded on; none for a confidential issue', async () => {
    const p = await t.createProject();
    await commitFiles(t, p, { 'a.txt': 'a\n' });
    await hook({ url: `${rx.base}/emoji`, push_events: false, emoji_events: true }, p);
    const issue = (await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'Likeable' })).body;
    const secret = (await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'Hidden', confidential: true })).body;
    const note = (await t.post(`/api/v4/projects/${p.id}/issues/${issue.iid}/notes`, { body: 'a comment' })).body;
    const award = await t.post(`/api/v4/projects/${p.id}/issues/${issue.iid}/award_emoji`, { name: 'thumbsup' });
    assert.equal(award.status, 201, JSON.stringify(award.body));
    assert.equal((await t.post(`/api/v4/projects/${p.id}/issues/${secret.iid}/award_emoji`, { name: 'thumbsup' })).status, 201);
    const onNote = await t.post(`/api/v4/projects/${p.id}/issues/${issue.iid}/notes/${note.id}/award_emoji`, { name: 'tada' });
    assert.equal(onNote.status, 201, JSON.stringify(onNote.body));
    assert.equal((await t.delete(`/api/v4/projects/${p.id}/issues/${issue.iid}/award_emoji/${award.body.id}`)).status, 204);
    await deliver();
    const got = rx.on('/emoji');
    assert.deepEqual(got.map((r) => [r.headers['x-gitlab-event'], r.body.event_type, r.body.object_attributes.name, r.body.object_attributes.awardable_type]), [
      ['Emoji Hook', 'award', 'thumbsup', 'Issue'],
      ['Emoji Hook', 'award', 'tada', 'Note'],
      ['Emoji Hook', 'revoke', 'thumbsup', 'Issue'],
    ]);
    const [onIssue, noteAward] = got.map((r) => r.body);
    assert.equal(onIssue.object_kind, 'emoji');
    assert.equal(onIssue.user.username, 'root');
    assert.equal(onIssue.project_id, p.id);
    assert.equal(onIssue.object_attributes.id, award.body.id);
    assert.equal(onIssue.object_attributes.awardable_id, issue.id);
    assert.equal(onIssue.object_attributes.awarded_on_url.endsWith(`/-/issues/${issue.iid}`), true);
    assert.match(onIssue.object_attributes.created_at, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
    assert.equal(onIssue.issue.iid, issue.iid);
    assert.equal(noteAward.note.id, note.id);
    assert.equal(noteAward.note.note, 'a comment');
    assert.equal('action' in noteAward.note, false);
    assert.equal(noteAward.issue.iid, issue.iid);
    assert.equal(noteAward.object_attributes.awarded_on_url.endsWith(`/-/issues/${issue.iid}#note_${note.id}`), true);
  });

  it('delivers merge request events (open, update, close, merge) and note events', async () => {
    const p = await t.createProject();
    await commitFiles(t, p, { 'a.txt': 'a\n' });
    await commitFiles(t, p, { 'b.txt': 'b\n' }, { branch: 'topic', startBranch: 'main' });
    await hook({ url: `${rx.base}/mrs`, push_events: false, merge_requests_events: true }, p);
    await hook({ url: `${rx.base}/notes`, push_events: false, note_events: true }, p);
    const mr = await t.post(`/api/v4/projects/${p.id}/merge_requests`, { source_branch: 'topic', target_branch: 'main', title: 'Add b' });
    assert.equal(mr.status, 201, JSON.stringify(mr.body));
    await t.put(`/api/v4/projects/${p.id}/merge_requests/${mr.body.iid}`, { title: 'Add b.txt' });
    const note = await t.post(`/api/v4/projects/${p.id}/merge_requests/${mr.body.iid}/notes`, { body: 'Looks good' });
    assert.equal(note.status, 201);
    const merged = await t.put(`/api/v4/projects/${p.id}/merge_requests/${mr.body.iid}/merge`, {});
    assert.equal(merged.status, 200, JSON.stringify(merged.body));
    await deliver();
    const got = rx.on('/mrs').map((r) => r.body);
    assert.deepEqual(got.map((b) => b.object_attributes.action), ['open', 'update', 'merge']);
    assert.equal(rx.on('/mrs')[0].headers['x-gitlab-event'], 'Merge Request Hook');
    assert.equal(got[0].object_kind, 'merge_request');
    assert.equal(got[0].object_attributes.source_branch, 'topic');
    assert.equal(got[0].object_attributes.target.id, p.id);
    assert.equal(got[0].object_attributes.last_commit.id, mr.body.sha);
    assert.deepEqual(got[1].changes.title, { previous: 'Add b', current: 'Add b.txt' });
    assert.equal(got[2].object_attributes.state, 'merged');
    const notes = rx.on('/notes');
    assert.equal(notes.length, 1);
    assert.equal(notes[0].headers['x-gitlab-event'], 'Note Hook');
    const n = notes[0].body;
    assert.equal(n.object_kind, 'note');
    assert.equal(n.object_attributes.note, 'Looks good');
    assert.equal(n.object_attributes.noteable_type, 'MergeRequest');
    assert.equal(n.object_attributes.action, 'create');
    assert.equal(n.merge_request.iid, mr.body.iid);

    // An issue note and its update; a note on a confidential issue goes to confidential note hooks only.
    await hook({ url: `${rx.base}/cnotes`, push_events: false, confidential_note_events: true }, p);
    const issue = await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'x' });
    const inote = await t.post(`/api/v4/projects/${p.id}/issues/${issue.body.iid}/notes`, { body: 'first' });
    await t.put(`/api/v4/projects/${p.id}/issues/${issue.body.iid}/notes/${inote.body.id}`, { body: 'edited' });
    const secretIssue = await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'hidden', confidential: true });
    await t.post(`/api/v4/projects/${p.id}/issues/${secretIssue.body.iid}/notes`, { body: 'between us' });
    await deliver();
    const later = rx.on('/notes').slice(1).map((r) => r.body);
    assert.deepEqual(later.map((b) => [b.object_attributes.action, b.object_attributes.note]), [['create', 'first'], ['update', 'edited']]);
    assert.equal(later[0].issue.iid, issue.body.iid);
    const cn = rx.on('/cnotes');
    assert.equal(cn.length, 1);
    assert.equal(cn[0].headers['x-gitlab-event'], 'Confidential Note Hook');
    assert.equal(cn[0].body.event_type, 'confidential_note');
    assert.equal(cn[0].body.issue.iid, secretIssue.body.iid);
  });

  it('retries a failing delivery, disables the hook for a while after 4 failures, for good after 40, and a successful test enables it again', async () => {
    const p = await t.createProject();
    const h = await hook({ url: `${rx.base}/status/500`, push_events: false, issues_events: true }, p);
    await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'one' });
    await deliver();
    assert.equal(rx.on('/status/500').length, 1);
    // The retry waits for its backoff; make it due.
    const due = async () => {
      await sql`update background_jobs set run_at = now() where state = 'pending' and kind = 'webhooks.deliver'`.execute(t.db);
      await deliver();
    };
    await due();
    await due();
    assert.equal(rx.on('/status/500').length, 3, 'three attempts in all');
    await due();
    assert.equal(rx.on('/status/500').length, 3, 'then given up');
    let state = (await t.get(`/api/v4/projects/${p.id}/hooks/${h.id}`)).body;
    assert.equal(state.alert_status, 'executable');
    // The fourth failure in a row disables it for a minute.
    await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'two' });
    await deliver();
    state = (await t.get(`/api/v4/projects/${p.id}/hooks/${h.id}`)).body;
    assert.equal(state.alert_status, 'temporarily_disabled');
    const until = new Date(state.disabled_until).getTime();
    assert.ok(until > Date.now() + 50_000 && until < Date.now() + 70_000, state.disabled_until);
    // While disabled, events are dropped: the receiver sees nothing new.
    const before = rx.on('/status/500').length;
    await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'three' });
    await due();
    assert.equal(rx.on('/status/500').length, before);
    // After the backoff the next failure disables it again, for twice as long.
    await t.db.updateTable('web_hooks').set({ disabled_until: new Date(Date.now() - 1000) }).where('id', '=', h.id).execute();
    await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'four' });
    await deliver();
    state = (await t.get(`/api/v4/projects/${p.id}/hooks/${h.id}`)).body;
    assert.equal(state.alert_status, 'temporarily_disabled');
    const until2 = new Date(state.disabled_until).getTime();
    assert.ok(until2 > Date.now() + 110_000 && until2 < Date.now() + 130_000, state.disabled_until);
    // Forty failures in a row: disabled for good.
    await t.db.updateTable('web_hooks').set({ recent_failures: 39, disabled_until: null }).where('id', '=', h.id).execute();
    await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'five' });
    await deliver();
    state = (await t.get(`/api/v4/projects/${p.id}/hooks/${h.id}`)).body;
    assert.equal(state.alert_status, 'disabled');
    assert.equal(state.disabled_until, null);

    // A failing test answers 422 and keeps it disabled; pointing it at a working URL and testing enables it.
    const failedTest = await t.post(`/api/v4/projects/${p.id}/hooks/${h.id}/test/issues_events`);
    assert.equal(failedTest.status, 422);
    await t.put(`/api/v4/projects/${p.id}/hooks/${h.id}`, { url: `${rx.base}/healed` });
    const test = await t.post(`/api/v4/projects/${p.id}/hooks/${h.id}/test/issues_events`);
    assert.equal(test.status, 201, JSON.stringify(test.body));
    assert.deepEqual(test.body, { message: '201 Created' });
    assert.equal(rx.on('/healed').length, 1);
    assert.equal(rx.on('/healed')[0].headers['x-gitlab-event'], 'Issue Hook');
    assert.equal(rx.on('/healed')[0].body.object_attributes.title, 'five');
    state = (await t.get(`/api/v4/projects/${p.id}/hooks/${h.id}`)).body;
    assert.equal(state.alert_status, 'executable');
    const log = (await t.get(`/api/v4/projects/${p.id}/hooks/${h.id}/events`, { query: { status: ['500'] } })).body;
    assert.ok(log.length >= 5);
    assert.equal(log[0].response_body, 'nope');
  });

  it('test deliveries of each kind, and GitLab\'s messages when there is nothing to send', async () => {
    const p = await t.createProject();
    const h = await hook({ url: `${rx.base}/tests` }, p);
    const test = (trigger: string) => t.post(`/api/v4/projects/${p.id}/hooks/${h.id}/test/${trigger}`);
    assert.deepEqual((await test('push_events')).body, { message: 'Ensure the project has at least one commit.' });
    assert.deepEqual((await test('issues_events')).body, { message: 'Ensure the project has issues.' });
    assert.deepEqual((await test('merge_requests_events')).body, { message: 'Ensure the project has merge requests.' });
    assert.deepEqual((await test('note_events')).body, { message: 'Ensure the project has notes.' });
    assert.deepEqual((await test('tag_push_events')).body, { message: 'Ensure the project has tags.' });
    assert.deepEqual((await test('pipeline_events')).body, { message: 'Ensure the project has CI pipelines.' });
    assert.deepEqual((await test('job_events')).body, { message: 'Ensure the project has CI jobs.' });
    assert.equal((await test('bogus_events')).status, 400);
    await commitFiles(t, p, { 'a.txt': 'a\n' });
    await t.post(`/api/v4/projects/${p.id}/repository/tags`, { tag_name: 'v1', ref: 'main' });
    await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'i' });
    const before = rx.on('/tests').length;
    for (const trigger of ['push_events', 'tag_push_events', 'issues_events', 'confidential_issues_events']) assert.equal((await test(trigger)).status, 201, trigger);
    const got = rx.on('/tests').slice(before);
    assert.deepEqual(got.map((r) => r.headers['x-gitlab-event']), ['Push Hook', 'Tag Push Hook', 'Issue Hook', 'Confidential Issue Hook']);
    assert.equal(got[0].body.commits.length, 1);
    // Only maintainers test.
    assert.equal((await t.post(`/api/v4/projects/${project.id}/hooks/${h.id}/test/push_events`, {}, { token: developer.token })).status, 403);
  });

  it('logs a receiver that is down or too slow as an internal error', async () => {
    const p = await t.createProject();
    const down = await startReceiver();
    const downUrl = `${down.base}/gone`;
    await down.close();
    const h1 = await hook({ url: downUrl, push_events: false, issues_events: true }, p);
    const h2 = await hook({ url: `${rx.base}/slow`, push_events: false, issues_events: true }, p);
    await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'x' });
    await deliver();
    const l1 = (await t.get(`/api/v4/projects/${p.id}/hooks/${h1.id}/events`)).body;
    assert.equal(l1[0].response_status, 'internal error');
    assert.match(l1[0].internal_error_message, /connection refused/i);
    const l2 = (await t.get(`/api/v4/projects/${p.id}/hooks/${h2.id}/events`)).body;
    assert.equal(l2[0].response_status, 'internal error');
    assert.match(l2[0].internal_error_message, /timed out/);
    // Cut off after CAIRN_WEBHOOK_TIMEOUT (1 s), not after the receiver's 3 s.
    assert.ok(l2[0].execution_duration >= 0.9 && l2[0].execution_duration < 2.5, String(l2[0].execution_duration));
  });

  it('delivers pipeline events at each status change, with its jobs, commit and user, and job events', async () => {
    const p = await t.createProject();
    await hook({ url: `${rx.base}/pipelines`, push_events: false, pipeline_events: true }, p);
    await hook({ url: `${rx.base}/jobs`, push_events: false, job_events: true }, p);
    const sha = await commitFiles(t, p, { '.gitlab-ci.yml': 'build:\n  script: echo hi\n' });
    await deliver();
    const pipeline = await latestPipeline(t, p.id);
    const jobs = await jobsByName(t, pipeline.id);
    await runJob(t, jobs.build, 'success');
    await deliver();
    const got = rx.on('/pipelines');
    assert.ok(got.length >= 2, String(got.length));
    assert.equal(got[0].headers['x-gitlab-event'], 'Pipeline Hook');
    const statuses = got.map((r) => r.body.object_attributes.status);
    assert.equal(statuses[0], 'pending');
    assert.equal(statuses.at(-1), 'success');
    const last = got.at(-1)!.body;
    assert.equal(last.object_kind, 'pipeline');
    assert.equal(last.object_attributes.id, pipeline.id);
    assert.equal(last.object_attributes.sha, sha);
    assert.equal(last.object_attributes.ref, 'main');
    assert.deepEqual(last.object_attributes.stages, ['test']);
    assert.ok(last.object_attributes.url.endsWith(`/-/pipelines/${pipeline.id}`));
    assert.equal(last.commit.id, sha);
    assert.equal(last.user.username, 'root');
    assert.equal(last.builds.length, 1);
    assert.equal(last.builds[0].name, 'build');
    assert.equal(last.builds[0].status, 'success');
    assert.equal(last.builds[0].runner.description, 'test runner');
    assert.equal(last.project.id, p.id);
    // Job events: pending, running, success, each with the job as it was then.
    const jobEvents = rx.on('/jobs');
    assert.equal(jobEvents[0].headers['x-gitlab-event'], 'Job Hook');
    assert.deepEqual(jobEvents.map((r) => r.body.build_status), ['pending', 'running', 'success']);
    const done = jobEvents[2].body;
    assert.equal(done.object_kind, 'build');
    assert.equal(done.build_id, jobs.build.id);
    assert.equal(done.build_name, 'build');
    assert.equal(done.build_stage, 'test');
    assert.equal(done.pipeline_id, pipeline.id);
    assert.equal(done.sha, sha);
    assert.equal(done.runner.description, 'test runner');
    assert.ok(done.build_finished_at && done.build_started_at);
    assert.equal(jobEvents[0].body.build_started_at, null);
    assert.equal(done.commit.sha, sha);
    assert.equal(done.project_id, p.id);
    // Test deliveries of both.
    const tests = await t.get(`/api/v4/projects/${p.id}/hooks`);
    const jobHook = tests.body.find((h: any) => h.job_events);
    assert.equal((await t.post(`/api/v4/projects/${p.id}/hooks/${jobHook.id}/test/job_events`)).status, 201);
    assert.equal(rx.on('/jobs').at(-1)!.body.build_id, jobs.build.id);
    assert.equal((await t.post(`/api/v4/projects/${p.id}/hooks/${jobHook.id}/test/pipeline_events`)).status, 201);
    assert.equal(rx.on('/jobs').at(-1)!.headers['x-gitlab-event'], 'Pipeline Hook');
  });

  it('two Cairn processes on one PostgreSQL deliver each event exactly once', { skip: !process.env.DATABASE_URL && 'needs PostgreSQL (DATABASE_URL): two processes share the database' }, async () => {
    const second: App = await buildApp({ config: t.config, prepare: false, logger: false });
    const stops = [startWorker(t.app.cairn, { idleMs: 50 }), startWorker(second.cairn, { idleMs: 50 }), startWorker(t.app.cairn, { idleMs: 50 }), startWorker(second.cairn, { idleMs: 50 })];
    try {
      const p = await t.createProject();
      await hook({ url: `${rx.base}/twice`, push_events: false, issues_events: true }, p);
      await hook({ url: `${rx.base}/twice`, push_events: false, issues_events: true }, p);
      const n = 12;
      await Promise.all(Array.from({ length: n }, (_, i) => (i % 2 ? second.inject({ method: 'POST', url: `/api/v4/projects/${p.id}/issues`, headers: { 'private-token': 'root-test-token-0123456789' }, payload: { title: `t${i}` } }) : t.post(`/api/v4/projects/${p.id}/issues`, { title: `t${i}` }))));
      await until('every delivery', async () => rx.on('/twice').length >= 2 * n, 60_000);
      await new Promise((r) => setTimeout(r, 1500));
      const got = rx.on('/twice');
      assert.equal(got.length, 2 * n);
      const keys = new Set(got.map((r) => r.headers['idempotency-key']));
      assert.equal(keys.size, 2 * n, 'no delivery twice');
      const events = new Set(got.map((r) => r.headers['x-gitlab-event-uuid']));
      assert.equal(events.size, n, 'each event to both hooks');
    } finally {
      await Promise.all(stops.map((s) => s()));
      await second.close();
    }
  });

  it('enqueues nothing for a project without hooks', async () => {
    const p = await t.createProject();
    await t.post(`/api/v4/projects/${p.id}/issues`, { title: 'quiet' });
    const n = await t.db.selectFrom('background_jobs').select((eb) => eb.fn.countAll<number>().as('n')).where('kind', '=', 'webhooks.event').where(sql<boolean>`(payload -> 'event' ->> 'projectId')::int = ${p.id}`).executeTakeFirstOrThrow();
    assert.equal(Number(n.n), 0);
  });
});

describe('Webhooks: SSRF protection', () => {
  let t: TestContext;
  let rx: Awaited<ReturnType<typeof startReceiver>>;
  let project: Project;

  before(async () => {
    // Local requests not allowed; only 127.0.0.2 (where the receiver listens) is on the allowlist.
    t = await createTestContext({ webhookAllowLocalRequests: false, webhookLocalAllowlist: ['127.0.0.2'] });
    rx = await startReceiver('127.0.0.2');
    project = await t.createProject();
  });
  after(async () => {
    await rx?.close();
    await t?.close();
  });

  it('refuses hooks to loopback, link-local and private addresses, a hostname that resolves to loopback included', async () => {
    for (const url of ['http://127.0.0.1:9/x', 'http://localhost:9/x', 'http://169.254.169.254/latest', 'http://10.1.2.3/', 'http://[::1]:9/', 'http://[::ffff:127.0.0.1]/']) {
      const res = await t.post(`/api/v4/projects/${project.id}/hooks`, { url });
      assert.equal(res.status, 422, url);
      assert.deepEqual(res.body, { message: 'Invalid url given' }, url);
    }
    assert.equal((await t.post(`/api/v4/projects/${project.id}/hooks`, { url: `${rx.base}/allowed` })).status, 201);
  });

  it('checks every redirect after DNS resolution: to a hostname of loopback, to a private address', async () => {
    const toLocalhost = (await t.post(`/api/v4/projects/${project.id}/hooks`, { url: `${rx.base}/redirect?to=${encodeURIComponent(`http://localhost:${rx.port}/inner`)}`, push_events: false, issues_events: true })).body;
    const toPrivate = (await t.post(`/api/v4/projects/${project.id}/hooks`, { url: `${rx.base}/redirect?to=${encodeURIComponent('http://10.1.2.3/inner')}`, push_events: false, issues_events: true })).body;
    const allowed = (await t.post(`/api/v4/projects/${project.id}/hooks`, { url: `${rx.base}/redirect?to=${encodeURIComponent(`${rx.base}/landed`)}`, push_events: false, issues_events: true })).body;
    await t.post(`/api/v4/projects/${project.id}/issues`, { title: 'x' });
    await drainJobs(t.app.cairn);
    assert.equal(rx.on('/inner').length, 0);
    // 127.0.0.2 is allowed: a redirect there is followed, as a GET (HTTP's 302 after a POST).
    assert.equal(rx.on('/landed').length, 1);
    const logOf = async (id: number) => (await t.get(`/api/v4/projects/${project.id}/hooks/${id}/events`)).body[0];
    const l1 = await logOf(toLocalhost.id);
    assert.equal(l1.response_status, 'internal error');
    assert.equal(l1.internal_error_message, 'URL is blocked: Requests to localhost are not allowed');
    const l2 = await logOf(toPrivate.id);
    assert.equal(l2.internal_error_message, 'URL is blocked: Requests to the local network are not allowed');
    assert.equal((await logOf(allowed.id)).response_status, '200');
  });
});
