// Reads while another client writes (issue #29): each read URL loaded alone, then again while a
// second client creates issues in one project the reads do not show (about BENCH_WRITES_PER_SECOND
// a second, one at a time). With invalidation by what changed (src/cache/read_tracking.ts) a
// write drops only the cached values that read what it changed, so reads of other projects and
// lists keep their cached pages; before it, every write dropped every page.
//
// Run: `node --import tsx bench/under_writes.ts` (PGlite) or with DATABASE_URL (PostgreSQL).
// Settings: BENCH_SECONDS (5) per row and phase, BENCH_CONNECTIONS (8), BENCH_PROJECTS (60),
// BENCH_WRITES_PER_SECOND (10); CAIRN_CACHE=false measures the server without its cache.
import { api, BENCH_TOKEN, load, startServer, type LoadResult } from './lib.js';

const SECONDS = Number(process.env.BENCH_SECONDS || 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS || 8);
const PROJECTS = Number(process.env.BENCH_PROJECTS || 60);
const WRITES_PER_SECOND = Number(process.env.BENCH_WRITES_PER_SECOND || 10);

interface Row {
  name: string;
  quiet: LoadResult;
  busy: LoadResult;
  writes: number;
}

async function main() {
  const server = await startServer();
  const headers = { 'private-token': BENCH_TOKEN };
  const rows: Row[] = [];
  try {
    const group = await api(server, 'POST', '/groups', { name: 'Writes', path: 'writes' });
    const projects: { id: number }[] = [];
    for (let i = 0; i < PROJECTS; i++) projects.push(await api(server, 'POST', '/projects', { name: `read-${i}`, namespace_id: group.id }));
    const shown = projects[0];
    for (let i = 0; i < 30; i++) await api(server, 'POST', `/projects/${shown.id}/issues`, { title: `issue ${i}` });
    const written = await api(server, 'POST', '/projects', { name: 'written' });
    const reads: [string, string][] = [
      ['GET /projects?per_page=20', '/projects?per_page=20'],
      ['GET /projects/:id', `/projects/${shown.id}`],
      ['GET /projects/:id/issues?per_page=20', `/projects/${shown.id}/issues?per_page=20`],
      ['GET /users?per_page=20', '/users?per_page=20'],
      ['GET /groups/:id/projects', `/groups/${group.id}/projects`],
    ];
    for (const [name, path] of reads) {
      const url = `${server.url}/api/v4${path}`;
      await load('warm-up', url, { headers, seconds: 1, connections: CONNECTIONS });
      const quiet = await load(name, url, { headers, seconds: SECONDS, connections: CONNECTIONS });
      let writing = true;
      let writes = 0;
      const writer = (async () => {
        while (writing) {
          const started = Date.now();
          await api(server, 'POST', `/projects/${written.id}/issues`, { title: `write ${writes}` });
          writes++;
          const wait = 1000 / WRITES_PER_SECOND - (Date.now() - started);
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
      })();
      const busy = await load(name, url, { headers, seconds: SECONDS, connections: CONNECTIONS });
      writing = false;
      await writer;
      rows.push({ name, quiet, busy, writes });
      console.log(`${name}: alone ${quiet.rps} req/s (p99 ${quiet.p99} ms); with ${(writes / SECONDS).toFixed(1)} writes/s ${busy.rps} req/s (p99 ${busy.p99} ms)`);
    }
  } finally {
    await server.stop();
  }
  const database = process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite';
  console.log(`\n${database}${process.env.CAIRN_CACHE === 'false' ? ', CAIRN_CACHE=false' : ''}; ${PROJECTS} projects; autocannon -c ${CONNECTIONS}, ${SECONDS} s per phase; writes: issues created in another project`);
  console.log('| read | alone req/s (p99 ms) | while writing req/s (p99 ms) | writes/s |');
  console.log('|---|---:|---:|---:|');
  for (const r of rows) console.log(`| ${r.name} | ${r.quiet.rps} (${r.quiet.p99}) | ${r.busy.rps} (${r.busy.p99}) | ${(r.writes / SECONDS).toFixed(1)} |`);
  const errors = rows.reduce((n, r) => n + r.quiet.errors + r.busy.errors, 0);
  if (errors) console.log(`errors under load: ${errors}`);
}

await main();
