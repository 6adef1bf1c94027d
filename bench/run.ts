// `npm run bench`: the benchmarks in one run, on PostgreSQL when DATABASE_URL is set. The single
// project read against its floor (bench/api.ts), then Cairn against cgit, git http-backend and the
// list targets (bench/peers.ts, also `npm run bench:peers`). The older repository and clone
// benchmarks (bench/repository.ts, bench/clone.ts) measure what the peers benchmark covers, so
// they are left to run by hand: `node --import tsx bench/repository.ts`. Last, on PostgreSQL, the
// merge request lists (bench/merge_requests.ts); `BENCH_ONLY=merge_requests npm run bench` runs them alone.
// Then CI (bench/ci.ts): job pickup latency with 1, 10 and 50 long-polling runners, and pipelines
// created per second on push; `BENCH_ONLY=ci npm run bench` runs it alone.
// Then artifacts (bench/artifacts.ts): one file out of a 100 MB artifact, throughput and the
// server's RSS during the download, on local disk and S3; `BENCH_ONLY=artifacts npm run bench`.
// First, memory (bench/memory.ts): `cairn serve`'s RSS idle after start and during a burst of
// requests; `BENCH_ONLY=memory npm run bench` runs it alone.
// Then the web pages (bench/pages.ts): render time of the project page, a 2,000-line file's page, a
// merge request's 50-file changes and a commit's 50-file diff, signed in; `BENCH_ONLY=pages`.
import { runApiBench } from './api.js';
import { CI_P99_TARGET_MS, printCiResult, runCiBench } from './ci.js';
import { printArtifactsResult, runArtifactsBench } from './artifacts.js';
import { printMemoryResult, runMemoryBench } from './memory.js';
import { PAGES_P99_TARGET_MS, printPagesResult, runPagesBench } from './pages.js';
import { printTable } from './lib.js';
import { MR_P99_TARGET_MS, runMergeRequestBench } from './merge_requests.js';
import { printPeersResult, runPeersBench } from './peers.js';

console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}`);
// BENCH_ONLY=merge_requests runs the merge request lists alone.
const mergeRequestsOnly = process.env.BENCH_ONLY === 'merge_requests';
// BENCH_ONLY=ci runs the CI benchmark alone.
const ciOnly = process.env.BENCH_ONLY === 'ci';
// BENCH_ONLY=artifacts runs the artifacts benchmark alone.
const artifactsOnly = process.env.BENCH_ONLY === 'artifacts';
// BENCH_ONLY=memory runs the memory benchmark alone.
const memoryOnly = process.env.BENCH_ONLY === 'memory';
// BENCH_ONLY=pages runs the web page benchmark alone.
const pagesOnly = process.env.BENCH_ONLY === 'pages';
let missed: boolean | number = false;
if (!mergeRequestsOnly && !ciOnly && !artifactsOnly && !pagesOnly) {
  console.log('\n## Memory: RSS of cairn serve idle after start, at its peak during a burst of requests, and after it');
  if (printMemoryResult(await runMemoryBench())) missed = true;
}
if (!mergeRequestsOnly && !ciOnly && !artifactsOnly && !memoryOnly && !pagesOnly) {
  console.log(`\n## API read (ratio = req/s over the floor serving the same bytes; ${Number(process.env.BENCH_SECONDS || 8)} s)`);
  printTable(await runApiBench({ users: false }));
  console.log('\n## Cairn against its peers (cgit, git http-backend) and the list targets');
  missed = printPeersResult(await runPeersBench());
}
if (!ciOnly && !artifactsOnly && !memoryOnly && !pagesOnly) {
  console.log(`\n## Merge request lists (PostgreSQL; ratio = ${MR_P99_TARGET_MS} ms over the p99, >= 1 meets the target; 4 connections)`);
  const mrRows = await runMergeRequestBench();
  printTable(mrRows);
  if (mrRows.some((r) => r.ratio !== undefined && !r.name.startsWith('floor') && !r.name.endsWith('no cache') && r.ratio < 1)) missed = true;
}
if (!mergeRequestsOnly && !artifactsOnly && !memoryOnly && !pagesOnly) {
  console.log(`\n## CI: job pickup latency (target p99 < ${CI_P99_TARGET_MS} ms) and pipelines per second on push`);
  if (printCiResult(await runCiBench())) missed = true;
}
if (!mergeRequestsOnly && !ciOnly && !memoryOnly && !pagesOnly) {
  console.log('\n## Artifacts: one file out of a 100 MB artifact (throughput; server RSS before and at its peak during the download)');
  printArtifactsResult(await runArtifactsBench());
}
if (!mergeRequestsOnly && !ciOnly && !artifactsOnly && !memoryOnly) {
  console.log(`\n## Web pages: render time, signed in (target p99 < ${PAGES_P99_TARGET_MS} ms one request at a time; then 4 connections)`);
  if (printPagesResult(await runPagesBench())) missed = true;
}
if (missed && process.env.BENCH_STRICT === '1') process.exitCode = 1;
