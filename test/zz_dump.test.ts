import { it } from 'node:test';
import fs from 'node:fs';
import { createTestContext } from './helpers/app.js';
import { can } from '../src/policies/abilities.js';
it('dump', async () => {
  const t = await createTestContext();
  const rows: any[] = [];
  t.app.addHook; 
  for (const r of t.app.routeTable) {
    if (r.method === 'HEAD') continue;
    rows.push({ method: r.method, url: r.url, access: r.access, site: (r as any).site });
  }
  fs.writeFileSync('/tmp/mx/sites.json', JSON.stringify(rows, null, 0));
  await t.close();
});
