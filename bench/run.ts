// `npm run bench`: the benchmarks in one run, on PostgreSQL when DATABASE_URL is set. The single
// project read against its floor (bench/api.ts), then Cairn against cgit, git http-backend and the
// list targets (bench/peers.ts, also `npm run bench:peers`). The older repository and clone
// benchmarks (bench/repository.ts, bench/clone.ts) measure what the peers benchmark covers, so
// they are left to run by hand: `node --import tsx bench/repository.ts`.
import { runApiBench } from './api.js';
import { printTable } from './lib.js';
import { printPeersResult, runPeersBench } from './peers.js';

console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}`);
console.log(`\n## API read (ratio = req/s over the floor serving the same bytes; ${Number(process.env.BENCH_SECONDS || 8)} s)`);
printTable(await runApiBench({ users: false }));
console.log('\n## Cairn against its peers (cgit, git http-backend) and the list targets');
const missed = printPeersResult(await runPeersBench());
if (missed && process.env.BENCH_STRICT === '1') process.exitCode = 1;
