// Reports errors with the real @sentry/node SDK to the DSN in SENTRY_DSN, then exits. Run as a
// child process so the SDK's process-wide instrumentation stays out of the test process.
import * as Sentry from '@sentry/node';

const sent = [];
Sentry.init({
  dsn: process.env.SENTRY_DSN,
  environment: 'ci-test',
  release: 'cairn-test@1.0.0',
  tracesSampleRate: 0,
  beforeSend(event) {
    sent.push(event.event_id);
    return event;
  },
});

function failingOperation() {
  throw new TypeError('boom from the Sentry SDK');
}

try {
  failingOperation();
} catch (err) {
  Sentry.captureException(err);
}
// A second report of the same error, with a body beyond the SDK's gzip threshold (32 KiB).
try {
  failingOperation();
} catch (err) {
  Sentry.captureException(err, { extra: { blob: 'x'.repeat(40 * 1024) } });
}
const flushed = await Sentry.close(10000);
process.stdout.write(JSON.stringify({ flushed, sent }) + '\n');
