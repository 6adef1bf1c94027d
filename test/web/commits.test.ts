import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { projectRepoPath } from '../../src/services/projects.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { generateHistory, workTree, type WorkTree } from '../helpers/repo.js';
import { ANONYMOUS, getPage, webSignIn, type WebSession } from '../helpers/web.js';

/** A commit at a given time (seconds since the epoch). */
function commitAt(w: WorkTree, message: string, time: number): string {
  const date = `${time} +0000`;
  w.git(['add', '-A']);
  w.git(['commit', '-q', '--allow-empty', '-m', message], { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date });
  return w.git(['rev-parse', 'HEAD']);
}

const DAY1 = Date.UTC(2024, 2, 4, 10) / 1000; // Mar 4, 2024
const DAY2 = Date.UTC(2024, 2, 6, 15) / 1000; // Mar 6, 2024

const count = (text: string, re: RegExp) => (text.match(re) ?? []).length;

describe('web: commits, a commit and compare', () => {
  let t: TestContext;
  let alice: TestUser;
  let outsider: TestUser;
  let aliceWeb: WebSession;
  let outsiderWeb: WebSession;
  let priv: Project;
  let pub: Project;
  let base: string;
  const sha: Record<string, string> = {};

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser();
    outsider = await t.createUser();
    priv = await t.createProject({ owner: alice.user, visibility: 0 });
    pub = await t.createProject({ owner: alice.user, visibility: 20 });
    base = `/${alice.user.username}/${priv.path}`;
    const w = workTree(t, priv);
    w.write('README.md', '# Demo\n');
    w.write('src/app.ts', 'export const answer = 41;\nexport function greet(name: string) {\n  return `hello ${name}`;\n}\n');
    w.write('docs/old-name.md', 'Some documentation that will move.\nLine two.\nLine three.\n');
    sha.first = commitAt(w, 'Initial commit', DAY1);
    w.write('src/app.ts', 'export const answer = 42;\nexport function greet(name: string) {\n  return `hello ${name}`;\n}\n');
    w.write('page.html', '<script>alert("file")</script>\n');
    sha.script = commitAt(w, 'Fix <script>alert(1)</script> answer\n\nThe body has <b>markup</b> & more.\nSecond line.', DAY1 + 60);
    w.git(['mv', 'docs/old-name.md', 'docs/new-name.md']);
    sha.rename = commitAt(w, 'Rename the docs', DAY2);
    w.write('logo.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 0, 1, 2, 3]));
    sha.binary = commitAt(w, 'Add a logo', DAY2 + 60);
    w.git(['checkout', '-q', '-b', 'feature/x']);
    w.write('src/dir/feature.ts', 'export const feature = true;\n');
    sha.feature = commitAt(w, 'Feature in src/dir', DAY2 + 120);
    w.write('README.md', '# Demo with a feature\n');
    sha.featureReadme = commitAt(w, 'Feature README', DAY2 + 180);
    w.git(['checkout', '-q', 'main']);
    w.write('CHANGELOG.md', 'main moved on\n');
    sha.mainAfter = commitAt(w, 'Main moves on', DAY2 + 240);
    w.push('--all');
    // 45 commits on another branch, for the pages.
    generateHistory(projectRepoPath(t.app.cairn, priv), { commits: 45, files: 10, branch: 'long' });
    aliceWeb = await webSignIn(t, alice);
    outsiderWeb = await webSignIn(t, outsider);
  });
  after(() => t.close());

  it('lists the commits of a ref with a slash, grouped by day, newest first', async () => {
    const res = await getPage(t, aliceWeb, `${base}/-/commits/feature/x`);
    assert.equal(res.status, 200, res.text);
    const text = res.text;
    assert.ok(text.indexOf('Feature README') < text.indexOf('Feature in src/dir'), 'newest first');
    assert.ok(!text.includes('Main moves on'), 'only the ref\'s history');
    assert.match(text, /<time datetime="2024-03-06">Mar 6, 2024<\/time> <span class="muted small">4 commits<\/span>/);
    assert.match(text, /<time datetime="2024-03-04">Mar 4, 2024<\/time> <span class="muted small">2 commits<\/span>/);
    assert.ok(text.includes(`href="${base}/-/commit/${sha.feature}"`));
    assert.ok(text.includes(`>${sha.feature.slice(0, 8)}</a>`));
    assert.ok(text.includes(`href="${base}/-/tree/${sha.feature}"`), 'browse files at the commit');
    // The title is escaped, its description is folded away.
    assert.ok(text.includes('Fix &lt;script&gt;alert(1)&lt;/script&gt; answer'));
    assert.ok(!text.includes('<script>alert'));
    assert.match(text, /<pre class="commit-description">The body has &lt;b&gt;markup&lt;\/b&gt; &amp; more\.\nSecond line\.<\/pre>/);
    assert.match(text, /Ann Author<\/span> authored <time/);
    assert.match(text, /<option value="feature\/x" selected>feature\/x<\/option>/);
    assert.match(text, /aria-current="page">Commits</);
  });

  it('filters by path', async () => {
    const res = await getPage(t, aliceWeb, `${base}/-/commits/feature/x/src/dir`);
    assert.equal(res.status, 200, res.text);
    assert.ok(res.text.includes('Feature in src/dir'));
    assert.ok(!res.text.includes('Feature README'));
    assert.ok(!res.text.includes('Initial commit'));
    assert.match(res.text, /1 commit</);
    assert.ok(res.text.includes(`<input type="hidden" name="path" value="src/dir">`));
    const file = await getPage(t, aliceWeb, `${base}/-/commits/main/src/app.ts`);
    assert.equal(count(file.text, /class="title" href=/g), 2);
  });

  it('pages by 40', async () => {
    const one = await getPage(t, aliceWeb, `${base}/-/commits/long`);
    assert.equal(one.status, 200);
    assert.equal(count(one.text, /class="title" href=/g), 40);
    assert.match(one.text, /Page 1 of 2/);
    assert.ok(one.text.includes(`rel="next" href="${base}/-/commits/long?page=2"`));
    assert.ok(one.text.includes('Change 44 to'));
    const two = await getPage(t, aliceWeb, `${base}/-/commits/long?page=2`);
    assert.equal(count(two.text, /class="title" href=/g), 5);
    assert.match(two.text, /Page 2 of 2/);
    assert.ok(two.text.includes(`rel="prev" href="${base}/-/commits/long"`));
    assert.ok(two.text.includes('Change 0 to'));
    const beyond = await getPage(t, aliceWeb, `${base}/-/commits/long?page=9`);
    assert.equal(beyond.status, 200);
    assert.match(beyond.text, /No more commits/);
    const junk = await getPage(t, aliceWeb, `${base}/-/commits/long?page=-3x`);
    assert.equal(count(junk.text, /class="title" href=/g), 40);
  });

  it('sends /-/commits and the switcher to a ref\'s list; unknown refs are 404', async () => {
    const bare = await getPage(t, aliceWeb, `${base}/-/commits`);
    assert.equal(bare.status, 302);
    assert.equal(bare.headers.location, `${base}/-/commits/main`);
    const switched = await getPage(t, aliceWeb, `${base}/-/commits?ref=feature/x&path=src/dir`);
    assert.equal(switched.headers.location, `${base}/-/commits/feature/x/src/dir`);
    assert.equal((await getPage(t, aliceWeb, `${base}/-/commits/nope`)).status, 404);
  });

  it('shows a commit: title, escaped message and file, people, parents, pipeline-free, inline diff', async () => {
    const res = await getPage(t, aliceWeb, `${base}/-/commit/${sha.script}`);
    assert.equal(res.status, 200, res.text);
    const text = res.text;
    assert.ok(!text.includes('<script>alert'), 'nothing unescaped');
    assert.match(text, /<h2 class="commit-title">Fix &lt;script&gt;alert\(1\)&lt;\/script&gt; answer<\/h2>/);
    assert.match(text, /<pre class="commit-description">The body has &lt;b&gt;markup&lt;\/b&gt; &amp; more\.\nSecond line\.<\/pre>/);
    assert.ok(text.includes(`<dd class="sha">${sha.script}</dd>`));
    assert.ok(text.includes(`href="${base}/-/commit/${sha.first}"`), 'the parent links to its page');
    assert.match(text, /Ann Author &lt;ann@example.com&gt;/);
    assert.match(text, /Carl Committer &lt;carl@example.com&gt;/);
    assert.match(text, /<table class="diff inline">/);
    assert.match(text, /Showing <strong>2 changed files<\/strong>/);
    // The file's <script> line is text in the diff (highlighted or not, never markup).
    assert.match(text, /&lt;script&gt;|hljs-tag">&lt;<span class="hljs-name">script/);
    assert.match(text, /<span class="badge success">added<\/span>/);
    assert.ok(text.includes(`href="${base}/-/blob/${sha.script}/src/app.ts"`), 'view file @ the commit');
    assert.match(text, /aria-current="true">Inline/);
    assert.ok(text.includes(`href="${base}/-/commit/${sha.script}?view=parallel"`));
  });

  it('shows the side-by-side view', async () => {
    const res = await getPage(t, aliceWeb, `${base}/-/commit/${sha.script}?view=parallel`);
    assert.equal(res.status, 200);
    assert.match(res.text, /<table class="diff parallel">/);
    assert.ok(!res.text.includes('<table class="diff inline">'));
    assert.match(res.text, /aria-current="true">Side-by-side/);
    // The changed line: old on the left, new on the right of one row.
    assert.match(res.text, /<tr><td class="ln del"[^>]*>.*?41.*?<td class="ln add"[^>]*>.*?42/s);
  });

  it('shows a rename and a binary file', async () => {
    const rename = await getPage(t, aliceWeb, `${base}/-/commit/${sha.rename}`);
    assert.equal(rename.status, 200);
    assert.match(rename.text, /docs\/old-name\.md → docs\/new-name\.md/);
    assert.match(rename.text, /<span class="badge">renamed<\/span>/);
    assert.match(rename.text, /File moved without changes/);
    const binary = await getPage(t, aliceWeb, `${base}/-/commit/${sha.binary}`);
    assert.equal(binary.status, 200);
    assert.match(binary.text, /<strong class="mono">logo\.png<\/strong>/);
    assert.match(binary.text, /Binary file not shown/);
  });

  it('shows a root commit and a short id', async () => {
    const res = await getPage(t, aliceWeb, `${base}/-/commit/${sha.first.slice(0, 10)}`);
    assert.equal(res.status, 200);
    assert.match(res.text, /none \(root commit\)/);
    assert.match(res.text, /Showing <strong>3 changed files<\/strong>/);
  });

  it('answers 404 (never 500) for what is no commit id', async () => {
    const tree = (await t.call('GET', `/api/v4/projects/${priv.id}/repository/tree`, { token: alice.token })).body[0].id;
    for (const bad of ['zzzzzzz', 'main', 'main:..', '-x', '--output=x', 'deadbeefdeadbeef', tree, `${sha.first}^`, `${sha.first}~1`, 'HEAD', 'main%3A..%2F..%2F', 'a'.repeat(65)]) {
      const res = await getPage(t, aliceWeb, `${base}/-/commit/${bad}`);
      assert.equal(res.status, 404, `${bad}: ${res.status}`);
    }
    const page = await getPage(t, aliceWeb, `${base}/-/commit/-x`);
    assert.match(page.headers['content-type'], /^text\/html/);
  });

  it('hides a private project\'s commits from an outsider and sends anonymous visitors to sign in', async () => {
    for (const url of [`${base}/-/commits/main`, `${base}/-/commit/${sha.first}`, `${base}/-/compare`, `${base}/-/compare/main...feature/x`, `${base}/-/commits`]) {
      const res = await getPage(t, outsiderWeb, url);
      assert.equal(res.status, 404, url);
      assert.ok(!res.text.includes('Initial commit'));
      const anon = await getPage(t, ANONYMOUS, url);
      assert.equal(anon.status, 302, url);
      assert.match(anon.headers.location, /^\/users\/sign_in\?redirect_to=/);
    }
  });

  it('shows a public project\'s commits to anyone', async () => {
    const w = workTree(t, pub);
    w.write('a.txt', 'a\n');
    const oid = w.commit('Public commit');
    w.push();
    const list = await getPage(t, ANONYMOUS, `/${alice.user.username}/${pub.path}/-/commits/main`);
    assert.equal(list.status, 200);
    assert.ok(list.text.includes('Public commit'));
    const one = await getPage(t, ANONYMOUS, `/${alice.user.username}/${pub.path}/-/commit/${oid}`);
    assert.equal(one.status, 200);
  });

  it('compares two refs across GitLab\'s three-dot URL (refs with slashes), from the merge base', async () => {
    const res = await getPage(t, aliceWeb, `${base}/-/compare/main...feature/x`);
    assert.equal(res.status, 200, res.text);
    const text = res.text;
    assert.match(text, /Commits <span class="badge">2<\/span>/);
    assert.ok(text.indexOf('Feature README') < text.indexOf('Feature in src/dir'), 'newest first');
    assert.ok(!text.includes('Main moves on'), 'only what the source adds');
    assert.match(text, /Showing <strong>2 changed files<\/strong>/);
    assert.ok(!text.includes('CHANGELOG.md'), 'main\'s own change is not in a merge-base diff');
    assert.match(text, /value="main"[^>]*>/);
    assert.match(text, /<input type="text" id="compare-to" name="to" value="feature\/x"/);
    assert.ok(text.includes(`href="${base}/-/compare/main...feature/x?view=parallel"`));
    const parallel = await getPage(t, aliceWeb, `${base}/-/compare/main...feature/x?view=parallel`);
    assert.match(parallel.text, /<table class="diff parallel">/);
  });

  it('compares straight (the target\'s own changes show, reversed)', async () => {
    const res = await getPage(t, aliceWeb, `${base}/-/compare/main...feature/x?straight=true`);
    assert.equal(res.status, 200);
    assert.match(res.text, /Showing <strong>3 changed files<\/strong>/);
    assert.ok(res.text.includes('CHANGELOG.md'));
    assert.match(res.text, /name="straight" value="true" checked/);
  });

  it('leads the form to the three-dot URL and tells unknown or equal refs', async () => {
    const form = await getPage(t, aliceWeb, `${base}/-/compare`);
    assert.equal(form.status, 200);
    assert.match(form.text, /<form method="get" action="[^"]*\/-\/compare"/);
    assert.match(form.text, /<datalist id="compare-refs">.*<option value="feature\/x">/s);
    const go = await getPage(t, aliceWeb, `${base}/-/compare?from=main&to=feature%2Fx&straight=false`);
    assert.equal(go.status, 302);
    assert.equal(go.headers.location, `${base}/-/compare/main...feature/x`);
    const straight = await getPage(t, aliceWeb, `${base}/-/compare?from=main&to=feature%2Fx&straight=true`);
    assert.equal(straight.headers.location, `${base}/-/compare/main...feature/x?straight=true`);
    const unknown = await getPage(t, aliceWeb, `${base}/-/compare/main...nope%3Cscript%3E`);
    assert.equal(unknown.status, 404);
    assert.match(unknown.text, /Either main or nope&lt;script&gt; is not a branch, tag or commit/);
    assert.ok(!unknown.text.includes('nope<script>'));
    const same = await getPage(t, aliceWeb, `${base}/-/compare/main...main`);
    assert.equal(same.status, 200);
    assert.match(same.text, /There isn't anything to compare/);
    const behind = await getPage(t, aliceWeb, `${base}/-/compare/feature/x...${sha.first}`);
    assert.match(behind.text, /There isn't anything to compare/);
    for (const bad of ['main', 'main...', '...main', '-x...main']) {
      const res = await getPage(t, aliceWeb, `${base}/-/compare/${bad}`);
      assert.equal(res.status, 404, bad);
    }
  });
});
