// The permission matrix (issue #15): every route of the route table called as every kind of
// caller (src/api/permissions.ts), each answer checked against the route's declaration. The
// short form (npm test) walks a private project in a private group; the long form
// (CAIRN_SOAK=1, npm run test:soak) also internal and public ones, with more token columns.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { buildWorld, walkMatrix } from './permission_matrix.js';
import type { WorldName } from '../../src/api/permissions.js';

const LONG = !!process.env.CAIRN_SOAK;
const WORLDS: WorldName[] = LONG ? ['private', 'internal', 'public'] : ['private'];

describe(`permission matrix (${LONG ? 'long' : 'short'} form)`, () => {
  let t: TestContext;
  before(async () => {
    t = await createTestContext({ runnerPollTimeout: 1 } as any);
  });
  after(async () => { await t.close(); });

  it('declares a matrix for every route', () => {
    const missing = t.app.routeTable.filter((r) => r.method !== 'HEAD' && !r.matrix).map((r) => `${r.method} ${r.url}`);
    assert.deepEqual(missing, []);
  });

  for (const name of WORLDS) {
    it(`answers every route x column as declared: ${name} project and group`, { timeout: 900_000 }, async () => {
      const started = Date.now();
      const world = await buildWorld(t, name);
      const setup = Date.now() - started;
      const result = await walkMatrix(t, world, { long: LONG });
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      console.log(`permission matrix [${name}]: ${result.routes} routes x ${result.columns} columns = ${result.cells} cells in ${seconds} s (fixture ${(setup / 1000).toFixed(1)} s), ${result.failures.length} differing`);
      assert.equal(result.failures.length, 0, `${result.failures.length} cells differ:\n${result.failures.slice(0, 400).join('\n')}`);
    });
  }
});
