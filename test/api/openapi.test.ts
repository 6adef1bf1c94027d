import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import type { RouteRecord } from '../../src/plugins/responses.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/**
 * `/api/v4/projects/:id/labels/:label_id` -> `/api/v4/projects/{id}/labels/{label_id}`; a trailing
 * wildcard (`.../artifacts/*`, the rest of the path) is the path parameter `{*}`.
 */
const openApiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\/\*$/, '/{*}');

const propertiesOf = (schema: any): string[] => Object.keys(schema?.properties ?? {});

/** What the document lacks of the API routes in `table`: one line per problem. */
function coverageProblems(table: RouteRecord[], doc: any): string[] {
  const problems: string[] = [];
  for (const r of table) {
    if (!r.url.startsWith('/api/v4/') || r.method === 'HEAD') continue;
    const where = `${r.method} ${r.url}`;
    const op = doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()];
    if (!op) {
      problems.push(`${where}: not in the document`);
      continue;
    }
    const declared = Object.keys(r.response ?? {});
    if (!declared.some((c) => Number(c) >= 200 && Number(c) < 400)) problems.push(`${where}: no success response schema`);
    for (const code of declared) if (!op.responses?.[code]) problems.push(`${where}: response ${code} missing`);
    const params = (op.parameters ?? []) as { in: string; name: string; required?: boolean }[];
    for (const name of propertiesOf(r.params)) {
      if (!params.some((p) => p.in === 'path' && p.name === name && p.required)) problems.push(`${where}: path parameter ${name} missing`);
    }
    for (const name of propertiesOf(r.querystring)) {
      if (!params.some((p) => p.in === 'query' && p.name === name)) problems.push(`${where}: query parameter ${name} missing`);
    }
    if (r.body) {
      const content = op.requestBody?.content ?? {};
      const bodySchema = Object.values(content)[0] as any;
      if (!bodySchema?.schema) problems.push(`${where}: request body missing`);
      else for (const name of propertiesOf(r.body)) if (!(name in (bodySchema.schema.properties ?? {}))) problems.push(`${where}: body field ${name} missing`);
    }
  }
  return problems;
}

describe('OpenAPI 3.1 document at /api/v4/openapi.json', () => {
  let t: TestContext;
  let doc: any;
  before(async () => {
    t = await createTestContext();
    const res = await t.get('/api/v4/openapi.json', { token: null });
    assert.equal(res.status, 200);
    assert.match(res.headers['content-type'], /^application\/json/);
    doc = res.body;
  });
  after(async () => { await t.close(); });

  it('is a valid OpenAPI 3.1 document (a real validator)', async () => {
    assert.equal(doc.openapi, '3.1.0');
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    assert.equal(validator.version, '3.1');
    assert.ok(result.valid, `invalid: ${JSON.stringify(result.errors)?.slice(0, 2000)}`);
    // Every $ref resolves.
    assert.ok(validator.resolveRefs());
  });

  it('covers every API route with its method, parameters, body and response codes', () => {
    const api = t.app.routeTable.filter((r) => r.url.startsWith('/api/v4/') && r.method !== 'HEAD');
    assert.ok(api.length > 300, `only ${api.length} API routes`);
    const problems = coverageProblems(t.app.routeTable, doc);
    assert.deepEqual(problems.slice(0, 20), [], `${problems.length} problems`);
    let operations = 0;
    for (const item of Object.values(doc.paths) as any[]) operations += Object.keys(item).filter((m) => METHODS.includes(m)).length;
    assert.equal(operations, api.length, 'one operation per API route, and nothing else');
  });

  it('the coverage check catches a route the document lacks or that declares no answer', () => {
    const extra: RouteRecord[] = [
      { method: 'GET', url: '/api/v4/undocumented/:id', access: { public: true }, response: undefined },
      { method: 'POST', url: '/api/v4/projects/:id/labels', access: { public: true }, response: { 201: {} as any, 418: {} as any } },
    ];
    const problems = coverageProblems(extra, doc);
    assert.ok(problems.includes('GET /api/v4/undocumented/:id: not in the document'), problems.join('\n'));
    assert.ok(problems.includes('POST /api/v4/projects/:id/labels: response 418 missing'), problems.join('\n'));
  });

  it('describes operations fully: parameters, request body, JSON and raw answers, errors', () => {
    const list = doc.paths['/api/v4/projects/{id}/labels'].get;
    assert.deepEqual(list.tags, ['labels']);
    assert.equal(list.operationId, 'get_projects_by_id_labels');
    const names = list.parameters.map((p: any) => `${p.in}:${p.name}`);
    for (const n of ['path:id', 'query:page', 'query:per_page', 'query:with_counts', 'query:search']) assert.ok(names.includes(n), n);
    const item = list.responses['200'].content['application/json'].schema;
    assert.equal(item.type, 'array');
    assert.ok(item.items.required.includes('name'));
    assert.ok(list.responses['4XX'].content['application/json'].schema.$ref);

    const create = doc.paths['/api/v4/projects/{id}/labels'].post;
    assert.ok(create.requestBody.content['application/json'].schema.properties.name);
    assert.ok(create.responses['201']);

    const raw = doc.paths['/api/v4/projects/{id}/repository/files/{file_path}/raw'].get;
    assert.deepEqual(Object.keys(raw.responses['200'].content).sort(), ['application/octet-stream', 'text/plain']);
    const removal = doc.paths['/api/v4/projects/{id}/labels/{label_id}'].delete;
    assert.equal(removal.responses['204'].content, undefined);

    // No TypeBox internals leak into the document.
    assert.doesNotMatch(JSON.stringify(doc), /~kind|x-raw/);
    // Non-API routes (git over HTTP, OAuth, pages, probes) are not part of it.
    assert.ok(Object.keys(doc.paths).every((p) => p.startsWith('/api/v4/')));
    assert.ok(doc.components.securitySchemes.privateToken);
  });

  it('is public and the same document on every call', async () => {
    const again = await t.get('/api/v4/openapi.json');
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, doc);
  });
});
