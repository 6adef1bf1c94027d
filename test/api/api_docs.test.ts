import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { API_COVERAGE, apiCoverageMarkdown } from '../../scripts/api-docs.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

describe('docs/api-coverage.md is generated from the route table', () => {
  let t: TestContext;
  before(async () => {
    t = await createTestContext();
  });
  after(async () => {
    await t.close();
  });

  it('matches the route table (run `npm run docs:api` after adding, moving or removing a route)', () => {
    const committed = fs.readFileSync(API_COVERAGE, 'utf8');
    assert.equal(committed, apiCoverageMarkdown(t.app.routeTable), 'docs/api-coverage.md is stale: run npm run docs:api');
  });

  it('lists every declared endpoint once, git over HTTP folded over its path depths', () => {
    const md = apiCoverageMarkdown(t.app.routeTable);
    const rows = md.split('\n').filter((l) => /^\| [^|]+ \| `[A-Z]+ \//.test(l));
    const endpoints = rows.map((l) => /`([A-Z]+ [^`]+)`/.exec(l)![1]);
    assert.equal(new Set(endpoints).size, endpoints.length, 'no endpoint twice');
    const apiRoutes = t.app.routeTable.filter((r) => r.method !== 'HEAD' && r.url.startsWith('/api/v4/'));
    for (const r of apiRoutes) assert.ok(endpoints.includes(`${r.method} ${r.url}`), `${r.method} ${r.url} is listed`);
    assert.ok(endpoints.includes('GET /:namespace/:project(.git)/info/refs'));
    assert.ok(endpoints.includes('POST /api/v4/projects/:id/repository/commits/:sha/cherry_pick'));
    assert.ok(rows.every((l) => l.endsWith(' | implemented |')));
    // An added route shows up (and so makes the committed file stale).
    const more = apiCoverageMarkdown([...t.app.routeTable, { method: 'GET', url: '/api/v4/projects/:id/widgets', access: { project: 'read_project' }, response: { 200: {} as any } }]);
    assert.match(more, /^\| widgets \| `GET \/api\/v4\/projects\/:id\/widgets` \| project: `read_project` \| 200 \| implemented \|$/m);
  });
});
