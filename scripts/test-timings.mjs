// Summarises a timed test run: `TEST_TIMINGS_DIR=/tmp/t npm test`, then
// `node scripts/test-timings.mjs /tmp/t [top]`. Prints per-file wall and CPU time, slowest first,
// and the totals (CPU ÷ wall says how much the run waited on timers, I/O or the other pass).
import fs from 'node:fs';
import path from 'node:path';

const [dir, topArg] = process.argv.slice(2);
if (!dir || !fs.existsSync(dir)) {
  console.error('usage: node scripts/test-timings.mjs <TEST_TIMINGS_DIR> [how many files to list]');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const rows = fs.readdirSync(dir).filter((f) => f.endsWith('.json') && !f.startsWith('run'))
  .map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')))
  .sort((a, b) => b.wall_ms - a.wall_ms);
const s = (ms) => (ms / 1000).toFixed(1).padStart(7);
const sum = (k) => rows.reduce((n, r) => n + r[k], 0);
console.log(`${'wall s'.padStart(7)} ${'cpu s'.padStart(7)} ${'child s'.padStart(7)} ${'rss MB'.padStart(6)}  file`);
for (const r of rows.slice(0, top)) console.log(`${s(r.wall_ms)} ${s(r.cpu_ms)} ${s(r.children_cpu_ms)} ${String(r.max_rss_mb).padStart(6)}  ${r.file}`);
console.log(`${rows.length} files: wall ${s(sum('wall_ms'))} s summed, node CPU ${s(sum('cpu_ms'))} s, child CPU ${s(sum('children_cpu_ms'))} s`);
const run = path.join(dir, 'run.json');
if (fs.existsSync(run)) {
  const r = JSON.parse(fs.readFileSync(run, 'utf8'));
  console.log(`run: ${s(r.wall_ms)} s wall (template ${s(r.prepare_ms)} s), concurrency ${r.concurrency}, load average at end ${r.loadavg.join(' ')}`);
}
