// `npm run bench`: every benchmark in one run, on PostgreSQL when DATABASE_URL is set.
import { runApiBench } from './api.js';
import { LIST_TARGET_RPS, runListBench } from './lists.js';
import { printTable } from './lib.js';
import { runRepositoryBench } from './repository.js';
import { printCloneResult, runCloneBench } from './clone.js';

console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}; ${Number(process.env.BENCH_SECONDS || 8)} s per endpoint`);
console.log('\n## API reads (ratio = req/s over the floor serving the same bytes)');
printTable(await runApiBench());
console.log(`\n## Lists (ratio = req/s over the target of ${LIST_TARGET_RPS}; >= 1.00 meets it)`);
printTable(await runListBench());
console.log('\n## Repository reads (target: tree and raw blob >= 2,000 req/s)');
printTable(await runRepositoryBench());
console.log('\n## git clone over HTTP (ratio = speed over `git clone --no-local`, target >= 0.80)');
printCloneResult(await runCloneBench());
