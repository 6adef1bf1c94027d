// Loaded with --import into every test process when TEST_TIMINGS_DIR is set (scripts/test.mjs):
// on exit it writes the file's wall time and CPU time (its own and that of the child processes
// it waited for: git, runners, servers) to TEST_TIMINGS_DIR/<pid>.json for scripts/test-timings.mjs.
import fs from 'node:fs';
import path from 'node:path';

const dir = process.env.TEST_TIMINGS_DIR;
const file = process.argv[1];
if (dir && file && /\.test\.[cm]?[jt]s$/.test(file)) {
  const started = performance.timeOrigin;
  process.on('exit', () => {
    let children = { user: 0, system: 0 };
    try {
      // Fields 16 and 17 of /proc/self/stat: CPU time of waited-for children, in clock ticks (100 Hz).
      const stat = fs.readFileSync('/proc/self/stat', 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      children = { user: Number(f[13]) * 10, system: Number(f[14]) * 10 };
    } catch {}
    const own = process.resourceUsage();
    const record = {
      // A compiled test (scripts/test-build.mjs) is named by its source file.
      file: path.relative(process.cwd(), file).replace(/^\.cache\/test-build\/\d+\//, '').replace(/\.mjs$/, '.ts'),
      wall_ms: Math.round(Date.now() - started),
      cpu_ms: Math.round((own.userCPUTime + own.systemCPUTime) / 1000),
      children_cpu_ms: children.user + children.system,
      max_rss_mb: Math.round(own.maxRSS / 1024),
    };
    try {
      fs.writeFileSync(path.join(dir, `${process.pid}.json`), JSON.stringify(record) + '\n');
    } catch {}
  });
}
