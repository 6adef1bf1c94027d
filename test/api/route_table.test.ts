import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Type } from 'typebox';
import { route } from '../../src/api/route.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

describe('route table: every route declares who may call it and what it answers', () => {
  let t: TestContext;
  before(async () => {
    t = await createTestContext({}, (app) => {
      // A route whose answer drifted from its declared form.
      app.get('/test/drifted', route({
        access: { public: true },
        matrix: 'public',
        schema: { response: { 200: Type.Object({ id: Type.Integer() }, { additionalProperties: false }) } },
      }), async () => ({ id: 1, leaked: 'a field the schema does not know' }));
    });
  });
  after(async () => { await t.close(); });

  it('has no route without a declared access rule', () => {
    const missing = t.app.routeTable.filter((r) => r.method !== 'HEAD' && !r.access).map((r) => `${r.method} ${r.url}`);
    assert.equal(missing.length, 0, `${missing.length} routes without access, e.g. ${missing.slice(0, 15).join(', ')}`);
  });

  it('has no route without a declared permission matrix (src/api/permissions.ts)', () => {
    const missing = t.app.routeTable.filter((r) => r.method !== 'HEAD' && !r.matrix).map((r) => `${r.method} ${r.url}`);
    assert.equal(missing.length, 0, `${missing.length} routes without a matrix declaration, e.g. ${missing.slice(0, 15).join(', ')}`);
  });

  it('has no route without a response schema for its success answer', () => {
    const missing = t.app.routeTable
      .filter((r) => r.method !== 'HEAD' && (!r.response || !Object.keys(r.response).some((code) => Number(code) >= 200 && Number(code) < 400)))
      .map((r) => `${r.method} ${r.url}`);
    assert.equal(missing.length, 0, `${missing.length} routes without a response schema, e.g. ${missing.slice(0, 15).join(', ')}`);
  });

  it("has every request validator compile (they compile lazily, on a route's first request)", async () => {
    await t.app.ready();
    const compiled = t.app.compileAllValidators();
    assert.ok(compiled > 100, `only ${compiled} validators were waiting to compile`);
    assert.equal(t.app.compileAllValidators(), 0);
  });

  it('lists a fair number of routes (the table is really collected)', () => {
    assert.ok(t.app.routeTable.length > 100, `only ${t.app.routeTable.length} routes`);
  });

  it('fails an answer that does not match its schema while responses are checked', async () => {
    const res = await t.get('/test/drifted', { token: null });
    assert.equal(res.status, 500);
  });
});
