// Releases and Release links APIs as GitLab answers them: a release per tag (the tag made from
// `ref` when missing), notes, milestones with their issue counts, asset links with permanent
// URLs, the latest-release permalink, what guests see of a private project's releases, and a
// group's releases.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { ReleaseLinkSchema, ReleaseSchema } from '../../src/presenters/schemas/releases.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, ProtocolRunner } from '../helpers/ci.js';
import { assertMatches } from '../helpers/contract.js';

describe('Releases API', () => {
  let t: TestContext;
  let group: Namespace;
  let project: Project;
  let guest: TestUser, reporter: TestUser, developer: TestUser, outsider: TestUser;
  let sha: string;
  const rel = (rest = '', p: Project = project) => `/api/v4/projects/${p.id}/releases${rest}`;
  const as = (u: TestUser) => ({ token: u.token });

  before(async () => {
    t = await createTestContext();
    group = await t.createGroup();
    project = await t.createProject({ group });
    [guest, reporter, developer, outsider] = await Promise.all(Array.from({ length: 4 }, () => t.createUser()));
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    sha = await commitFiles(t, project, { 'README.md': '# release me\n' });
    assert.equal((await t.post(`/api/v4/projects/${project.id}/repository/tags`, { tag_name: 'v1.0', ref: 'main' })).status, 201);
  });
  after(async () => {
    await t?.close();
  });

  it('creates a release of an existing tag, with notes, links and milestones, and reads it back', async () => {
    const milestone = await t.post(`/api/v4/projects/${project.id}/milestones`, { title: '1.0' });
    assert.equal(milestone.status, 201);
    for (const state of ['opened', 'closed']) {
      const issue = await t.post(`/api/v4/projects/${project.id}/issues`, { title: `for 1.0 (${state})`, milestone_id: milestone.body.id });
      if (state === 'closed') await t.put(`/api/v4/projects/${project.id}/issues/${issue.body.iid}`, { state_event: 'close' });
    }
    const created = await t.post(rel(), {
      tag_name: 'v1.0',
      name: 'First',
      description: 'The **first** one',
      milestones: ['1.0'],
      assets: { links: [{ name: 'binary', url: 'https://example.com/bin', direct_asset_path: '/bin/app', link_type: 'package' }] },
    }, as(developer));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assertMatches(ReleaseSchema, created.body, 'ReleaseSchema');
    const r = created.body;
    assert.equal(r.tag_name, 'v1.0');
    assert.equal(r.name, 'First');
    assert.equal(r.description, 'The **first** one');
    assert.equal(r.author.id, developer.user.id);
    assert.equal(r.commit.id, sha);
    assert.equal(r.upcoming_release, false);
    assert.equal(r.historical_release, false);
    assert.equal(r.tag_path, `/${group.full_path}/${project.path}/-/tags/v1.0`);
    assert.deepEqual(r.milestones.map((m: { title: string; issue_stats: unknown }) => [m.title, m.issue_stats]), [['1.0', { total: 2, closed: 1 }]]);
    assert.equal(r.assets.count, 5);
    assert.deepEqual(r.assets.sources.map((s: { format: string }) => s.format), ['zip', 'tar.gz', 'tar.bz2', 'tar']);
    assert.equal(r.assets.links[0].direct_asset_url, `${t.app.cairn.config.externalUrl}/${group.full_path}/${project.path}/-/releases/v1.0/downloads/bin/app`);
    assert.equal(r.assets.links[0].link_type, 'package');
    assert.ok(r._links.edit_url);
    assert.deepEqual(r.evidences, []);

    const read = await t.get(rel('/v1.0?include_html_description=true'), as(reporter));
    assert.equal(read.status, 200);
    assert.match(read.body.description_html, /<strong>first<\/strong>/);
    assert.equal(read.body._links.edit_url, undefined, 'reporters may not edit');
    assert.equal((await t.post(rel(), { tag_name: 'v1.0' }, as(developer))).status, 409);
    // The tag shows its release, as GitLab's tag entity does.
    const tag = await t.get(`/api/v4/projects/${project.id}/repository/tags/v1.0`, as(reporter));
    assert.deepEqual(tag.body.release, { tag_name: 'v1.0', description: 'The **first** one' });
    const tags = await t.get(`/api/v4/projects/${project.id}/repository/tags`, as(reporter));
    assert.deepEqual(tags.body.find((x: { name: string }) => x.name === 'v1.0').release, { tag_name: 'v1.0', description: 'The **first** one' });
  });

  it('creates the tag from ref when it does not exist, and says what is wrong otherwise', async () => {
    const created = await t.post(rel(), { tag_name: 'v2.0', ref: 'main', tag_message: 'annotated', released_at: '2030-01-01T00:00:00Z' }, as(developer));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.name, 'v2.0', 'the tag name when no name is given');
    assert.equal(created.body.upcoming_release, true);
    const tag = await t.get(`/api/v4/projects/${project.id}/repository/tags/v2.0`);
    assert.equal(tag.status, 200);
    assert.equal(tag.body.message, 'annotated');
    const noRef = await t.post(rel(), { tag_name: 'v3.0' }, as(developer));
    assert.deepEqual([noRef.status, noRef.body], [422, { message: 'Ref is not specified' }]);
    assert.equal((await t.get(`/api/v4/projects/${project.id}/repository/tags/v3.0`)).status, 404, 'nothing half made');
    assert.equal((await t.post(rel(), { tag_name: 'bad..name', ref: 'main' }, as(developer))).status, 400);
    const noMilestone = await t.post(rel(), { tag_name: 'v4.0', ref: 'main', milestones: ['nope'] }, as(developer));
    assert.deepEqual([noMilestone.status, noMilestone.body], [400, { message: 'Milestone(s) not found: nope' }]);
    const badLink = await t.post(rel(), { tag_name: 'v4.0', ref: 'main', assets: { links: [{ name: 'x', url: 'javascript:alert(1)' }] } }, as(developer));
    assert.equal(badLink.status, 400);
    assert.deepEqual(badLink.body, { message: { url: ['is blocked: Only allowed schemes are http, https, ftp'] } });
    assert.equal((await t.post(rel(), { tag_name: 'v4.0', ref: 'main', released_at: 'yesterday' }, as(developer))).status, 400);
  });

  it('lists newest first with pagination, and the latest permalink redirects', async () => {
    const list = await t.get(rel('?per_page=1'), as(guest));
    assert.equal(list.status, 200);
    assert.equal(list.headers['x-total'], '2');
    assert.deepEqual(list.body.map((r: { tag_name: string }) => r.tag_name), ['v2.0'], 'by released_at, the upcoming one first');
    const byCreation = await t.get(rel('?order_by=created_at&sort=asc'), as(guest));
    assert.deepEqual(byCreation.body.map((r: { tag_name: string }) => r.tag_name), ['v1.0', 'v2.0']);
    assert.equal((await t.get(rel('?order_by=title'), as(guest))).status, 400);
    const latest = await t.get(rel('/permalink/latest'), as(guest));
    assert.equal(latest.status, 302);
    assert.equal(latest.headers.location, `/api/v4/projects/${project.id}/releases/v2.0`);
    const deeper = await t.get(rel('/permalink/latest/assets/links'), as(guest));
    assert.equal(deeper.headers.location, `/api/v4/projects/${project.id}/releases/v2.0/assets/links`);
  });

  it('manages asset links: create, read, update, refuse duplicates, redirect the permanent URL, delete', async () => {
    const made = await t.post(rel('/v2.0/assets/links'), { name: 'docs', url: 'https://example.com/docs', filepath: '/docs' }, as(developer));
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assertMatches(ReleaseLinkSchema, made.body, 'ReleaseLinkSchema');
    assert.equal(made.body.link_type, 'other');
    const dup = await t.post(rel('/v2.0/assets/links'), { name: 'docs', url: 'https://example.com/other' }, as(developer));
    assert.deepEqual([dup.status, dup.body], [400, { message: { name: ['has already been taken'] } }]);
    assert.equal((await t.post(rel('/v2.0/assets/links'), { name: 'p', url: 'https://example.com/p', filepath: '../etc' }, as(developer))).status, 400);
    const updated = await t.put(rel(`/v2.0/assets/links/${made.body.id}`), { name: 'manual', link_type: 'runbook' }, as(developer));
    assert.equal(updated.status, 200);
    assert.deepEqual([updated.body.name, updated.body.url, updated.body.link_type], ['manual', 'https://example.com/docs', 'runbook']);
    const download = await t.get(rel('/v2.0/downloads/docs'), as(guest));
    assert.deepEqual([download.status, download.headers.location], [302, 'https://example.com/docs']);
    assert.equal((await t.get(rel('/v2.0/downloads/nothing'), as(guest))).status, 404);
    assert.equal((await t.get(rel('/v2.0/assets/links'), as(guest))).body.length, 1);
    assert.equal((await t.post(rel('/v2.0/assets/links'), { name: 'r', url: 'https://example.com/r' }, as(reporter))).status, 403);
    const gone = await t.delete(rel(`/v2.0/assets/links/${made.body.id}`), as(developer));
    assert.deepEqual([gone.status, gone.body.id], [200, made.body.id]);
    assert.equal((await t.get(rel(`/v2.0/assets/links/${made.body.id}`), as(guest))).status, 404);
  });

  it('shows guests of a private project no code, refuses writes below developer, hides it from outsiders', async () => {
    const seen = await t.get(rel('/v1.0'), as(guest));
    assert.equal(seen.status, 200);
    assert.equal(seen.body.commit, undefined);
    assert.equal(seen.body.tag_path, undefined);
    assert.deepEqual(seen.body.assets.sources, []);
    assert.equal(seen.body.assets.count, 1);
    assert.equal((await t.put(rel('/v1.0'), { description: 'no' }, as(reporter))).status, 403);
    assert.equal((await t.get(rel(), as(outsider))).status, 404);
    assert.equal((await t.get(rel(), { token: null })).status, 404);
  });

  it('updates and deletes a release (its tag stays)', async () => {
    const updated = await t.put(rel('/v1.0'), { name: 'Renamed', milestones: [] }, as(developer));
    assert.equal(updated.status, 200);
    assert.equal(updated.body.name, 'Renamed');
    assert.equal(updated.body.description, 'The **first** one');
    assert.equal(updated.body.milestones, undefined);
    assert.equal((await t.put(rel('/v9'), { name: 'x' }, as(developer))).status, 404);
    const deleted = await t.delete(rel('/v1.0'), as(developer));
    assert.equal(deleted.status, 200);
    assert.equal(deleted.body.name, 'Renamed');
    assert.equal((await t.get(rel('/v1.0'), as(developer))).status, 404);
    assert.equal((await t.get(`/api/v4/projects/${project.id}/repository/tags/v1.0`)).status, 200);
  });

  it("lists a group's releases across its projects, as far as the caller may see them", async () => {
    const hidden = await t.createProject({ group });
    await commitFiles(t, hidden, { 'a.txt': 'a' });
    assert.equal((await t.post(rel('', hidden), { tag_name: 'h1', ref: 'main' })).status, 201);
    const asRoot = await t.get(`/api/v4/groups/${group.id}/releases`);
    assert.deepEqual(asRoot.body.map((r: { tag_name: string }) => r.tag_name).sort(), ['h1', 'v2.0']);
    // The developer is a member of one project of the group only.
    const asDeveloper = await t.get(`/api/v4/groups/${group.id}/releases`, as(developer));
    assert.equal(asDeveloper.status, 200);
    assert.deepEqual(asDeveloper.body.map((r: { tag_name: string }) => r.tag_name), ['v2.0']);
  });

  it("serves a release's source archives at the URLs it lists", async () => {
    const open = await t.createProject({ visibility: 20 });
    await commitFiles(t, open, { 'hello.txt': 'hello\n' });
    const made = await t.post(rel('', open), { tag_name: 'rel/1.0', ref: 'main' });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const base = t.app.cairn.config.externalUrl;
    for (const { format, url } of made.body.assets.sources as { format: string; url: string }[]) {
      assert.ok(url.startsWith(base), url);
      const res = await t.app.inject({ method: 'GET', url: url.slice(base.length) });
      assert.equal(res.statusCode, 200, `${format}: ${url}`);
      assert.equal(res.headers['content-type'], 'application/octet-stream');
      const bytes = res.rawPayload;
      if (format === 'zip') assert.equal(bytes.subarray(0, 2).toString('latin1'), 'PK');
      if (format === 'tar.gz') assert.deepEqual([...bytes.subarray(0, 2)], [0x1f, 0x8b]);
      if (format === 'tar.bz2') assert.equal(bytes.subarray(0, 3).toString('latin1'), 'BZh');
    }
    const path = new URL(made.body.assets.sources[0].url).pathname;
    assert.equal((await t.get(path.replace(/\.zip$/, '.exe'), { token: null })).status, 404);
    // Hostile refs: options, traversal, revision syntax, control characters, a huge ref. Never a 500
    // and never an archive of something that is not a ref or commit of this project.
    const projectBase = path.slice(0, path.indexOf('/-/archive/'));
    const marker = `/tmp/cairn-archive-${process.pid}`;
    const hostile = ['--output=' + marker, '--remote=ext::sh', '..', '..%2F..%2F..%2Fetc%2Fpasswd', 'main:hello.txt', 'main^{tree}', 'main@{-1}', '-', '%00main', '%0amain', 'x'.repeat(5000)];
    const config = t.app.cairn.config as { archiveRateLimit: number };
    const limit = config.archiveRateLimit;
    config.archiveRateLimit = 0;
    try {
      for (const ref of hostile) {
        const res = await t.app.inject({ method: 'GET', url: `${projectBase}/-/archive/${ref}/${open.path}-x.zip` });
        assert.ok([400, 404].includes(res.statusCode), `${ref.slice(0, 40)}: ${res.statusCode} ${res.headers.location}`);
      }
    } finally {
      config.archiveRateLimit = limit;
    }
    assert.equal(fs.existsSync(marker), false);
    // A private project's archives are not for outsiders: anonymous callers are sent to sign in.
    const hidden = await t.get(`/${group.full_path}/${project.path}/-/archive/v2.0/${project.path}-v2.0.zip`, { token: null });
    assert.equal(hidden.status, 302);
    assert.match(String(hidden.headers.location), /\/users\/sign_in/);
  });

  it('a CI job token creates a release (release-cli), as its user', async () => {
    const own = await t.createProject();
    await t.addMember(own, developer.user, 30);
    await commitFiles(t, own, { 'README.md': 'x' });
    await commitFiles(t, own, { '.gitlab-ci.yml': 'release: { script: [x] }\n' }, { branch: 'rel', startBranch: 'main', token: developer.token });
    const job = await (await ProtocolRunner.register(t)).takeJob();
    assert.ok(job);
    const made = await t.post(rel('', own), { tag_name: 'ci-1', ref: 'rel', description: 'from CI' }, { token: null, headers: { 'job-token': job.token } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal(made.body.author.id, developer.user.id);
  });
});
