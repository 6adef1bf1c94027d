import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { buildApp, type App } from '../../src/app.js';
import type { Project } from '../../src/db/schema/core.js';
import { cleanLog, LogText } from '../../src/web/job_log.js';
import { openLogStreams } from '../../src/web/log_stream.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, ProtocolRunner } from '../helpers/ci.js';
import { ANONYMOUS, getPage, listen, webSignIn, type WebSession } from '../helpers/web.js';

interface SseEvent {
  event: string;
  data: string;
  id?: string;
}

/** A server-sent events client over a real HTTP connection: collects events, waits for some. */
function openStream(url: string, headers: Record<string, string>) {
  const events: SseEvent[] = [];
  const comments: string[] = [];
  let waiters: (() => void)[] = [];
  let ended = false;
  let buffer = '';
  const notify = () => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  let req: http.ClientRequest;
  const response = new Promise<http.IncomingMessage>((resolve, reject) => {
    req = http.get(url, { headers }, (res) => {
      resolve(res);
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        let i: number;
        while ((i = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          const ev: SseEvent = { event: 'message', data: '' };
          let isEvent = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('event: ')) (ev.event = line.slice(7)), (isEvent = true);
            else if (line.startsWith('data: ')) (ev.data = line.slice(6)), (isEvent = true);
            else if (line.startsWith('id: ')) ev.id = line.slice(4);
          }
          if (isEvent) events.push(ev);
        }
        notify();
      });
      res.on('end', () => {
        ended = true;
        notify();
      });
      res.on('error', () => {});
    });
    req.on('error', reject);
  });
  const stream = {
    events,
    comments,
    response,
    destroy: () => req.destroy(),
    get ended() {
      return ended;
    },
    /** The text of the append events so far. */
    text: () => events.filter((e) => e.event === 'append').map((e) => JSON.parse(e.data) as string).join(''),
    /** Waits until `ok()` holds (fails after a generous time instead of hanging). */
    async until(ok: () => boolean, what: string) {
      const deadline = Date.now() + 30_000;
      while (!ok()) {
        if (ended && !ok()) throw new Error(`stream ended before: ${what} (got ${JSON.stringify(events)})`);
        if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what} (got ${JSON.stringify(events)})`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 1000);
        });
      }
    },
  };
  return stream;
}

describe('web: the live log of a job (server-sent events)', () => {
  let t: TestContext;
  let other: App | null = null;
  let runnerApp: App;
  let server: string;
  let project: Project;
  let base: string;
  let reporter: TestUser;
  let reporterWeb: WebSession;
  let outsiderWeb: WebSession;

  before(async () => {
    t = await createTestContext({ runnerPollTimeout: 1 });
    // With PostgreSQL, the runner talks to a second Cairn on the same database: the stream must
    // follow the log through the store, not through anything in the process that serves it.
    if (t.databaseUrl) other = await buildApp({ config: t.config, prepare: false, logger: false });
    runnerApp = other ?? t.app;
    const owner = await t.createUser();
    reporter = await t.createUser();
    const outsider = await t.createUser();
    project = await t.createProject({ owner: owner.user });
    await t.addMember(project, reporter.user, 20);
    base = `/${owner.user.username}/${project.path}`;
    reporterWeb = await webSignIn(t, reporter);
    outsiderWeb = await webSignIn(t, outsider);
    server = await listen(t);
  });
  after(async () => {
    await other?.close();
    await t.close();
  });

  async function runningJob() {
    await commitFiles(t, project, { '.gitlab-ci.yml': `build:\n  script: [make]\n# ${Math.random()}\n` });
    const runner = await ProtocolRunner.register(t, runnerApp);
    const job = await runner.takeJob();
    assert.ok(job, 'the runner got the job');
    return { runner, job };
  }

  it('sends what the runner appends, in order, then the status and the end when the job finishes', async () => {
    const { runner, job } = await runningJob();
    await runner.append(job, '\x1b[0Ksection_start:1700000000:prepare\r\x1b[0K\x1b[36;1mRunning with gitlab-runner\x1b[0;m\n');

    // The page shows what is there and where the stream continues.
    const page = await getPage(t, reporterWeb, `${base}/-/jobs/${job.id}`);
    assert.equal(page.status, 200);
    const attr = /data-log-stream="([^"]+)"/.exec(page.text);
    assert.ok(attr, 'a running job\'s log streams');
    const streamPath = attr[1].replace(/&amp;/g, '&');
    assert.match(page.text, /<pre class="log"[^>]*>Running with gitlab-runner\n<\/pre>/);
    assert.match(page.text, /<span class="badge running" data-job-status>running<\/span>/);

    const s = openStream(server + streamPath, { cookie: reporterWeb.cookie, accept: 'text/event-stream' });
    const res = await s.response;
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/event-stream/);
    assert.equal(res.headers['cache-control'], 'no-cache');

    // Pieces split anywhere: in a UTF-8 character, in an escape sequence, in a section marker.
    const word = Buffer.from('Ünïcödé\n');
    const groups: [(string | Buffer)[], string][] = [
      [['$ make\n'], '$ make\n'],
      [[word.subarray(0, 1), word.subarray(1, 4), word.subarray(4)], 'Ünïcödé\n'],
      [['colour \x1b[3', '2mgreen\x1b[0m\n'], 'colour green\n'],
      [['\x1b[0Ksection_end:1700000001:pre', 'pare\r\x1b[0K', 'done\n'], 'done\n'],
    ];
    let expected = '';
    for (const [pieces, text] of groups) {
      for (const piece of pieces) {
        await runner.append(job, piece);
        // Give the stream a chance to see the unfinished piece (nothing of it may show yet).
        if (pieces.length > 1) await new Promise((r) => setTimeout(r, 700));
      }
      expected += text;
      await s.until(() => s.text() === expected, JSON.stringify(expected));
    }
    const ids = s.events.filter((e) => e.event === 'append').map((e) => Number(e.id));
    assert.deepEqual([...ids].sort((a, b) => a - b), ids, 'event ids (byte offsets) grow');
    assert.ok(!s.ended, 'the stream stays open while the job runs');

    await runner.finish(job, 'success');
    await s.until(() => s.events.some((e) => e.event === 'end'), 'the end event');
    const tail = s.events.slice(-2);
    assert.deepEqual(tail.map((e) => e.event), ['status', 'end']);
    assert.equal(JSON.parse(tail[0].data), 'success');
    await s.until(() => s.ended, 'the response to end');
    assert.equal(s.text(), expected);
    assert.ok(s.events.filter((e) => e.event === 'append').length >= 4, 'the text came as it was appended');

    // A browser that reconnects sends Last-Event-ID: the stream resumes there, without repeating.
    const middle = s.events.filter((e) => e.event === 'append')[1];
    const again = openStream(server + streamPath, { cookie: reporterWeb.cookie, 'last-event-id': middle.id! });
    await again.until(() => again.ended, 'the resumed stream to end');
    const before = s.events.filter((e) => e.event === 'append').slice(0, 2).map((e) => JSON.parse(e.data)).join('');
    assert.equal(before + again.text(), expected);
    assert.deepEqual(again.events.slice(-2).map((e) => e.event), ['status', 'end']);
  });

  it('gets each appended line and the end promptly, woken by the job\'s notification rather than a poll', async () => {
    const { runner, job } = await runningJob();
    const s = openStream(`${server}${base}/-/jobs/${job.id}/trace/stream?offset=0`, { cookie: reporterWeb.cookie });
    await s.response;
    await s.until(() => s.comments.some((c) => c.startsWith('following')), 'the stream follows');
    await new Promise((r) => setTimeout(r, 300)); // the stream has looked once and waits
    const latencies: number[] = [];
    let expected = '';
    for (let i = 0; i < 5; i++) {
      await runner.append(job, `line ${i}\n`);
      const appended = Date.now();
      expected += `line ${i}\n`;
      await s.until(() => s.text() === expected, JSON.stringify(expected));
      latencies.push(Date.now() - appended);
      await new Promise((r) => setTimeout(r, 100));
    }
    await runner.finish(job, 'success');
    const finished = Date.now();
    await s.until(() => s.ended, 'the end');
    latencies.push(Date.now() - finished);
    if (process.env.TEST_TIMINGS) console.log(`# live log latencies (ms): ${latencies.join(' ')}`);
    // The safety-net wait is 15 s: every one of these came from a notification.
    assert.ok(Math.max(...latencies) < 3_000, `latencies ${latencies.join(', ')} ms`);
  });

  it('ends at once for a finished job, after what the page had not shown', async () => {
    const { runner, job } = await runningJob();
    await runner.append(job, 'one\ntwo\n');
    await runner.finish(job, 'failed');
    const s = openStream(`${server}${base}/-/jobs/${job.id}/trace/stream?offset=4`, { cookie: reporterWeb.cookie });
    await s.until(() => s.ended, 'the end');
    assert.equal(s.text(), 'two\n');
    assert.deepEqual(s.events.map((e) => e.event), ['append', 'status', 'end']);
    assert.equal(JSON.parse(s.events[1].data), 'failed');
  });

  it('stops following when the client goes away, and the app closes with a stream open', async () => {
    const { runner, job } = await runningJob();
    const s = openStream(`${server}${base}/-/jobs/${job.id}/trace/stream?offset=0`, { cookie: reporterWeb.cookie });
    await s.response;
    await runner.append(job, 'hello\n');
    await s.until(() => s.text() === 'hello\n', 'the first text');
    assert.equal(openLogStreams(t.app.cairn), 1);
    s.destroy();
    const deadline = Date.now() + 30_000;
    while (openLogStreams(t.app.cairn) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(openLogStreams(t.app.cairn), 0, 'the server stopped following');
    // Another one stays open: closing the app (after this file) must not wait for it.
    const open = openStream(`${server}${base}/-/jobs/${job.id}/trace/stream?offset=0`, { cookie: reporterWeb.cookie });
    await open.until(() => open.text() === 'hello\n', 'the text on the second stream');
  });

  it('is read_build: 404 to outsiders, sign in for anonymous visitors', async () => {
    const job = await t.db.selectFrom('ci_builds').select('id').where('project_id', '=', project.id).orderBy('id').executeTakeFirstOrThrow();
    const url = `${base}/-/jobs/${job.id}/trace/stream`;
    assert.equal((await getPage(t, outsiderWeb, url)).status, 404);
    const anon = await getPage(t, ANONYMOUS, url);
    assert.equal(anon.status, 302);
    assert.equal((await getPage(t, reporterWeb, `${base}/-/jobs/999999/trace/stream`)).status, 404);
    const streams = openLogStreams(t.app.cairn);
    const head = await t.call('HEAD', url, { token: null, headers: { cookie: reporterWeb.cookie } });
    assert.equal(head.status, 200);
    assert.match(head.headers['content-type'], /^text\/event-stream/);
    assert.equal(openLogStreams(t.app.cairn), streams, 'a HEAD request follows nothing');
  });

  it('cleans text cut anywhere the same as whole (unit)', () => {
    const raw = Buffer.from(
      '\x1b[0Ksection_start:1:a[collapsed=true]\r\x1b[0K\x1b[1;32mok ✓\x1b[0m\r\nnext\x1b]8;;http://x\x07link\x1b]8;;\x07\n' +
        'fetch 10%\rfetch 100%\r\n\x1b]8;;http://y\x1b\\there\x1b]8;;\x1b\\\n\x1b[0Ksection_end:2:a\r\x1b[0Kend',
    );
    const whole = cleanLog(raw.toString('utf8'));
    assert.equal(whole, 'ok ✓\nnextlink\nfetch 10%\nfetch 100%\nthere\nend');
    for (let cut = 0; cut <= raw.length; cut++) {
      const log = new LogText();
      const text = log.push(raw.subarray(0, cut)) + log.push(raw.subarray(cut)) + log.flush();
      assert.equal(text, whole, `cut at ${cut}`);
      assert.equal(log.offset, raw.length);
    }
    // Every byte on its own.
    const log = new LogText();
    let text = '';
    for (let i = 0; i < raw.length; i++) text += log.push(raw.subarray(i, i + 1));
    assert.equal(text + log.flush(), whole);
  });
});
