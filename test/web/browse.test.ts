import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { workTree } from '../helpers/repo.js';
import { ANONYMOUS, getPage, webSignIn, type WebSession } from '../helpers/web.js';
import type { Namespace, Project } from '../../src/db/schema/core.js';

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082', 'hex');

/** 2,000 lines of TypeScript. */
function bigSource(): string {
  const lines: string[] = [];
  for (let i = 1; i <= 2000; i++) lines.push(i % 10 === 1 ? `export function f${i}(x: number): string { return 'v' + x; }` : `const v${i} = ${i}; // line ${i}`);
  return lines.join('\n') + '\n';
}

describe('web: browsing a repository, the dashboard and explore', () => {
  let t: TestContext;
  let alice: TestUser;
  let outsider: TestUser;
  let aliceWeb: WebSession;
  let outsiderWeb: WebSession;
  let priv: Project;
  let pub: Project;
  let group: Namespace;
  let sub: Namespace;
  let privGroup: Namespace;
  let base: string;
  let firstCommit: string;

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser({ name: 'Alice <b>A</b>' });
    outsider = await t.createUser();
    priv = await t.createProject({ owner: alice.user, visibility: 0, name: 'Secret <script>x</script>' });
    pub = await t.createProject({ owner: alice.user, visibility: 20, path: 'open-project', name: 'Open project' });
    base = `/${alice.user.username}/${priv.path}`;
    const w = workTree(t, priv);
    w.write('README.md', [
      '# Hello <script>alert(1)</script>',
      '',
      '[the guide](docs/guide.md) [docs](docs) [app](/src/app.ts) [up](../../etc/passwd) [web](https://example.com/x) [top](#hello)',
      '',
      '![logo](img/logo.png "Logo")',
      '',
    ].join('\n'));
    w.write('docs/guide.md', '# Guide\n\nBack to the [readme](../README.md).\n');
    w.write('docs/README.md', '# Docs readme\n\n![pic](../img/logo.png)\n');
    w.write('src/app.ts', bigSource());
    w.write('img/logo.png', PNG);
    w.write('src/copy.ts', 'const x = 1;\n');
    w.write('src/copy.txt', 'const x = 1;\n');
    w.write('bin/data.bin', Buffer.from([0, 1, 2, 3, 0, 255]));
    w.write('page.html', '<html><script>alert(1)</script></html>\n');
    w.write('a<b>&"c.txt', 'odd name\n');
    w.write('big.txt', 'x'.repeat(1100 * 1024) + '\n');
    firstCommit = w.commit('Initial <script>commit</script>');
    w.write('src/app.ts', bigSource().replace('const v2 = 2;', 'const v2 = 22;'));
    w.commit('Change line two', { author: ['Bob & "B" Jr', 'bob@example.com'] });
    w.git(['tag', 'v1.0']);
    w.git(['checkout', '-q', '-b', 'feature/x']);
    w.write('feature.txt', 'on the feature branch\n');
    w.commit('Feature work');
    w.git(['checkout', '-q', 'main']);
    w.push('--all');
    w.push('--tags');
    const pw = workTree(t, pub);
    pw.write('README.md', 'Public readme\n');
    pw.commit('Public initial');
    pw.push();

    group = await t.createGroup({ path: 'team', name: 'Team <em>One</em>', visibility: 20, owner: alice.user });
    await t.db.updateTable('namespaces').set({ description: 'Our **team** <script>' }).where('id', '=', group.id).execute();
    sub = await t.createGroup({ path: 'sub', name: 'Sub team', parent: group, visibility: 20 });
    await t.createProject({ group, path: 'gp', name: 'Group project', visibility: 20 });
    await t.createProject({ group, path: 'gsecret', name: 'Group secret project', visibility: 0 });
    privGroup = await t.createGroup({ path: 'hidden-team', name: 'Hidden team', visibility: 0, owner: alice.user });
    aliceWeb = await webSignIn(t, alice);
    outsiderWeb = await webSignIn(t, outsider);
  });
  after(() => t.close());

  describe('the project page', () => {
    it('shows the switcher, the last commit, the root folder and the README with its links into the repository', async () => {
      const res = await getPage(t, aliceWeb, base);
      assert.equal(res.status, 200, res.text);
      const text = res.text;
      assert.match(text, new RegExp(`<form method="get" action="${base}/-/refs/switch"`));
      assert.match(text, /<select id="ref-switch" name="ref" data-autosubmit>/);
      assert.match(text, /<optgroup label="Branches"><option value="feature\/x">feature\/x<\/option><option value="main" selected>main<\/option><\/optgroup>/);
      assert.match(text, /<optgroup label="Tags"><option value="v1.0">v1.0<\/option><\/optgroup>/);
      assert.match(text, /<button type="submit" class="secondary">Go<\/button>/);
      assert.match(text, /Change line two/);
      assert.ok(!text.includes('<script>'), 'nothing unescaped');
      // Folders first, then files.
      const names = [...text.matchAll(/<td class="name">.*?<a href="[^"]*">([^<]*)<\/a>/g)].map((m) => m[1]);
      assert.deepEqual(names, ['bin', 'docs', 'img', 'src', 'README.md', 'a&lt;b&gt;&amp;&quot;c.txt', 'big.txt', 'page.html']);
      assert.ok(text.includes(`href="${base}/-/tree/main/docs"`));
      assert.ok(text.includes(`href="${base}/-/blob/main/a%3Cb%3E%26%22c.txt"`));
      // The README: rendered, escaped, relative links rewritten as GitLab does.
      assert.match(text, /<h1>Hello &lt;script&gt;alert\(1\)&lt;\/script&gt;<\/h1>/);
      assert.ok(text.includes(`<a href="${base}/-/blob/main/docs/guide.md"`), 'file link to blob');
      assert.ok(text.includes(`<a href="${base}/-/tree/main/docs"`), 'folder link to tree');
      assert.ok(text.includes(`<a href="${base}/-/blob/main/src/app.ts"`), 'root-relative link');
      assert.ok(text.includes(`<a href="${base}/-/blob/main/etc/passwd"`), 'traversal clamped at the root');
      assert.ok(text.includes('<a href="https://example.com/x"'), 'absolute links kept');
      assert.ok(text.includes('<a href="#hello"'), 'anchors kept');
      assert.ok(text.includes(`<img src="${base}/-/raw/main/img/logo.png" alt="logo" title="Logo">`), 'images from raw');
    });

    it('switches refs through /-/refs/switch', async () => {
      const res = await getPage(t, aliceWeb, `${base}/-/refs/switch?ref=feature%2Fx&destination=tree`);
      assert.equal(res.status, 302);
      assert.equal(res.headers.location, `${base}/-/tree/feature/x`);
      const blob = await getPage(t, aliceWeb, `${base}/-/refs/switch?ref=v1.0&destination=blob&path=src%2Fapp.ts`);
      assert.equal(blob.headers.location, `${base}/-/blob/v1.0/src/app.ts`);
      const odd = await getPage(t, aliceWeb, `${base}/-/refs/switch?ref=main&destination=evil&path=..%2F..%2Fx`);
      assert.equal(odd.headers.location, `${base}/-/tree/main`);
      assert.equal((await getPage(t, aliceWeb, `${base}/-/refs/switch`)).status, 404);
    });
  });

  describe('the file tree', () => {
    it('lists a folder with breadcrumbs, a parent link and its README', async () => {
      const res = await getPage(t, aliceWeb, `${base}/-/tree/main/docs`);
      assert.equal(res.status, 200, res.text);
      assert.match(res.text, /<nav class="path-crumbs" aria-label="File path"><a href="[^"]*\/-\/tree\/main">[^<]*<\/a> \/ <strong>docs<\/strong><\/nav>/);
      assert.ok(res.text.includes(`<a href="${base}/-/tree/main" aria-label="Parent folder">..</a>`));
      assert.ok(res.text.includes(`href="${base}/-/blob/main/docs/guide.md"`));
      assert.match(res.text, /<h1>Docs readme<\/h1>/);
      assert.ok(res.text.includes(`<img src="${base}/-/raw/main/img/logo.png"`), 'README links relative to its folder');
      assert.ok(res.text.includes(`<input type="hidden" name="path" value="docs">`));
    });

    it('takes refs with slashes, tags and commit ids', async () => {
      const feature = await getPage(t, aliceWeb, `${base}/-/tree/feature/x`);
      assert.equal(feature.status, 200);
      assert.ok(feature.text.includes(`href="${base}/-/blob/feature/x/feature.txt"`));
      assert.match(feature.text, /<option value="feature\/x" selected>/);
      const tag = await getPage(t, aliceWeb, `${base}/-/tree/v1.0/src`);
      assert.equal(tag.status, 200);
      assert.ok(tag.text.includes(`href="${base}/-/blob/v1.0/src/app.ts"`));
      const sha = await getPage(t, aliceWeb, `${base}/-/tree/${firstCommit}`);
      assert.equal(sha.status, 200);
      assert.match(sha.text, /Initial &lt;script&gt;commit&lt;\/script&gt;/);
    });

    it('is 404 for missing folders and refs, and sends a file to its blob page', async () => {
      assert.equal((await getPage(t, aliceWeb, `${base}/-/tree/main/nothing`)).status, 404);
      assert.equal((await getPage(t, aliceWeb, `${base}/-/tree/nobranch`)).status, 404);
      assert.equal((await getPage(t, aliceWeb, `${base}/-/tree`)).status, 404);
      const file = await getPage(t, aliceWeb, `${base}/-/tree/main/README.md`);
      assert.equal(file.status, 302);
      assert.equal(file.headers.location, `${base}/-/blob/main/README.md`);
    });
  });

  describe('the file view', () => {
    it('shows a 2,000-line file highlighted, with line anchors and its links', async () => {
      const res = await getPage(t, aliceWeb, `${base}/-/blob/main/src/app.ts`);
      assert.equal(res.status, 200, res.text);
      assert.match(res.text, /<tr id="L1"><td class="ln"><a href="#L1">1<\/a><td><span class="hljs-keyword">export<\/span>/);
      assert.ok(res.text.includes('<tr id="L2000">'));
      assert.ok(!res.text.includes('<tr id="L2001">'));
      assert.ok(res.text.includes(`href="${base}/-/raw/main/src/app.ts"`));
      assert.ok(res.text.includes(`href="${base}/-/blame/main/src/app.ts"`));
      assert.ok(res.text.includes(`href="${base}/-/commits/main/src/app.ts"`));
      assert.match(res.text, new RegExp(`href="${base}/-/blob/[0-9a-f]{40}/src/app.ts"[^>]*>Permalink`));
      assert.match(res.text, /Change line two/, 'the last commit of the file');
      // Viewed again (the code table kept as bytes), the same page.
      const again = await getPage(t, aliceWeb, `${base}/-/blob/main/src/app.ts`);
      assert.equal(again.text, res.text);
      assert.ok(res.text.endsWith('</html>'));
    });

    it('highlights the same content by each file\'s own name', async () => {
      const ts = await getPage(t, aliceWeb, `${base}/-/blob/main/src/copy.ts`);
      const txt = await getPage(t, aliceWeb, `${base}/-/blob/main/src/copy.txt`);
      assert.match(ts.text, /<span class="hljs-keyword">const<\/span>/);
      assert.ok(!txt.text.includes('hljs-keyword'));
      assert.match(txt.text, /<tr id="L1"><td class="ln"><a href="#L1">1<\/a><td>const x = 1;/);
    });

    it('renders Markdown, with the source behind ?plain=1', async () => {
      const res = await getPage(t, aliceWeb, `${base}/-/blob/main/docs/guide.md`);
      assert.equal(res.status, 200);
      assert.match(res.text, /<h1>Guide<\/h1>/);
      assert.ok(res.text.includes(`<a href="${base}/-/blob/main/README.md"`));
      assert.match(res.text, /<a href="[^"]*guide.md" aria-current="page">Rendered<\/a>/);
      const plain = await getPage(t, aliceWeb, `${base}/-/blob/main/docs/guide.md?plain=1`);
      assert.match(plain.text, /<tr id="L1">/);
      assert.match(plain.text, /aria-current="page">Source<\/a>/);
    });

    it('shows images through raw, offers binaries for download and big files as raw links', async () => {
      const img = await getPage(t, aliceWeb, `${base}/-/blob/main/img/logo.png`);
      assert.equal(img.status, 200);
      assert.ok(img.text.includes(`<img src="${base}/-/raw/main/img/logo.png" alt="logo.png">`));
      const bin = await getPage(t, aliceWeb, `${base}/-/blob/main/bin/data.bin`);
      assert.match(bin.text, /stored as binary/);
      assert.ok(bin.text.includes(`href="${base}/-/raw/main/bin/data.bin?inline=false"`));
      const big = await getPage(t, aliceWeb, `${base}/-/blob/main/big.txt`);
      assert.equal(big.status, 200);
      assert.match(big.text, /too large to be shown/);
      assert.ok(!big.text.includes('<tr id="L1">'));
    });

    it('escapes file names and content', async () => {
      const odd = await getPage(t, aliceWeb, `${base}/-/blob/main/a%3Cb%3E%26%22c.txt`);
      assert.equal(odd.status, 200, odd.text);
      assert.ok(odd.text.includes('<strong>a&lt;b&gt;&amp;&quot;c.txt</strong>'));
      const page = await getPage(t, aliceWeb, `${base}/-/blob/main/page.html`);
      assert.ok(!page.text.includes('<script>alert'));
      assert.ok(!page.text.includes('style="'));
    });

    it('redirects a folder to its tree and is 404 for missing files', async () => {
      const dir = await getPage(t, aliceWeb, `${base}/-/blob/main/docs`);
      assert.equal(dir.status, 302);
      assert.equal(dir.headers.location, `${base}/-/tree/main/docs`);
      assert.equal((await getPage(t, aliceWeb, `${base}/-/blob/main/nothing.txt`)).status, 404);
      assert.equal((await getPage(t, aliceWeb, `${base}/-/blob/main`)).status, 404);
      assert.equal((await getPage(t, aliceWeb, `${base}/-/blob/feature/x/feature.txt`)).status, 200);
    });
  });

  describe('raw files', () => {
    it('serves text as text/plain, never HTML, sandboxed and not sniffed', async () => {
      const res = await getPage(t, aliceWeb, `${base}/-/raw/main/page.html`);
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      assert.match(res.headers['content-disposition'], /^inline; filename="page.html"/);
      assert.match(res.headers['content-security-policy'], /sandbox/);
      assert.equal(res.text, '<html><script>alert(1)</script></html>\n');
    });

    it('serves binaries as attachments and images as images', async () => {
      const bin = await getPage(t, aliceWeb, `${base}/-/raw/main/bin/data.bin`);
      assert.equal(bin.headers['content-type'], 'application/octet-stream');
      assert.match(bin.headers['content-disposition'], /^attachment; filename="data.bin"/);
      const img = await getPage(t, aliceWeb, `${base}/-/raw/main/img/logo.png`);
      assert.equal(img.headers['content-type'], 'image/png');
      assert.match(img.headers['content-disposition'], /^inline/);
      const download = await getPage(t, aliceWeb, `${base}/-/raw/main/img/logo.png?inline=false`);
      assert.match(download.headers['content-disposition'], /^attachment/);
      const odd = await getPage(t, aliceWeb, `${base}/-/raw/main/a%3Cb%3E%26%22c.txt`);
      assert.match(odd.headers['content-disposition'], /filename="a<b>&_c.txt"; filename\*=UTF-8''a%3Cb%3E%26%22c.txt/);
      const big = await getPage(t, aliceWeb, `${base}/-/raw/main/big.txt`);
      assert.equal(big.text.length, 1100 * 1024 + 1);
      assert.equal((await getPage(t, aliceWeb, `${base}/-/raw/main/docs`)).status, 404);
    });
  });

  describe('blame', () => {
    it('groups lines by commit with the commit in the left column, highlighted', async () => {
      const res = await getPage(t, aliceWeb, `${base}/-/blame/main/src/app.ts`);
      assert.equal(res.status, 200, res.text);
      const starts = [...res.text.matchAll(/<tr id="L(\d+)" class="blame-start"><td class="blame" rowspan="(\d+)">/g)].map((m) => [Number(m[1]), Number(m[2])]);
      assert.deepEqual(starts, [[1, 1], [2, 1], [3, 1998]]);
      assert.match(res.text, /Bob &amp; &quot;B&quot; Jr/);
      assert.match(res.text, /Initial &lt;script&gt;commit&lt;\/script&gt;/);
      assert.match(res.text, /<span class="hljs-keyword">const<\/span>/);
      assert.ok(res.text.includes('<tr id="L2000">'));
    });

    it('does not blame binaries, and is 404 for missing files', async () => {
      const bin = await getPage(t, aliceWeb, `${base}/-/blame/main/bin/data.bin`);
      assert.equal(bin.status, 200);
      assert.match(bin.text, /binary file cannot be blamed/);
      assert.equal((await getPage(t, aliceWeb, `${base}/-/blame/main/none`)).status, 404);
    });
  });

  describe('branches and tags', () => {
    it('lists branches with badges and tags with their commits', async () => {
      await t.post(`/api/v4/projects/${priv.id}/protected_branches`, { name: 'main' });
      const res = await getPage(t, aliceWeb, `${base}/-/branches`);
      assert.equal(res.status, 200, res.text);
      assert.match(res.text, /<a class="title" href="[^"]*\/-\/tree\/main">main<\/a>\n <span class="badge">default<\/span> <span class="badge warn">protected<\/span>/);
      assert.ok(res.text.includes(`href="${base}/-/tree/feature/x"`));
      assert.ok(res.text.indexOf('>main</a>') < res.text.indexOf('>feature/x</a>'), 'default branch first');
      const search = await getPage(t, aliceWeb, `${base}/-/branches?search=feat`);
      assert.ok(!search.text.includes('>main</a>'));
      assert.ok(search.text.includes('>feature/x</a>'));
      const tags = await getPage(t, aliceWeb, `${base}/-/tags`);
      assert.equal(tags.status, 200);
      assert.ok(tags.text.includes(`href="${base}/-/tree/v1.0"`));
      assert.match(tags.text, /Change line two/);
    });
  });

  describe('access and hostile paths', () => {
    const pages = (b: string) => [`${b}/-/tree/main`, `${b}/-/blob/main/README.md`, `${b}/-/raw/main/README.md`, `${b}/-/blame/main/README.md`, `${b}/-/branches`, `${b}/-/tags`, `${b}/-/refs/switch?ref=main`];

    it('hides a private project from outsiders (404) and sends anonymous visitors to sign in', async () => {
      for (const url of pages(base)) {
        const res = await getPage(t, outsiderWeb, url);
        assert.equal(res.status, 404, url);
        assert.ok(!res.text.includes('README'), url);
        const anon = await getPage(t, ANONYMOUS, url);
        assert.equal(anon.status, 302, url);
        assert.match(anon.headers.location, /^\/users\/sign_in\?redirect_to=/);
      }
    });

    it('shows a public project to anyone', async () => {
      const pubBase = `/${alice.user.username}/${pub.path}`;
      for (const url of pages(pubBase)) assert.ok([200, 302].includes((await getPage(t, ANONYMOUS, url)).status), url);
      const raw = await getPage(t, ANONYMOUS, `${pubBase}/-/raw/main/README.md`);
      assert.equal(raw.text, 'Public readme\n');
    });

    it('answers 404, never 500, to traversal attempts', async () => {
      const attempts = [
        `${base}/-/blob/main/../../../etc/passwd`,
        `${base}/-/blob/main/%2e%2e/%2e%2e/etc/passwd`,
        `${base}/-/blob/main:../../etc/passwd`,
        `${base}/-/blob/main:..%2f..%2fetc%2fpasswd`,
        `${base}/-/raw/main/..%2F..%2Fconfig`,
        `${base}/-/raw/HEAD:README.md`,
        `${base}/-/tree/main/%2e%2e`,
        `${base}/-/tree/--output=x`,
        `${base}/-/blame/main/-/x`,
        `${base}/-/blame/main~1/README.md`,
        `${base}/-/tree/main%00/x`,
        `${base}/-/blob/${'a'.repeat(40)}/README.md`,
      ];
      for (const url of attempts) {
        const res = await getPage(t, aliceWeb, url);
        assert.equal(res.status, 404, `${url}: ${res.status}`);
      }
    });
  });

  describe('dashboard, explore, users and groups', () => {
    it('sends / to the dashboard when signed in and to explore otherwise', async () => {
      const signed = await getPage(t, aliceWeb, '/');
      assert.equal(signed.status, 302);
      assert.equal(signed.headers.location, '/dashboard/projects');
      const anon = await getPage(t, ANONYMOUS, '/');
      assert.equal(anon.status, 302);
      assert.equal(anon.headers.location, '/explore');
      assert.equal((await getPage(t, aliceWeb, '/dashboard')).headers.location, '/dashboard/projects');
    });

    it('lists the signed-in user\'s projects, searchable; anonymous visitors sign in', async () => {
      const res = await getPage(t, aliceWeb, '/dashboard/projects');
      assert.equal(res.status, 200, res.text);
      assert.ok(res.text.includes('Secret &lt;script&gt;x&lt;/script&gt;'));
      assert.ok(res.text.includes('Open project'));
      assert.ok(res.text.includes('Group project'), 'group projects through membership');
      const search = await getPage(t, aliceWeb, '/dashboard/projects?name=open');
      assert.ok(search.text.includes('Open project'));
      assert.ok(!search.text.includes('Secret &lt;'));
      const other = await getPage(t, outsiderWeb, '/dashboard/projects');
      assert.ok(!other.text.includes('Open project'));
      assert.match(other.text, /not a member of any project/);
      assert.equal((await getPage(t, ANONYMOUS, '/dashboard/projects')).status, 302);
      await t.post(`/api/v4/projects/${pub.id}/star`, {}, { token: alice.token });
      const starred = await getPage(t, aliceWeb, '/dashboard/projects/starred');
      assert.ok(starred.text.includes('Open project'));
      assert.ok(!starred.text.includes('Secret &lt;'));
      assert.match(starred.text, /<a href="\/dashboard\/projects\/starred" aria-current="page">Starred projects<\/a>/);
      const groups = await getPage(t, aliceWeb, '/dashboard/groups');
      assert.ok(groups.text.includes('Team &lt;em&gt;One&lt;/em&gt;'));
      assert.ok(groups.text.includes('Hidden team'));
    });

    it('paginates 20 a page', async () => {
      const many = await t.createUser();
      for (let i = 0; i < 23; i++) await t.createProject({ owner: many.user, path: `many-${String(i).padStart(2, '0')}`, visibility: 20 });
      const web = await webSignIn(t, many);
      const first = await getPage(t, web, '/dashboard/projects');
      assert.equal((first.text.match(/<li><span class="avatar project"/g) ?? []).length, 20);
      assert.match(first.text, /Page 1 of 2/);
      assert.ok(first.text.includes('rel="next" href="/dashboard/projects?page=2"'));
      const second = await getPage(t, web, '/dashboard/projects?page=2');
      assert.equal((second.text.match(/<li><span class="avatar project"/g) ?? []).length, 3);
      assert.ok(second.text.includes('rel="prev" href="/dashboard/projects"'));
      const searched = await getPage(t, web, '/explore/projects?name=many&page=2');
      assert.ok(searched.text.includes('rel="prev" href="/explore/projects?name=many"'));
      assert.equal((await getPage(t, web, '/dashboard/projects?page=abc')).status, 200);
    });

    it('explore shows what the visitor may see', async () => {
      // (Searched: the pagination test made many newer public projects.)
      const anon = await getPage(t, ANONYMOUS, '/explore?name=project');
      assert.equal(anon.status, 200);
      assert.ok(anon.text.includes('Open project'));
      assert.ok(anon.text.includes('Group project'));
      assert.ok(!anon.text.includes('Secret'));
      assert.ok(!anon.text.includes('Group secret project'));
      const mine = await getPage(t, aliceWeb, '/explore/projects?name=project');
      assert.ok(mine.text.includes('Secret &lt;script&gt;'));
      const groups = await getPage(t, ANONYMOUS, '/explore/groups');
      assert.ok(groups.text.includes('Team &lt;em&gt;One&lt;/em&gt;'));
      assert.ok(!groups.text.includes('Hidden team'));
    });

    it('shows a user\'s page with their visible personal projects', async () => {
      const anon = await getPage(t, ANONYMOUS, `/${alice.user.username}`);
      assert.equal(anon.status, 200, anon.text);
      assert.ok(anon.text.includes('Alice &lt;b&gt;A&lt;/b&gt;'));
      assert.ok(anon.text.includes('Open project'));
      assert.ok(!anon.text.includes('Secret'));
      const own = await getPage(t, aliceWeb, `/${alice.user.username}`);
      assert.ok(own.text.includes('Secret &lt;script&gt;'));
      assert.equal((await getPage(t, outsiderWeb, '/no-such-user-here')).status, 404);
    });

    it('shows a group\'s page with its description, subgroups and visible projects', async () => {
      for (const url of ['/team', '/groups/team']) {
        const res = await getPage(t, ANONYMOUS, url);
        assert.equal(res.status, 200, `${url}: ${res.text}`);
        assert.ok(res.text.includes('<h1>Team &lt;em&gt;One&lt;/em&gt;</h1>'));
        assert.ok(res.text.includes('<strong>team</strong> &lt;script&gt;'));
        assert.ok(res.text.includes('href="/groups/team/sub"'));
        assert.ok(res.text.includes('Group project'));
        assert.ok(!res.text.includes('Group secret project'));
      }
      const member = await getPage(t, aliceWeb, '/groups/team');
      assert.ok(member.text.includes('Group secret project'));
      const subPage = await getPage(t, ANONYMOUS, '/groups/team/sub');
      assert.equal(subPage.status, 200);
      assert.ok(subPage.text.includes('<h1>Sub team</h1>'));
      void sub;
    });

    it('hides a private group from outsiders', async () => {
      assert.equal((await getPage(t, outsiderWeb, '/groups/hidden-team')).status, 404);
      assert.equal((await getPage(t, outsiderWeb, '/hidden-team')).status, 404);
      assert.equal((await getPage(t, ANONYMOUS, '/groups/hidden-team')).status, 302);
      assert.equal((await getPage(t, aliceWeb, '/groups/hidden-team')).status, 200);
      void privGroup;
    });
  });
});
