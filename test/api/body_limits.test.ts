import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { contentBodyLimit, loadConfig } from '../../src/config.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import type { Project } from '../../src/db/schema/core.js';

const TOO_LARGE = { message: '413 Request Entity Too Large' };

describe('request body limits', () => {
  let t: TestContext;
  let project: Project;
  // Small limits keep the test fast; the rules are the same at the defaults.
  const maxBodySize = 4096;
  const maxFileSize = 8192;

  before(async () => {
    t = await createTestContext({ maxBodySize, maxFileSize });
    project = await t.createProject({ visibility: 20 });
  });
  after(async () => { await t.close(); });

  it('defaults: 8 MiB bodies; commits and files get one base64 file of CAIRN_MAX_FILE_SIZE more', () => {
    const cfg = loadConfig({});
    assert.equal(cfg.maxBodySize, 8 * 1024 * 1024);
    assert.equal(contentBodyLimit(cfg), Math.ceil((cfg.maxFileSize * 4) / 3) + cfg.maxBodySize);
    assert.equal(loadConfig({ CAIRN_MAX_BODY_SIZE: '1000' }).maxBodySize, 1000);
    assert.throws(() => loadConfig({ CAIRN_MAX_BODY_SIZE: '0' }), /CAIRN_MAX_BODY_SIZE/);
    assert.throws(() => loadConfig({ CAIRN_MAX_BODY_SIZE: 'big' }), /CAIRN_MAX_BODY_SIZE/);
  });

  it('an ordinary JSON or form body over the limit is 413 with a GitLab body', async () => {
    const json = await t.post('/api/v4/projects', { name: 'big', description: 'd'.repeat(maxBodySize) });
    assert.equal(json.status, 413);
    assert.deepEqual(json.body, TOO_LARGE);
    const form = await t.post('/api/v4/projects', undefined, { form: `name=big&description=${'d'.repeat(maxBodySize)}` });
    assert.equal(form.status, 413);
    assert.deepEqual(form.body, TOO_LARGE);
    // Under the limit the same request works.
    const ok = await t.post('/api/v4/projects', { name: 'small', description: 'd'.repeat(100) });
    assert.equal(ok.status, 201, ok.text);
  });

  it('the commits API takes a base64 file of the largest allowed size, and refuses more than its limit', async () => {
    const content = Buffer.alloc(maxFileSize, 7).toString('base64');
    assert.ok(content.length > maxBodySize);
    const res = await t.post(`/api/v4/projects/${project.id}/repository/commits`, {
      branch: 'main',
      commit_message: 'a binary file',
      actions: [{ action: 'create', file_path: 'blob.bin', content, encoding: 'base64' }],
    });
    assert.equal(res.status, 201, res.text);

    const huge = 'x'.repeat(contentBodyLimit(t.config) + 1);
    const over = await t.post(`/api/v4/projects/${project.id}/repository/commits`, {
      branch: 'main',
      commit_message: 'too big',
      actions: [{ action: 'create', file_path: 'huge.txt', content: huge }],
    });
    assert.equal(over.status, 413);
    assert.deepEqual(over.body, TOO_LARGE);
  });

  it('the files API takes a base64 file of the largest allowed size on create and update', async () => {
    const url = `/api/v4/projects/${project.id}/repository/files/${encodeURIComponent('dir/data.bin')}`;
    const content = Buffer.alloc(maxFileSize, 1).toString('base64');
    const created = await t.post(url, { branch: 'main', commit_message: 'add', content, encoding: 'base64' });
    assert.equal(created.status, 201, created.text);
    const updated = await t.put(url, { branch: 'main', commit_message: 'update', content: Buffer.alloc(maxFileSize, 2).toString('base64'), encoding: 'base64' });
    assert.equal(updated.status, 200, updated.text);
    const over = await t.put(url, { branch: 'main', commit_message: 'update', content: 'y'.repeat(contentBodyLimit(t.config) + 1) });
    assert.equal(over.status, 413);
  });

  it('git over HTTP streams its request bodies and is not held to the API limit', async () => {
    const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', project.namespace_id).executeTakeFirstOrThrow();
    const head = (await t.get(`/api/v4/projects/${project.id}/repository/branches/main`)).body.commit.id;
    // A fetch of main whose request (the same want repeated) is larger than the API body limit.
    const line = (s: string) => (s.length + 4).toString(16).padStart(4, '0') + s;
    let body = line(`want ${head} ofs-delta\n`);
    while (body.length <= maxBodySize * 2) body += line(`want ${head}\n`);
    body += '0000' + line('done\n');
    const res = await t.app.inject({
      method: 'POST',
      url: `/${ns.full_path}/${project.path}.git/git-upload-pack`,
      headers: { 'content-type': 'application/x-git-upload-pack-request' },
      payload: body,
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.headers['content-type'], 'application/x-git-upload-pack-result');
  });
});
