import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { Value } from 'typebox/value';
import { tokenDigest } from '../../src/lib/secrets.js';
import { ApplicationSchema, ApplicationWithSecretSchema } from '../../src/presenters/schemas/applications.js';
import { tokenRequest } from './support.js';

describe('Applications API (instance-wide OAuth applications)', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  it('POST creates an application and shows the secret once (stored as a digest)', async () => {
    const res = await t.post('/api/v4/applications', { name: 'MyApplication', redirect_uri: 'https://redirect.example/cb', scopes: 'api read_user email' });
    assert.equal(res.status, 201);
    assert.deepEqual(Object.keys(res.body).sort(), ['application_id', 'application_name', 'callback_url', 'confidential', 'id', 'secret']);
    assert.equal(typeof res.body.id, 'number');
    assert.match(res.body.application_id, /^[0-9a-f]{64}$/);
    assert.match(res.body.secret, /^gloas-[0-9a-f]{64}$/);
    assert.equal(res.body.application_name, 'MyApplication');
    assert.equal(res.body.callback_url, 'https://redirect.example/cb');
    assert.equal(res.body.confidential, true);
    const row = await t.db.selectFrom('oauth_applications').selectAll().where('id', '=', res.body.id).executeTakeFirstOrThrow();
    assert.equal(row.secret_digest, tokenDigest(res.body.secret));
    assert.deepEqual(row.scopes, ['api', 'read_user', 'email']);
    assert.equal(row.owner_id, null);

    const list = await t.get('/api/v4/applications');
    assert.equal(list.status, 200);
    assert.ok(Value.Check(ApplicationWithSecretSchema, res.body), 'create response matches its schema');
    for (const a of list.body) assert.ok(Value.Check(ApplicationSchema, a), 'list entries match their schema');
    assert.ok(list.body.every((a: any) => !('secret' in a)));
    const listed = list.body.find((a: any) => a.id === res.body.id);
    assert.deepEqual(listed, { id: res.body.id, application_id: res.body.application_id, application_name: 'MyApplication', callback_url: 'https://redirect.example/cb', confidential: true });
  });

  it('form parameters, comma-separated scopes, confidential=false, several redirect URIs', async () => {
    const res = await t.call('POST', '/api/v4/applications', {
      form: `name=SPA&redirect_uri=${encodeURIComponent('https://a.example/cb\nhttp://localhost:8080/cb')}&scopes=read_api,read_user&confidential=false`,
    });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.confidential, false);
    assert.equal(res.body.callback_url, 'https://a.example/cb\nhttp://localhost:8080/cb');
  });

  it('validation: missing, blank and unknown values', async () => {
    const missing = await t.post('/api/v4/applications', { name: 'x', redirect_uri: 'https://r.example' });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.error, 'scopes is missing');
    const blank = await t.post('/api/v4/applications', { name: 'x', redirect_uri: 'https://r.example', scopes: '' });
    assert.equal(blank.status, 400);
    assert.equal(blank.body.error, 'scopes is empty');
    const unknown = await t.post('/api/v4/applications', { name: 'x', redirect_uri: 'https://r.example', scopes: 'api everything' });
    assert.equal(unknown.status, 400);
    assert.deepEqual(unknown.body, { message: { scopes: ["doesn't match configured on the server."] } });
    const relative = await t.post('/api/v4/applications', { name: 'x', redirect_uri: '/callback', scopes: 'api' });
    assert.equal(relative.status, 400);
    assert.deepEqual(relative.body.message.redirect_uri, ['must be an absolute URI.']);
    const fragment = await t.post('/api/v4/applications', { name: 'x', redirect_uri: 'https://r.example/cb#frag', scopes: 'api' });
    assert.deepEqual(fragment.body.message.redirect_uri, ['cannot contain a fragment.']);
    const js = await t.post('/api/v4/applications', { name: 'x', redirect_uri: 'javascript:alert(1)', scopes: 'api' });
    assert.equal(js.status, 400);
    const noName = await t.post('/api/v4/applications', { name: '  ', redirect_uri: 'https://r.example', scopes: 'api' });
    assert.deepEqual(noName.body.message.name, ["can't be blank"]);
  });

  it('administrators only: anonymous 401, regular user 403', async () => {
    const user = await t.createUser();
    for (const [method, url] of [['POST', '/api/v4/applications'], ['GET', '/api/v4/applications'], ['DELETE', '/api/v4/applications/1'], ['POST', '/api/v4/applications/1/renew-secret']]) {
      assert.equal((await t.call(method, url, { token: null, body: method === 'POST' ? {} : undefined })).status, 401, `${method} ${url}`);
      assert.equal((await t.call(method, url, { token: user.token, body: method === 'POST' ? {} : undefined })).status, 403, `${method} ${url}`);
    }
  });

  it("GET lists only instance-wide applications, not users' own", async () => {
    const user = await t.createUser();
    await t.db.insertInto('oauth_applications').values({ name: 'mine', uid: 'u'.repeat(64), secret_digest: 'x', redirect_uri: 'https://m.example', scopes: ['api'], owner_id: user.user.id }).execute();
    const list = await t.get('/api/v4/applications');
    assert.ok(!list.body.some((a: any) => a.application_name === 'mine'));
    const mine = await t.db.selectFrom('oauth_applications').select('id').where('name', '=', 'mine').executeTakeFirstOrThrow();
    assert.equal((await t.delete(`/api/v4/applications/${mine.id}`)).status, 404);
  });

  it('renew-secret: a new secret, the old one stops working', async () => {
    const created = (await t.post('/api/v4/applications', { name: 'renew', redirect_uri: 'https://r.example', scopes: 'api' })).body;
    const user = await t.createUser();
    const grant = (secret: string) => tokenRequest(t, { grant_type: 'password', username: user.user.username, password: user.password, client_id: created.application_id, client_secret: secret });
    assert.equal((await grant(created.secret)).status, 200);
    const renewed = await t.post(`/api/v4/applications/${created.id}/renew-secret`);
    assert.equal(renewed.status, 201);
    assert.equal(renewed.body.application_id, created.application_id);
    assert.notEqual(renewed.body.secret, created.secret);
    assert.equal((await grant(created.secret)).status, 401);
    assert.equal((await grant(renewed.body.secret)).status, 200);
    const missing = await t.post('/api/v4/applications/999999/renew-secret');
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body, { message: '404 Application Not Found' });
  });

  it('DELETE removes the application and its tokens', async () => {
    const created = (await t.post('/api/v4/applications', { name: 'gone', redirect_uri: 'https://r.example', scopes: 'api' })).body;
    const user = await t.createUser();
    const tok = await tokenRequest(t, { grant_type: 'password', username: user.user.username, password: user.password, client_id: created.application_id, client_secret: created.secret });
    assert.equal((await t.get('/api/v4/version', { token: null, headers: { authorization: `Bearer ${tok.body.access_token}` } })).status, 200);
    const del = await t.delete(`/api/v4/applications/${created.id}`);
    assert.equal(del.status, 204);
    assert.equal(del.text, '');
    assert.equal((await t.get('/api/v4/version', { token: null, headers: { authorization: `Bearer ${tok.body.access_token}` } })).status, 401);
    assert.equal((await t.delete(`/api/v4/applications/${created.id}`)).status, 404);
    assert.equal((await t.delete('/api/v4/applications/abc')).status, 400);
    assert.equal((await t.delete('/api/v4/applications/99999999999')).status, 404);
    assert.equal((await t.post('/api/v4/applications/99999999999/renew-secret')).status, 404);
  });
});
