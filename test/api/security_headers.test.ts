import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { safeEqual } from '../../src/lib/secrets.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, runJob } from '../helpers/ci.js';
import { signIn } from '../oauth/support.js';

/**
 * Issue #15, part 5: pages carry a CSP without inline scripts, nosniff, X-Frame-Options and a
 * Referrer-Policy; every API answer is nosniff; raw downloads (files, blobs, snippets, job logs,
 * archives) are never something a browser renders as HTML, SVG or XML.
 */
const HTML = '<html><body><script>alert(document.cookie)</script></body></html>\n';
const SVG = '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><rect width="1" height="1"/></svg>\n';
const XML = '<?xml version="1.0"?><x:script xmlns:x="http://www.w3.org/1999/xhtml">alert(1)</x:script>\n';

/** A browser renders none of these: plain text or bytes, an attachment otherwise; never sniffed. */
function assertNotRenderable(res: { status: number; headers: Record<string, any>; text: string }, what: string) {
  assert.equal(res.status, 200, `${what}: ${res.text.slice(0, 200)}`);
  const type = String(res.headers['content-type'] ?? '');
  const disposition = String(res.headers['content-disposition'] ?? '');
  assert.ok(/^(text\/plain|application\/octet-stream|application\/zip|application\/gzip|application\/x-tar|application\/x-gzip|application\/x-bzip2)/.test(type) || disposition.startsWith('attachment'),
    `${what}: served as ${type} (${disposition})`);
  assert.ok(!/html|svg|xml/i.test(type), `${what}: served as ${type}`);
  assert.equal(res.headers['x-content-type-options'], 'nosniff', `${what}: nosniff`);
}

describe('security headers', () => {
  let t: TestContext;
  let projectId: number;
  before(async () => {
    t = await createTestContext();
    const p = await t.createProject({ visibility: 20 });
    projectId = p.id;
    await commitFiles(t, p, { 'page.html': HTML, 'image.svg': SVG, 'data.xml': XML, 'page.txt': HTML, '.gitlab-ci.yml': 'build:\n  script: echo hi\n' });
  });
  after(async () => { await t.close(); });

  it('every HTML page: a CSP without scripts or unsafe-inline, nosniff, X-Frame-Options DENY, frame-ancestors none, a Referrer-Policy', async () => {
    const u = await t.createUser();
    const session = (await signIn(t, u.user.username, u.password)).cookie;
    const pages = [
      await t.get('/users/sign_in', { token: null }),
      await t.call('POST', '/users/sign_in', { token: null, form: 'user[login]=x&user[password]=y' }),
      await t.get('/oauth/authorize?client_id=nope&redirect_uri=http://x/&response_type=code', { token: null, headers: { cookie: session } }),
      await t.get('/-/user_settings/applications', { token: null, headers: { cookie: session } }),
      await t.get('/-/user_settings/personal_access_tokens', { token: null, headers: { cookie: session } }),
      await t.get('/-/user_settings/personal_access_tokens/999999/revoke', { token: null, headers: { cookie: session } }),
    ];
    let html = 0;
    for (const res of pages) {
      if (!String(res.headers['content-type']).startsWith('text/html')) continue;
      html++;
      const csp = String(res.headers['content-security-policy']);
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.ok(!/unsafe-inline|unsafe-eval|script-src/.test(csp), csp);
      assert.equal(res.headers['x-frame-options'], 'DENY');
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      assert.equal(res.headers['referrer-policy'], 'strict-origin-when-cross-origin');
      assert.ok(!/<script|\son[a-z]+=/i.test(res.text), 'no script in a page');
      // The page's only style sheet is the one the policy allows by its hash.
      const style = /<style>([\s\S]*?)<\/style>/.exec(res.text)?.[1];
      if (style !== undefined) assert.ok(csp.includes(`'sha256-${crypto.createHash('sha256').update(style).digest('base64')}'`), 'style hash in the CSP');
      assert.ok(!/style="/.test(res.text), 'no style attribute (the CSP would block it)');
    }
    assert.ok(html >= 4, `${html} HTML pages checked`);
  });

  it('every API answer is nosniff with a CSP that allows nothing (JSON, errors, 404s)', async () => {
    for (const res of [
      await t.get('/api/v4/version'),
      await t.get(`/api/v4/projects/${projectId}`),
      await t.get('/api/v4/projects/999999999'),
      await t.get('/api/v4/no/such/route'),
      await t.get('/api/v4/user', { token: null }),
    ]) {
      assert.equal(res.headers['x-content-type-options'], 'nosniff', JSON.stringify(res.headers));
      assert.match(String(res.headers['content-security-policy']), /^default-src 'none'/);
    }
  });

  it('raw files and blobs: HTML, SVG and XML come as text/plain with nosniff, anonymous or not', async () => {
    for (const file of ['page.html', 'image.svg', 'data.xml', 'page.txt']) {
      for (const token of [undefined, null]) {
        const raw = await t.get(`/api/v4/projects/${projectId}/repository/files/${file}/raw?ref=main`, { token });
        assertNotRenderable(raw, `files raw ${file}`);
        assert.equal(raw.text, file === 'image.svg' ? SVG : file === 'data.xml' ? XML : HTML);
      }
      const meta = await t.get(`/api/v4/projects/${projectId}/repository/files/${file}?ref=main`);
      assertNotRenderable(await t.get(`/api/v4/projects/${projectId}/repository/blobs/${meta.body.blob_id}/raw`), `blob raw ${file}`);
    }
  });

  it('snippets raw: markup is an attachment, text/plain, nosniff (personal and project snippets, whole and per file)', async () => {
    const ps = await t.post(`/api/v4/projects/${projectId}/snippets`, { title: 's', visibility: 'public', files: [{ file_path: 'x.html', content: HTML }] });
    assert.equal(ps.status, 201, ps.text);
    const s = await t.post('/api/v4/snippets', { title: 's', visibility: 'public', files: [{ file_path: 'y.svg', content: SVG }] });
    assert.equal(s.status, 201, s.text);
    for (const [url, what] of [
      [`/api/v4/projects/${projectId}/snippets/${ps.body.id}/raw`, 'project snippet raw'],
      [`/api/v4/projects/${projectId}/snippets/${ps.body.id}/files/main/x.html/raw`, 'project snippet file raw'],
      [`/api/v4/snippets/${s.body.id}/raw`, 'snippet raw'],
      [`/api/v4/snippets/${s.body.id}/files/main/y.svg/raw`, 'snippet file raw'],
    ]) {
      const res = await t.get(url, { token: null });
      assertNotRenderable(res, what);
      assert.match(String(res.headers['content-disposition']), /^attachment/, what);
    }
  });

  it('job logs and repository archives are never rendered', async () => {
    const pipeline = await latestPipeline(t, projectId);
    const jobs = await jobsByName(t, pipeline.id);
    await runJob(t, jobs.build, 'success', { trace: HTML });
    const trace = await t.get(`/api/v4/projects/${projectId}/jobs/${jobs.build.id}/trace`, { token: null });
    assertNotRenderable(trace, 'job trace');
    assert.equal(trace.text, HTML);
    const archive = await t.get(`/api/v4/projects/${projectId}/repository/archive.zip`);
    assertNotRenderable(archive, 'archive');
    assert.match(String(archive.headers['content-disposition']), /^attachment/);
  });

  it('secrets are compared in constant time: digests of both sides, whatever their lengths', () => {
    assert.equal(safeEqual('abc', 'abc'), true);
    assert.equal(safeEqual('abc', 'abd'), false);
    assert.equal(safeEqual('abc', 'abcd'), false);
    assert.equal(safeEqual('', ''), true);
    assert.equal(safeEqual('é', 'e\u0301'), false);
  });
});
