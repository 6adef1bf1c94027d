import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { nextInternalId } from '../../src/services/internal_ids.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { workTree, type WorkTree } from '../helpers/repo.js';

/**
 * Changelog generation on real histories: trailers, the previous stable tag, reverts,
 * categories, include_groups, custom templates and configuration files, section order in the
 * changelog file, errors and permissions.
 */
describe('changelog API', () => {
  let t: TestContext;
  let group: Namespace;
  let team: Namespace;
  let project: Project;
  let fullPath: string;
  let w: WorkTree;
  let guest: TestUser;
  let reporter: TestUser;
  let developer: TestUser;
  let maintainer: TestUser;
  let outsider: TestUser;
  let contributor: TestUser;
  const c: Record<string, string> = {};
  let mrIid: number;
  const DATE = '2021-01-05T10:00:00Z';
  const url = (p: Project = project) => `/api/v4/projects/${p.id}/repository/changelog`;
  const get = (query: Record<string, unknown>, token?: string | null, p?: Project) => t.get(url(p), { query: { date: DATE, ...query }, token });
  const post = (body: Record<string, unknown>, token?: string | null, p?: Project) => t.post(url(p), { date: DATE, ...body }, { token });
  const ref = (sha: string) => `${fullPath}@${sha}`;
  const rawFile = async (path: string, branch = 'main', p: Project = project) =>
    (await t.get(`/api/v4/projects/${p.id}/repository/files/${encodeURIComponent(path)}/raw`, { query: { ref: branch } })).text;

  before(async () => {
    t = await createTestContext({ changelogRateLimit: 0 });
    group = await t.createGroup({ path: t.unique('grp') });
    team = await t.createGroup({ path: t.unique('team') });
    project = await t.createProject({ group });
    fullPath = `${group.full_path}/${project.path}`;
    [guest, reporter, developer, maintainer, outsider, contributor] = await Promise.all(Array.from({ length: 6 }, () => t.createUser()));
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    // The developer belongs to the team group that include_groups credits; the reporter cannot see that group.
    await t.addMember(team, developer.user, 30);

    w = workTree(t, project);
    const as = (u: TestUser): [string, string] => [u.user.name, u.user.email];
    c.initial = w.commit('Initial commit');
    w.git(['tag', 'v1.0.0']);
    c.one = w.commit('Add feature one\n\nChangelog: added');
    c.fix = w.commit('Fix the parser\n\nSome details.\n\nChangelog: fixed');
    w.git(['tag', '-a', '-m', 'Release 1.1.0', '1.1.0']);
    c.lower = w.commit('Lower-case trailer\n\nchangelog: added');
    c.x = w.commit('Feature X\n\nChangelog: added', { author: as(contributor) });
    c.y = w.commit('Feature Y\n\nChangelog: added');
    c.revertY = w.commit(`Revert "Feature Y"\n\nThis reverts commit ${c.y}.`);
    c.z = w.commit('Feature Z\n\nChangelog: changed');
    c.revertZ = w.commit(`Revert "Feature Z"\n\nThis reverts commit ${c.z}.\n\nChangelog: removed`);
    c.security = w.commit('Harden sessions\n\nType: security');
    w.git(['tag', 'v1.2.0-rc1']);
    c.member = w.commit("Member's change\n\nChangelog: added", { author: as(developer) });
    c.tip = c.member;
    // Configuration files that only some requests name (config_file); no trailers, so no entries.
    w.write('changelog/custom.yml', customConfig(team.full_path));
    w.write('changelog/broken.yml', 'template: [unclosed\n');
    w.write('changelog/bad_template.yml', 'template: "{% if categories %}never closed"\n');
    w.write('changelog/bad_categories.yml', 'categories:\n  - added\n');
    w.write('changelog/bad_regex.yml', 'tag_regex: "(unclosed"\n');
    w.write('changelog/deep.yml', 'template: "{% each categories %}{% each entries %}{% each it %}{% each it %}{% each it %}x{% end %}{% end %}{% end %}{% end %}{% end %}"\n');
    c.config = w.commit('Changelog configurations');
    w.push('--all');
    w.push('--tags');

    // The contributor's merged merge request introduced Feature X.
    mrIid = await nextInternalId(t.db, 'merge_requests', project.id);
    await t.db
      .insertInto('merge_requests')
      .values({
        iid: mrIid, target_project_id: project.id, source_project_id: project.id, source_branch: 'feature-x', target_branch: 'main',
        title: 'Feature X', state_id: 3, author_id: contributor.user.id, merge_commit_sha: c.x, merged_at: new Date(),
      })
      .execute();
  });
  after(async () => {
    await t.close();
  });

  function customConfig(teamPath: string): string {
    return [
      'date_format: "%d %B %Y"',
      'categories:',
      '  added: New features',
      '  removed: Removed',
      `include_groups: ${teamPath}`,
      'template: |',
      '  {% each categories %}',
      '  ## {{ title }} ({{ count }})',
      '  {% each entries %}',
      '  {% if it.author.credit %}',
      '  - {{ title }} by {{ author.reference }} \\',
      '  [{{ commit.trailers.Changelog }}]',
      '  {% else %}',
      '  - {{ title }} [{{ commit.trailers.Changelog }}]',
      '  {% end %}',
      '  {% end %}',
      '  First: {{ entries.0.title }}',
      '',
      '  {% end %}',
      '',
    ].join('\n');
  }

  it('generates the notes since the last stable tag with the default template: trailers, reverts, authors, merge requests', async () => {
    const res = await get({ version: '1.2.0' });
    assert.equal(res.status, 200);
    assert.deepEqual(Object.keys(res.body), ['notes']);
    assert.equal(
      res.body.notes,
      [
        '## 1.2.0 (2021-01-05)',
        '',
        '### added (2 changes)',
        '',
        `- [Member's change](${ref(c.member)})`,
        `- [Feature X](${ref(c.x)}) by @${contributor.user.username} ([merge request](${fullPath}!${mrIid}))`,
        '',
        '### removed (1 change)',
        '',
        `- [Revert "Feature Z"](${ref(c.revertZ)})`,
        '',
      ].join('\n'),
    );
    // Left out: the wrong-case trailer, the reverted Feature Y and its revert, the reverted Feature Z,
    // the other trailer's commit, and everything up to 1.1.0 (v1.2.0-rc1 is a pre-release, not a start).
    for (const absent of ['Lower-case', 'Feature Y', 'Feature Z]', 'Harden', 'Fix the parser', 'feature one']) assert.ok(!res.body.notes.includes(absent), absent);
  });

  it('takes from and to, a custom trailer name (matched case-sensitively), and counts one change in the singular', async () => {
    const range = await get({ version: '1.1.0', from: c.initial, to: c.fix });
    assert.equal(range.status, 200);
    assert.equal(
      range.body.notes,
      `## 1.1.0 (2021-01-05)\n\n### fixed (1 change)\n\n- [Fix the parser](${ref(c.fix)})\n\n### added (1 change)\n\n- [Add feature one](${ref(c.one)})\n`,
    );
    // Tags and branch names work as from/to too.
    assert.equal((await get({ version: '1.1.0', from: 'v1.0.0', to: '1.1.0' })).body.notes, range.body.notes);

    const custom = await get({ version: '1.2.0', trailer: 'Type' });
    assert.equal(custom.body.notes, `## 1.2.0 (2021-01-05)\n\n### security (1 change)\n\n- [Harden sessions](${ref(c.security)})\n`);
    const wrongCase = await get({ version: '1.2.0', trailer: 'type' });
    assert.equal(wrongCase.body.notes, '## 1.2.0 (2021-01-05)\n\nNo changes.\n');
    const lower = await get({ version: '1.2.0', trailer: 'changelog' });
    assert.match(lower.body.notes, /### added \(1 change\)\n\n- \[Lower-case trailer\]/);
  });

  it('finds the previous stable tag for any version (v-prefixed or not), ignoring pre-releases', async () => {
    // 1.1.5: after 1.1.0, so from 1.1.0 up to the default branch.
    const patch = await get({ version: '1.1.5' });
    assert.match(patch.body.notes, /^## 1\.1\.5 \(2021-01-05\)/);
    assert.ok(patch.body.notes.includes('Feature X') && !patch.body.notes.includes('feature one'));
    // v1.1.0 itself: from the release before it, v1.0.0.
    const same = await get({ version: 'v1.1.0', to: '1.1.0' });
    assert.match(same.body.notes, /^## v1\.1\.0 \(2021-01-05\)\n\n### fixed/);
    assert.ok(same.body.notes.includes('Add feature one'));
    // A pre-release version asks for the release before its stable version.
    const rc = await get({ version: '1.2.0-rc2' });
    assert.ok(rc.body.notes.includes('Feature X'));
    // No date given: today.
    const before = new Date().toISOString().slice(0, 10);
    const undated = await t.get(url(), { query: { version: '1.2.0' } });
    const afterwards = new Date().toISOString().slice(0, 10);
    const heading = /^## 1\.2\.0 \((\d{4}-\d{2}-\d{2})\)\n/.exec(undated.body.notes);
    assert.ok(heading && [before, afterwards].includes(heading[1]), undated.body.notes);
    // A date with an offset is shown in that offset.
    const eastern = await get({ version: '1.2.0', date: '2021-01-05T23:30:00-05:00' });
    assert.match(eastern.body.notes, /^## 1\.2\.0 \(2021-01-05\)/);
  });

  it('answers 422 when no previous tag exists and from is absent, and for ranges that name no commit', async () => {
    const none = await get({ version: '0.9.0' });
    assert.equal(none.status, 422);
    assert.deepEqual(none.body, {
      message: 'Failed to generate the changelog: The commit start range is unspecified, and no previous tag could be found to use instead',
    });
    // With from, the same version works.
    assert.equal((await get({ version: '0.9.0', from: c.initial, to: c.one })).status, 200);

    for (const [from, to] of [['nope', c.tip], [c.initial, 'nope'], ['--output=/tmp/x', c.tip], [c.initial, 'main:../../etc'], ['HEAD..main', c.tip]]) {
      const res = await get({ version: '1.2.0', from, to });
      assert.equal(res.status, 422, `${from} ${to}`);
      assert.equal(res.body.message, 'Failed to generate the changelog: Invalid or not found commit value in the given range');
    }
    const badVersion = await get({ version: 'latest', from: c.initial });
    assert.equal(badVersion.status, 400);
    assert.deepEqual(badVersion.body, { error: 'version is invalid' });
    // Contains a version, so it passes the parameter check, but is no version to find a tag for.
    const loose = await get({ version: 'release-1.2.0-final' });
    assert.equal(loose.status, 422);
    assert.match(loose.body.message, /The requested `version` attribute format is not correct/);
    const missing = await t.get(url(), { query: {} });
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.body, { error: 'version is missing' });
    const badDate = await get({ version: '1.2.0', date: 'someday' });
    assert.equal(badDate.status, 400);
    assert.deepEqual(badDate.body, { error: 'date is invalid' });
  });

  it('renders a custom template and configuration: categories, date_format, include_groups, it, indexes, trailing backslashes', async () => {
    const expected = (developerCredited: boolean) =>
      [
        '## 1.2.0 (05 January 2021)',
        '',
        '## New features (2)',
        developerCredited ? `- Member's change by @${developer.user.username} [added]` : "- Member's change [added]",
        `- Feature X by @${contributor.user.username} [added]`,
        "First: Member's change",
        '',
        '## Removed (1)',
        '- Revert "Feature Z" [removed]',
        'First: Revert "Feature Z"',
        '',
      ].join('\n');
    const asRoot = await get({ version: '1.2.0', config_file: 'changelog/custom.yml' });
    assert.equal(asRoot.status, 200);
    assert.equal(asRoot.body.notes, expected(true));
    // include_groups credits only the members of groups the caller can read.
    const asReporter = await get({ version: '1.2.0', config_file: 'changelog/custom.yml' }, reporter.token);
    assert.equal(asReporter.body.notes, expected(false));
    // A missing configuration file means the defaults.
    const absent = await get({ version: '1.1.0', to: '1.1.0', config_file: 'changelog/none.yml' });
    assert.match(absent.body.notes, /^## 1\.1\.0 \(2021-01-05\)\n\n### fixed \(1 change\)/);
  });

  it('reports broken configuration files as 422 with GitLab words', async () => {
    const cases: [string, RegExp][] = [
      ['changelog/broken.yml', /^Failed to generate the changelog: changelog\/broken\.yml does not contain valid YAML$/],
      ['changelog/bad_template.yml', /^Failed to generate the changelog: Failed to parse the template: Don't know what to do with/],
      ['changelog/bad_categories.yml', /^Failed to generate the changelog: The "categories" configuration key must be a Hash$/],
      ['changelog/bad_regex.yml', /^Failed to generate the changelog: The regular expression to use for finding the previous tag for a version is invalid: /],
      ['changelog/deep.yml', /^Failed to generate the changelog: You can only nest up to 4 loops$/],
    ];
    for (const [file, message] of cases) {
      const res = await get({ version: '1.2.0', config_file: file });
      assert.equal(res.status, 422, file);
      assert.match(res.body.message, message, file);
    }
  });

  it('commits sections into the changelog file in version order, whatever the dates', async () => {
    const first = await post({ version: '1.1.0', from: 'v1.0.0', to: '1.1.0' }, developer.token);
    assert.equal(first.status, 200);
    assert.equal(first.body, 200);
    const s110 = `## 1.1.0 (2021-01-05)\n\n### fixed (1 change)\n\n- [Fix the parser](${ref(c.fix)})\n\n### added (1 change)\n\n- [Add feature one](${ref(c.one)})\n`;
    assert.equal(await rawFile('CHANGELOG.md'), s110);
    const head = await t.get(`/api/v4/projects/${project.id}/repository/commits/main`);
    assert.equal(head.body.title, 'Add changelog for version 1.1.0');
    assert.equal(head.body.author_email, developer.user.email);

    assert.equal((await post({ version: '1.2.0', date: '2021-02-01' }, developer.token)).status, 200);
    // Older version, later date: still below the newer version.
    assert.equal((await post({ version: '1.0.5', from: c.initial, to: c.one, date: '2021-03-01', message: 'Backfill 1.0.5' }, maintainer.token)).status, 200);
    assert.equal((await post({ version: '1.1.5', from: c.fix, to: c.x, date: '2020-12-01' }, maintainer.token)).status, 200);
    const content = await rawFile('CHANGELOG.md');
    const headings = [...content.matchAll(/^## (\S+) \((.*)\)$/gm)].map((m) => `${m[1]} ${m[2]}`);
    assert.deepEqual(headings, ['1.2.0 2021-02-01', '1.1.5 2020-12-01', '1.1.0 2021-01-05', '1.0.5 2021-03-01']);
    assert.ok(content.includes(`\n\n${s110.replace(/\n$/, '')}\n\n## 1.0.5 (2021-03-01)\n\n### added (1 change)\n\n- [Add feature one](${ref(c.one)})\n`), content);
    assert.ok(content.startsWith('## 1.2.0 (2021-02-01)\n\n### added (2 changes)\n\n'));
    const log = await t.get(`/api/v4/projects/${project.id}/repository/commits`, { query: { ref_name: 'main', per_page: 4 } });
    assert.deepEqual(
      log.body.map((x: any) => x.title),
      ['Add changelog for version 1.1.5', 'Backfill 1.0.5', 'Add changelog for version 1.2.0', 'Add changelog for version 1.1.0'],
    );

    // A version already in the file is not added again (and no commit is made).
    const again = await post({ version: '1.2.0' }, developer.token);
    assert.equal(again.status, 200);
    assert.equal(await rawFile('CHANGELOG.md'), content);
    const tip = await t.get(`/api/v4/projects/${project.id}/repository/commits/main`);
    assert.equal(tip.body.title, 'Add changelog for version 1.1.5');
  });

  it('writes another file on another branch, and leaves the default branch alone', async () => {
    await t.post(`/api/v4/projects/${project.id}/repository/branches`, { branch: 'release', ref: c.tip });
    const res = await post({ version: '1.2.0', branch: 'release', file: 'docs/CHANGES.md', trailer: 'Type' }, developer.token);
    assert.equal(res.status, 200);
    assert.equal(await rawFile('docs/CHANGES.md', 'release'), `## 1.2.0 (2021-01-05)\n\n### security (1 change)\n\n- [Harden sessions](${ref(c.security)})\n`);
    const onMain = await t.get(`/api/v4/projects/${project.id}/repository/files/docs%2FCHANGES.md`, { query: { ref: 'main' } });
    assert.equal(onMain.status, 404);
    // A branch that does not exist names no commit for `to`.
    const ghost = await post({ version: '1.2.0', branch: 'ghost' }, developer.token);
    assert.equal(ghost.status, 422);
    // A path outside the repository is refused by the commit rules.
    const traversal = await post({ version: '1.3.0', file: '../outside.md' }, developer.token);
    assert.equal(traversal.status, 400);
    assert.match(traversal.body.message, /directory traversal/);
  });

  it('reads for reporters and up, commits for who may push to the branch', async () => {
    const q = { version: '1.2.0' };
    assert.equal((await get(q, reporter.token)).status, 200);
    assert.equal((await get(q, developer.token)).status, 200);
    assert.equal((await get(q, guest.token)).status, 403);
    assert.equal((await get(q, outsider.token)).status, 404);
    assert.equal((await get(q, null)).status, 404);

    const body = { version: '2.0.0', from: c.initial, branch: 'release' };
    const rep = await post(body, reporter.token);
    assert.equal(rep.status, 403);
    assert.deepEqual(rep.body, { message: '403 Forbidden - You are not allowed to commit a changelog on this branch' });
    assert.equal((await post(body, guest.token)).status, 403);
    assert.equal((await post(body, outsider.token)).status, 404);
    assert.equal((await post(body, null)).status, 404);
    const readApi = await t.createUser({ scopes: ['read_api'] });
    await t.addMember(project, readApi.user, 40);
    assert.equal((await get(q, readApi.token)).status, 200);
    assert.equal((await post(body, readApi.token)).status, 403);

    // A protected branch: only maintainers may push, so only they may commit a changelog there.
    const pb = await t.db.insertInto('protected_branches').values({ project_id: project.id, name: 'release' }).returning('id').executeTakeFirstOrThrow();
    await t.db.insertInto('protected_branch_access_levels').values({ protected_branch_id: pb.id, kind: 'push', access_level: 40 }).execute();
    const dev = await post(body, developer.token);
    assert.equal(dev.status, 403);
    assert.equal(dev.body.message, '403 Forbidden - You are not allowed to commit a changelog on this branch');
    assert.equal((await post(body, maintainer.token)).status, 200);
    assert.match(await rawFile('CHANGELOG.md', 'release'), /^## 2\.0\.0 \(2021-01-05\)/);
    await t.db.deleteFrom('protected_branches').where('id', '=', pb.id).execute();
  });

  it('reads a public project anonymously, with the default configuration file and its tag_regex', async () => {
    const pub = await t.createProject({ visibility: 20 });
    const pw = workTree(t, pub);
    pw.commit('Start');
    pw.git(['tag', 'release-1.0.0']);
    pw.git(['tag', 'v5.0.0-beta']);
    const one = pw.commit('Shiny\n\nChangelog: added');
    pw.write('.gitlab/changelog_config.yml', 'tag_regex: "^release-(?P<major>\\\\d+)\\\\.(?P<minor>\\\\d+)\\\\.(?P<patch>\\\\d+)$"\ndate_format: "%Y/%m/%d"\n');
    pw.commit('Configure changelogs');
    pw.push('--all');
    pw.push('--tags');
    const res = await get({ version: '1.1.0' }, null, pub);
    assert.equal(res.status, 200);
    assert.equal(res.body.notes, `## 1.1.0 (2021/01/05)\n\n### added (1 change)\n\n- [Shiny](${await projectPath(pub)}@${one})\n`);
    const anonPost = await post({ version: '1.1.0' }, null, pub);
    assert.equal(anonPost.status, 403);
  });

  it('limits generations per user and project per minute', async () => {
    const config = t.app.cairn.config as { changelogRateLimit: number };
    config.changelogRateLimit = 2;
    try {
      const user = await t.createUser();
      await t.addMember(project, user.user, 20);
      assert.equal((await get({ version: '1.2.0' }, user.token)).status, 200);
      assert.equal((await get({ version: '1.2.0' }, user.token)).status, 200);
      const limited = await get({ version: '1.2.0' }, user.token);
      assert.equal(limited.status, 429);
      assert.deepEqual(limited.body, { message: { error: 'This changelog has been requested too many times. Try again later.' } });
      // Others are not affected.
      assert.equal((await get({ version: '1.2.0' }, reporter.token)).status, 200);
    } finally {
      config.changelogRateLimit = 0;
    }
  });

  async function projectPath(p: Project): Promise<string> {
    const res = await t.get(`/api/v4/projects/${p.id}`);
    return res.body.path_with_namespace;
  }
});
