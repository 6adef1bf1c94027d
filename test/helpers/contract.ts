import assert from 'node:assert/strict';
import type { TSchema } from 'typebox';
import { Value } from 'typebox/value';

/** Fails with the schema's complaints when a real response does not match its form exactly. */
export function assertMatches(schema: TSchema, value: unknown, what: string) {
  const errors = [...Value.Errors(schema, value)].map((e) => `${e.instancePath || '/'} ${e.message}`);
  assert.deepEqual(errors, [], `${what}: ${errors.join('; ')}`);
}

/** Every item of a non-empty list response matches the schema. */
export function assertEach(schema: TSchema, res: { status: number; body: unknown }, what: string) {
  assert.ok(res.status >= 200 && res.status < 300, `${what}: status ${res.status} ${JSON.stringify(res.body)}`);
  assert.ok(Array.isArray(res.body), `${what}: not a list`);
  assert.ok((res.body as unknown[]).length > 0, `${what}: empty list (nothing was checked)`);
  for (const [i, item] of (res.body as unknown[]).entries()) assertMatches(schema, item, `${what} [${i}]`);
}

/** A successful single response matches the schema. */
export function assertOne(schema: TSchema, res: { status: number; body: unknown }, what: string) {
  assert.ok(res.status >= 200 && res.status < 300, `${what}: status ${res.status} ${JSON.stringify(res.body)}`);
  assertMatches(schema, res.body, what);
}
