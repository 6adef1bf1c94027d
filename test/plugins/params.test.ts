import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Type } from 'typebox';
import { parseNestedParams, toBoolean } from '../../src/plugins/params.js';
import { PaginationQuery, pageParams, setPaginationHeaders } from '../../src/plugins/pagination.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

describe('parameter parsing', () => {
  it('parses Rack-style arrays, hashes and arrays of hashes', () => {
    assert.deepEqual(parseNestedParams('a=1&b[]=x&b[]=y&c[k]=v'), { a: '1', b: ['x', 'y'], c: { k: 'v' } });
    assert.deepEqual(
      parseNestedParams('actions[][action]=create&actions[][file_path]=a%2Fb.txt&actions[][action]=delete&actions[][file_path]=c'),
      { actions: [{ action: 'create', file_path: 'a/b.txt' }, { action: 'delete', file_path: 'c' }] },
    );
    assert.deepEqual(parseNestedParams('q=a+b%20c&bad=%E0%A4%A'), { q: 'a b c', bad: '\u00e0\u00a4%A' });
    assert.deepEqual(parseNestedParams('__proto__[x]=1&constructor=2'), {});
  });

  it('reads booleans as GitLab does', () => {
    for (const v of ['true', 'True', '1', 'yes', true]) assert.equal(toBoolean(v), true);
    for (const v of ['false', 'False', '0', 'no', false]) assert.equal(toBoolean(v), false);
    assert.equal(toBoolean('maybe'), undefined);
  });
});

describe('request conventions', () => {
  let t: TestContext;
  before(async () => {
    t = await createTestContext({}, (app) => {
      const schema = Type.Object({ flag: Type.Optional(Type.Boolean()), name: Type.String(), ids: Type.Optional(Type.Array(Type.Integer())) });
      app.post('/api/v4/__echo', { schema: { body: schema } }, async (req, reply) => reply.code(201).send(req.body));
      app.put('/api/v4/__echo', { schema: { body: schema } }, async (req) => req.body);
      app.delete('/api/v4/__echo', async (_req, reply) => reply.code(204).send());
      app.get('/api/v4/__list', { schema: { querystring: Type.Object(PaginationQuery) } }, async (req, reply) => {
        const page = pageParams(req);
        setPaginationHeaders(req, reply, page, 45);
        return Array.from({ length: Math.max(0, Math.min(page.perPage, 45 - page.offset)) }, (_, i) => page.offset + i);
      });
    });
  });
  after(async () => { await t.close(); });

  it('takes POST parameters from the query, a form or JSON, with GitLab booleans', async () => {
    const q = await t.call('POST', '/api/v4/__echo?name=a&flag=True&ids[]=1&ids[]=2');
    assert.equal(q.status, 201);
    assert.deepEqual(q.body, { name: 'a', flag: true, ids: [1, 2] });
    const form = await t.call('POST', '/api/v4/__echo', { form: 'name=b&flag=0' });
    assert.deepEqual(form.body, { name: 'b', flag: false });
    const json = await t.post('/api/v4/__echo', { name: 'c', flag: 'false', extra: 'ignored' });
    assert.deepEqual(json.body, { name: 'c', flag: false, extra: 'ignored' });
    const put = await t.put('/api/v4/__echo?flag=1', { name: 'd' });
    assert.deepEqual(put.body, { name: 'd', flag: true });
  });

  it('missing and invalid parameters are 400 with GitLab error bodies', async () => {
    const missing = await t.post('/api/v4/__echo', {});
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.body, { error: 'name is missing' });
    const badJson = await t.app.inject({ method: 'POST', url: '/api/v4/__echo', headers: { 'content-type': 'application/json', 'private-token': 'root-test-token-0123456789' }, payload: '{"name":' });
    assert.equal(badJson.statusCode, 400);
    assert.match(JSON.parse(badJson.body).message, /^400 /);
  });

  it('accepts DELETE with a {} body and answers JSON without a charset', async () => {
    const res = await t.call('DELETE', '/api/v4/__echo', { body: {} });
    assert.equal(res.status, 204);
    const created = await t.post('/api/v4/__echo', { name: 'x' });
    assert.equal(created.headers['content-type'], 'application/json');
  });

  it('emits GitLab pagination headers and caps per_page at 100', async () => {
    const res = await t.get('/api/v4/__list?page=2&per_page=20&scope=x');
    assert.deepEqual(res.body, Array.from({ length: 20 }, (_, i) => 20 + i));
    assert.equal(res.headers['x-total'], '45');
    assert.equal(res.headers['x-total-pages'], '3');
    assert.equal(res.headers['x-page'], '2');
    assert.equal(res.headers['x-next-page'], '3');
    assert.equal(res.headers['x-prev-page'], '1');
    assert.match(res.headers.link, /<http:\/\/127\.0\.0\.1:8080\/api\/v4\/__list\?page=3&per_page=20&scope=x>; rel="next"/);
    assert.equal((await t.get('/api/v4/__list?per_page=1000')).headers['x-per-page'], '100');
    assert.equal((await t.get('/api/v4/__list?per_page=abc&page=-1')).headers['x-page'], '1');
  });
});
