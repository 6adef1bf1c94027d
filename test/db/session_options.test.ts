import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { withSessionOptions } from '../../src/db/index.js';

describe('withSessionOptions', () => {
  it("keeps Cairn's session settings when DATABASE_URL carries its own options", () => {
    assert.deepEqual(withSessionOptions('postgres://u@h:5432/d?options=-c%20search_path%3Dx&sslmode=disable', '-c TimeZone=UTC'), {
      connectionString: 'postgres://u@h:5432/d?sslmode=disable',
      options: '-c TimeZone=UTC -c search_path=x',
    });
    assert.deepEqual(withSessionOptions('postgres://u@h/d', '-c TimeZone=UTC'), { connectionString: 'postgres://u@h/d', options: '-c TimeZone=UTC' });
  });
});
