import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTestContext } from '../helpers/app.js';

describe('client address behind proxies', () => {
  for (const [name, proxies, expected] of [
    ['believes X-Forwarded-For from a configured proxy', ['127.0.0.1'], '203.0.113.9'],
    ['ignores X-Forwarded-For when no proxy is trusted', [], '127.0.0.1'],
  ] as const) {
    it(name, async () => {
      const t = await createTestContext({ trustedProxies: [...proxies] }, (app) => {
        app.get('/api/v4/__ip', { config: { skipApiAuth: true } }, async (req) => ({ ip: req.ip }));
      });
      try {
        const res = await t.get('/api/v4/__ip', { token: null, headers: { 'x-forwarded-for': '203.0.113.9' } });
        assert.equal(res.body.ip, expected);
      } finally {
        await t.close();
      }
    });
  }
});
