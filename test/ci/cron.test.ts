import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkCron, nextRunAfter, parseCron, RAILS_ZONE_NAMES, resolveTimeZone } from '../../src/ci/cron.js';

/** The next `n` runs after `from` (ISO strings). */
function runs(cron: string, zone: string, from: string, n: number): string[] {
  const c = parseCron(cron);
  assert.ok(c, `${cron} parses`);
  const z = resolveTimeZone(zone);
  assert.ok(z, `${zone} is a zone`);
  const out: string[] = [];
  let t = new Date(from);
  for (let i = 0; i < n; i++) {
    const next = nextRunAfter(c, z, t);
    assert.ok(next, `${cron} runs again after ${t.toISOString()}`);
    out.push(next.toISOString().replace(':00.000Z', 'Z'));
    t = next;
  }
  return out;
}

describe('cron expressions of pipeline schedules (src/ci/cron.ts)', () => {
  it('reads fields: values, ranges, steps, lists, names, 7 as Sunday', () => {
    assert.deepEqual(parseCron('*/15 9-17/4 * * *')?.minutes, [0, 15, 30, 45]);
    assert.deepEqual(parseCron('*/15 9-17/4 * * *')?.hours, [9, 13, 17]);
    assert.deepEqual(parseCron('5,10-12 0 * * *')?.minutes, [5, 10, 11, 12]);
    assert.deepEqual(parseCron('30/10 0 * * *')?.minutes, [30, 40, 50]);
    assert.deepEqual([...parseCron('0 0 * jan,Mar-MAY *')!.months], [1, 3, 4, 5]);
    assert.deepEqual([...parseCron('0 0 * * 7')!.weekdays], [0]);
    assert.deepEqual([...parseCron('0 0 * * FRI-MON')!.weekdays].sort(), [0, 1, 5, 6]);
    assert.deepEqual(parseCron('0 22-1 * * *')?.hours, [0, 1, 22, 23]);
    assert.equal(parseCron('  0  0  *  *  *  ')?.minutes.length, 1);
    for (const bad of ['', '* * * *', '* * * * * *', '60 * * * *', '* 24 * * *', '* * 0 * *', '* * 32 * *', '* * * 0 *', '* * * 13 *', '* * * * 8',
      '*/0 * * * *', '*/61 * * * *', '1-2-3 * * * *', 'a * * * *', '* * * FOO *', '* * * * MON#6', '* * * * #1', '1,,2 * * * *', '@reboot', '-1 * * * *']) {
      assert.equal(parseCron(bad), null, `"${bad}" is refused`);
    }
  });

  it('runs on the days cron says: either day field when both are set, L, the n-th weekday, nicknames', () => {
    // 2026-01-01 is a Thursday.
    assert.deepEqual(runs('0 0 1,15 * MON', 'UTC', '2026-01-01T00:00:00Z', 4), ['2026-01-05T00:00Z', '2026-01-12T00:00Z', '2026-01-15T00:00Z', '2026-01-19T00:00Z']);
    assert.deepEqual(runs('0 0 * * MON', 'UTC', '2026-01-01T00:00:00Z', 2), ['2026-01-05T00:00Z', '2026-01-12T00:00Z']);
    assert.deepEqual(runs('0 0 L * *', 'UTC', '2026-01-01T00:00:00Z', 3), ['2026-01-31T00:00Z', '2026-02-28T00:00Z', '2026-03-31T00:00Z']);
    assert.deepEqual(runs('0 9 * * TUE#2', 'UTC', '2026-01-01T00:00:00Z', 2), ['2026-01-13T09:00Z', '2026-02-10T09:00Z']);
    assert.deepEqual(runs('0 9 * * FRI#L', 'UTC', '2026-01-01T00:00:00Z', 2), ['2026-01-30T09:00Z', '2026-02-27T09:00Z']);
    assert.deepEqual(runs('0 0 29 2 *', 'UTC', '2026-01-01T00:00:00Z', 2), ['2028-02-29T00:00Z', '2032-02-29T00:00Z']);
    assert.deepEqual(runs('@hourly', 'UTC', '2026-01-01T00:30:00Z', 1), ['2026-01-01T01:00Z']);
    assert.deepEqual(runs('@monthly', 'UTC', '2026-01-01T00:00:00Z', 1), ['2026-02-01T00:00Z']);
    assert.deepEqual(runs('@yearly', 'UTC', '2026-01-01T00:00:00Z', 1), ['2027-01-01T00:00Z']);
    // Strictly after: a run at the very time given is the one after it.
    assert.deepEqual(runs('*/5 * * * *', 'UTC', '2026-01-01T00:05:00Z', 1), ['2026-01-01T00:10Z']);
    assert.deepEqual(runs('*/5 * * * *', 'UTC', '2026-01-01T00:05:59.999Z', 1), ['2026-01-01T00:10Z']);
  });

  it('reads times in the zone, through daylight saving changes', () => {
    // Half-hour and 45-minute offsets.
    assert.deepEqual(runs('0 9 * * *', 'Asia/Kolkata', '2026-01-01T00:00:00Z', 1), ['2026-01-01T03:30Z']);
    assert.deepEqual(runs('0 9 * * *', 'Pacific/Chatham', '2026-07-01T00:00:00Z', 1), ['2026-07-01T20:15Z']);
    // New York springs forward at 02:00 on 2026-03-08: 02:30 that night runs at 03:30 EDT.
    assert.deepEqual(runs('30 2 * * *', 'America/New_York', '2026-03-07T12:00:00Z', 3), ['2026-03-08T07:30Z', '2026-03-09T06:30Z', '2026-03-10T06:30Z']);
    // Every half hour across the gap: no run is lost but the skipped ones, none repeated.
    assert.deepEqual(runs('*/30 * * * *', 'America/New_York', '2026-03-08T06:00:00Z', 3), ['2026-03-08T06:30Z', '2026-03-08T07:00Z', '2026-03-08T07:30Z']);
    // It falls back at 02:00 on 2026-11-01: 01:30 happens twice and runs once.
    assert.deepEqual(runs('30 1 * * *', 'America/New_York', '2026-10-31T12:00:00Z', 2), ['2026-11-01T05:30Z', '2026-11-02T06:30Z']);
    assert.deepEqual(runs('*/30 1 * * *', 'America/New_York', '2026-11-01T04:00:00Z', 3), ['2026-11-01T05:00Z', '2026-11-01T05:30Z', '2026-11-02T06:00Z']);
    // The southern hemisphere: Sydney springs forward on 2026-10-04 (02:00 -> 03:00).
    assert.deepEqual(runs('30 2 * * *', 'Australia/Sydney', '2026-10-03T00:00:00Z', 2), ['2026-10-03T16:30Z', '2026-10-04T15:30Z']);
    // Rails' names stand for their IANA zones.
    assert.deepEqual(runs('0 8 * * *', 'Pacific Time (US & Canada)', '2026-01-01T00:00:00Z', 1), ['2026-01-01T16:00Z']);
  });

  it('knows zones as GitLab does: IANA and Rails names, exactly spelt', () => {
    assert.deepEqual(RAILS_ZONE_NAMES.filter((n) => !resolveTimeZone(n)), [], 'every Rails name is a zone here');
    for (const good of ['UTC', 'Etc/UTC', 'Europe/Paris', 'America/Argentina/Buenos_Aires', 'Etc/GMT+5', 'US/Eastern', 'Tokyo', 'Mumbai']) assert.ok(resolveTimeZone(good), good);
    for (const bad of ['', 'utc ', 'europe/paris', 'Mars/Olympus', '+01:00', 'UTC+1', '../etc/passwd', 'Europe/Paris/', 'x'.repeat(200)]) assert.equal(resolveTimeZone(bad), null, bad);
  });

  it('checks a schedule: which field is invalid, and a date that never comes', () => {
    assert.deepEqual(checkCron('0 0 30 2 *', 'UTC'), { ok: false, field: 'cron' });
    assert.deepEqual(checkCron('0 0 * * *', 'Nowhere/City'), { ok: false, field: 'cron_timezone' });
    assert.equal(checkCron('0 0 * * *', 'UTC').ok, true);
  });
});
