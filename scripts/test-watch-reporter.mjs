// A second test reporter beside `spec` (scripts/test.mjs): it says which tests are running.
// The spec reporter prints a file's results only once the files before it are done, so a test
// that hangs hides the rest of the log. This reporter
//  - writes a line to stderr for each test (or suite) running longer than
//    TEST_SLOW_MINUTES (5 by default), and again each time as long again has passed;
//  - keeps TEST_PROGRESS_FILE (when set) up to date with the tests running now and since when,
//    so .ci/run can say what was running if it has to stop a pass at its deadline;
//  - writes the test files that failed to TEST_FAILED_FILE (when set), one a line, for
//    scripts/test.mjs to run once more.
import fs from 'node:fs';
import path from 'node:path';

const slowMs = Number(process.env.TEST_SLOW_MINUTES ?? 5) * 60_000;
const progressFile = process.env.TEST_PROGRESS_FILE || null;
const failedFile = process.env.TEST_FAILED_FILE || null;
// Compiled test files (scripts/test-build.mjs) are named by their sources.
const name = (file) => path.relative(process.cwd(), file ?? '?').replace(/^\.cache\/test-build\/\d+\//, '').replace(/\.mjs$/, '.ts');

export default async function* watch(source) {
  const running = new Map(); // "file\0nesting\0name" -> { file, name, since, warned }
  const failed = new Set();
  let dirty = false;
  const save = () => {
    if (!progressFile || !dirty) return;
    dirty = false;
    const now = Date.now();
    const lines = [...running.values()].sort((a, b) => a.since - b.since)
      .map((t) => `${Math.round((now - t.since) / 1000)} s  ${t.file} › ${t.name}`);
    try {
      fs.writeFileSync(progressFile, lines.join('\n') + '\n');
    } catch {}
  };
  const timer = setInterval(() => {
    save();
    const now = Date.now();
    for (const t of running.values()) {
      if (!t.whole && slowMs > 0 && now - t.since >= slowMs * (t.warned + 1)) {
        t.warned += 1;
        // Written at once, not yielded: when every test hangs, no event comes to yield it on.
        process.stderr.write(`still running after ${Math.round((now - t.since) / 60_000)} min: ${t.file} › ${t.name}\n`);
      }
    }
  }, 1000);
  timer.unref();
  try {
    for await (const event of source) {
      const d = event.data ?? {};
      const key = `${d.file}\0${d.nesting}\0${d.name}`;
      if (event.type === 'test:dequeue') {
        const whole = d.file === d.name; // the file itself: it runs as long as all its tests
        running.set(key, { file: name(d.file), name: whole ? '(the file)' : d.name, whole, since: Date.now(), warned: 0 });
        dirty = true;
      } else if (event.type === 'test:complete') {
        running.delete(key);
        dirty = true;
      }
      if (event.type === 'test:fail' && !d.todo && failedFile && d.file && !failed.has(d.file)) {
        failed.add(d.file);
        fs.appendFileSync(failedFile, d.file + '\n');
      }
    }
  } finally {
    clearInterval(timer);
    running.clear();
    dirty = true;
    save();
  }
}
