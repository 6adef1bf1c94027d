// `npm run bench`: the benchmarks in one run, on PostgreSQL when DATABASE_URL is set;
// `BENCH_ONLY=<name> npm run bench` runs one of them alone. In order:
// - memory (bench/memory.ts): `cairn serve`'s RSS idle after start and during a burst of requests.
// - api: the single project read against its floor (bench/api.ts), then Cairn against cgit,
//   git http-backend and the list targets (bench/peers.ts, also `npm run bench:peers`). The older
//   repository and clone benchmarks (bench/repository.ts, bench/clone.ts) measure what the peers
//   benchmark covers, so they are left to run by hand: `node --import tsx bench/repository.ts`.
// - merge_requests: the merge request lists (bench/merge_requests.ts).
// - ci (bench/ci.ts): job pickup latency with 1, 10 and 50 long-polling runners, pipelines
//   created per second on push, and a 200 MB cache's restore throughput beside a plain copy.
// - artifacts (bench/artifacts.ts): one file out of a 100 MB artifact, throughput and the
//   server's RSS during the download, on local disk and S3.
// - lfs (bench/lfs.ts): one 200 MB Git LFS object uploaded and downloaded through the batch API
//   beside a plain `cp` of the same file and a plain node:http server doing the same transfers.
// - pages (bench/pages.ts): render time of the project page, a 2,000-line file's page, a merge
//   request's 50-file changes and a commit's 50-file diff, signed in.
// - web_mr (bench/web_merge_request.ts): a merge request's changes tab with 50 files (10 with
//   threads), inline and side by side, and its overview, with 4 connections.
// The browsing pages over a 10,000-commit history (bench/web_browse.ts) and webhook delivery at
// 100 events/s (bench/webhooks.ts) run by hand.
import { runApiBench } from './api.js';
import { CI_P99_TARGET_MS, printCiResult, runCiBench } from './ci.js';
import { printArtifactsResult, runArtifactsBench } from './artifacts.js';
import { printLfsResult, runLfsBench } from './lfs.js';
import { printMemoryResult, runMemoryBench } from './memory.js';
import { PAGES_P99_TARGET_MS, printPagesResult, runPagesBench } from './pages.js';
import { printTable } from './lib.js';
import { MR_P99_TARGET_MS, runMergeRequestBench } from './merge_requests.js';
import { printPeersResult, runPeersBench } from './peers.js';
import { runWebMergeRequestBench, WEB_MR_P99_TARGET_MS } from './web_merge_request.js';

console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}`);
const only = process.env.BENCH_ONLY;
const SECTIONS = ['memory', 'api', 'merge_requests', 'ci', 'artifacts', 'lfs', 'pages', 'web_mr'];
// Any other BENCH_ONLY value selects rows of the peers benchmark (bench/peers.ts: raw,clone...).
const selected = (name: string) => !only || only === name || (name === 'api' && !SECTIONS.includes(only));
let missed: boolean | number = false;
if (selected('memory')) {
  console.log('\n## Memory: RSS of cairn serve idle after start, at its peak during a burst of requests, and after it');
  if (printMemoryResult(await runMemoryBench())) missed = true;
}
if (selected('api')) {
  console.log(`\n## API read (ratio = req/s over the floor serving the same bytes; ${Number(process.env.BENCH_SECONDS || 8)} s)`);
  printTable(await runApiBench({ users: false }));
  console.log('\n## Cairn against its peers (cgit, git http-backend) and the list targets');
  missed = printPeersResult(await runPeersBench());
}
if (selected('merge_requests')) {
  console.log(`\n## Merge request lists (PostgreSQL; ratio = ${MR_P99_TARGET_MS} ms over the p99, >= 1 meets the target; 4 connections)`);
  const mrRows = await runMergeRequestBench();
  printTable(mrRows);
  if (mrRows.some((r) => r.ratio !== undefined && !r.name.startsWith('floor') && !r.name.endsWith('no cache') && r.ratio < 1)) missed = true;
}
if (selected('ci')) {
  console.log(`\n## CI: job pickup latency (target p99 < ${CI_P99_TARGET_MS} ms) and pipelines per second on push`);
  if (printCiResult(await runCiBench())) missed = true;
}
if (selected('artifacts')) {
  console.log('\n## Artifacts: one file out of a 100 MB artifact (throughput; server RSS before and at its peak during the download)');
  printArtifactsResult(await runArtifactsBench());
}
if (selected('lfs')) {
  console.log('\n## Git LFS: one large object through the batch API (ratio = cp seconds over seconds; target >= 0.5 for the API transfers)');
  if (printLfsResult(await runLfsBench())) missed = true;
}
if (selected('pages')) {
  console.log(`\n## Web pages: render time, signed in (target p99 < ${PAGES_P99_TARGET_MS} ms one request at a time; then 4 connections)`);
  if (printPagesResult(await runPagesBench())) missed = true;
}
if (selected('web_mr')) {
  console.log(`\n## Web: a merge request's pages, changes of 50 files (ratio = ${WEB_MR_P99_TARGET_MS} ms over the p99, >= 1 meets the target; 4 connections)`);
  const webRows = await runWebMergeRequestBench();
  printTable(webRows);
  if (webRows.some((r) => r.ratio !== undefined && r.ratio < 1)) missed = true;
}
if (missed && process.env.BENCH_STRICT === '1') process.exitCode = 1;
