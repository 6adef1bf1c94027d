// Loaded with --import into every test process (scripts/test.mjs): a test file still running
// after TEST_FILE_TIMEOUT_MINUTES (15 by default; the slowest file takes about 8 on a loaded
// 2-core machine) says so and exits with code 1, so the runner records the file as failed instead
// of waiting for it forever: a test that never ends, or a handle that keeps the process alive.
const file = process.argv[1];
const minutes = Number(process.env.TEST_FILE_TIMEOUT_MINUTES ?? 15);
if (file && /\.test\.[cm]?[jt]s$/.test(file) && minutes > 0) {
  setTimeout(() => {
    process.stderr.write(`\n${file}: still running after TEST_FILE_TIMEOUT_MINUTES (${minutes}): stopped\n`);
    process.exit(1);
  }, minutes * 60_000).unref();
}
