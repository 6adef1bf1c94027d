import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { drainJobs, enqueue } from '../../src/jobs/queue.js';
import { ISSUE_DUE_JOB } from '../../src/services/notifications.js';
import { NOTIFY_JOB } from '../../src/services/notify.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, runJob } from '../helpers/ci.js';

/** A local SMTP sink: every message it receives, parsed. */
async function startSink() {
  const mails: ParsedMail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      simpleParser(stream).then((m) => {
        mails.push(m);
        callback();
      }, callback);
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = ((server as any).server.address() as AddressInfo).port;
  return { mails, url: `smtp://127.0.0.1:${port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const recipientsOf = (mails: ParsedMail[]) => mails.map((m) => (Array.isArray(m.to) ? m.to : [m.to!]).flatMap((a) => a.value.map((v) => v.address!.toLowerCase()))).flat().sort();

describe('notification e-mail', () => {
  let sink: Awaited<ReturnType<typeof startSink>>;
  let t: TestContext;
  let group: Namespace, project: Project;
  let author: TestUser, assignee: TestUser, watcher: TestUser, globalWatcher: TestUser, customNew: TestUser, customOther: TestUser;
  let groupDisabled: TestUser, mentionOnly: TestUser, bystander: TestUser, blocked: TestUser, outsider: TestUser;
  const api = (rest: string) => `/api/v4/projects/${project.id}${rest}`;
  const emailOf = (u: TestUser) => u.user.email.toLowerCase();

  /** Runs the queue (notify, then deliver jobs) and answers the mails received meanwhile, by recipient. */
  async function delivered(): Promise<ParsedMail[]> {
    const start = sink.mails.length;
    await drainJobs(t.app.cairn);
    return sink.mails.slice(start);
  }

  before(async () => {
    sink = await startSink();
    // Developers push to and merge into main here: no default branch protection.
    t = await createTestContext({ smtpUrl: sink.url, mailFrom: 'Cairn <cairn@cairn.test>', defaultBranchProtection: 0 });
    group = await t.createGroup({ visibility: 0 });
    project = await t.createProject({ group, name: 'Rocket' });
    const users = await Promise.all(Array.from({ length: 11 }, () => t.createUser()));
    [author, assignee, watcher, globalWatcher, customNew, customOther, groupDisabled, mentionOnly, bystander, blocked, outsider] = users;
    for (const u of users.slice(0, 10)) await t.addMember(project, u.user, 30);
    await t.put(api('/notification_settings'), { level: 'watch' }, { token: watcher.token });
    await t.put('/api/v4/notification_settings', { level: 'watch' }, { token: globalWatcher.token });
    await t.put('/api/v4/notification_settings', { level: 'custom', new_issue: true }, { token: customNew.token });
    await t.put(api('/notification_settings'), { level: 'custom', close_issue: false, new_note: true }, { token: customOther.token });
    // Watch globally, disabled on the group: the group wins (project level global inherits from it).
    await t.put('/api/v4/notification_settings', { level: 'watch' }, { token: groupDisabled.token });
    await t.put(`/api/v4/groups/${group.id}/notification_settings`, { level: 'disabled' }, { token: groupDisabled.token });
    await t.put('/api/v4/notification_settings', { level: 'mention' }, { token: mentionOnly.token });
    await t.put(api('/notification_settings'), { level: 'watch' }, { token: blocked.token });
    await t.db.updateTable('users').set({ state: 'blocked' }).where('id', '=', blocked.user.id).execute();
    await drainJobs(t.app.cairn);
  });
  after(async () => {
    await t?.close();
    await sink?.close();
  });
  beforeEach(async () => {
    await drainJobs(t.app.cairn);
  });

  it('new issue: participants, watchers (project and global), custom with new_issue, mentions; not the author, disabled, blocked or uninvolved', async () => {
    const res = await t.post(api('/issues'), {
      title: 'Engines do not start',
      description: `Please look, @${mentionOnly.user.username} and @${bystander.user.username}`,
      assignee_ids: [assignee.user.id],
    }, { token: author.token });
    assert.equal(res.status, 201);
    const mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [assignee, watcher, globalWatcher, customNew, mentionOnly, bystander].map(emailOf).sort());
    const m = mails[0];
    assert.equal(m.subject, 'Rocket | Engines do not start (#1)');
    assert.equal(m.messageId, `<issue_${res.body.id}@${new URL(t.config.externalUrl).host}>`);
    assert.equal(m.inReplyTo, undefined);
    assert.match(m.from!.text, /cairn@cairn\.test/);
    assert.ok(m.text!.includes(res.body.web_url), 'the body links to web_url');
    assert.ok(m.text!.includes('Engines do not start'));
    assert.match(String(m.html), /<a href="[^"]+\/-\/issues\/1">/);
    assert.equal(m.headers.get('x-cairn-notificationreason'), 'new_issue');
  });

  it('close, reopen and comments thread under the issue; levels decide who hears of them', async () => {
    const issue = (await t.post(api('/issues'), { title: 'Fuel leak', assignee_ids: [assignee.user.id] }, { token: author.token })).body;
    await delivered();
    assert.equal((await t.put(api(`/issues/${issue.iid}`), { state_event: 'close' }, { token: assignee.token })).status, 200);
    let mails = await delivered();
    // The closer does not hear of it; the author (participant) and watchers do; mention-level and custom without close_issue do not.
    assert.deepEqual(recipientsOf(mails), [author, watcher, globalWatcher].map(emailOf).sort());
    const root = `<issue_${issue.id}@${new URL(t.config.externalUrl).host}>`;
    assert.equal(mails[0].subject, 'Re: Rocket | Fuel leak (#2)');
    assert.equal(mails[0].inReplyTo, root);
    assert.match(mails[0].text!, /was closed by/);

    await t.put(api(`/issues/${issue.iid}`), { state_event: 'reopen' }, { token: author.token });
    mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [assignee, watcher, globalWatcher].map(emailOf).sort());

    // A comment: participants, watchers, custom with new_note (customOther), the user it mentions even at mention level.
    const note = await t.post(api(`/issues/${issue.iid}/notes`), { body: `Looking into it @${mentionOnly.user.username}` }, { token: assignee.token });
    assert.equal(note.status, 201);
    mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [author, watcher, globalWatcher, customOther, mentionOnly].map(emailOf).sort());
    assert.equal(mails[0].messageId, `<note_${note.body.id}@${new URL(t.config.externalUrl).host}>`);
    assert.equal(mails[0].inReplyTo, root);
    assert.deepEqual(mails[0].references, root);
    assert.ok(mails[0].text!.includes('Looking into it'));
    assert.ok(mails[0].text!.includes(`#note_${note.body.id}`));

    // Once they have commented, the mention-level user is a participant, which their level ignores.
    await t.put(api(`/issues/${issue.iid}`), { state_event: 'close' }, { token: author.token });
    mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [assignee, watcher, globalWatcher].map(emailOf).sort());
  });

  it('unsubscribing silences a participant; subscribing makes an uninvolved member hear (even when disabled)', async () => {
    const issue = (await t.post(api('/issues'), { title: 'Wobbly fins', assignee_ids: [assignee.user.id] }, { token: author.token })).body;
    await delivered();
    assert.equal((await t.post(api(`/issues/${issue.iid}/unsubscribe`), {}, { token: assignee.token })).status, 201);
    assert.equal((await t.post(api(`/issues/${issue.iid}/subscribe`), {}, { token: groupDisabled.token })).status, 201);
    assert.equal((await t.post(api(`/issues/${issue.iid}/subscribe`), {}, { token: bystander.token })).status, 201);
    await t.post(api(`/issues/${issue.iid}/notes`), { body: 'Tightened the bolts' }, { token: author.token });
    const mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [watcher, globalWatcher, customOther, groupDisabled, bystander].map(emailOf).sort());
    // An unsubscribed user still hears of a mention of them.
    await t.post(api(`/issues/${issue.iid}/notes`), { body: `@${assignee.user.username} please check` }, { token: author.token });
    assert.ok(recipientsOf(await delivered()).includes(emailOf(assignee)));
  });

  it('reassignment reaches old and new assignees whatever their level', async () => {
    const issue = (await t.post(api('/issues'), { title: 'Who flies it', assignee_ids: [assignee.user.id] }, { token: author.token })).body;
    await delivered();
    await t.put(api(`/issues/${issue.iid}`), { assignee_ids: [mentionOnly.user.id] }, { token: author.token });
    const mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [assignee, mentionOnly, watcher, globalWatcher].map(emailOf).sort());
    assert.match(mails[0].text!, /Assignee changed from .* to /);
    // Setting the same assignees again is no reassignment.
    await t.put(api(`/issues/${issue.iid}`), { assignee_ids: [mentionOnly.user.id] }, { token: author.token });
    assert.equal((await delivered()).length, 0);
  });

  it('inheritance: project level over the group chain over global', async () => {
    const top = await t.createGroup({ visibility: 0 });
    const sub = await t.createGroup({ parent: top });
    const inner = await t.createProject({ group: sub, name: 'Probe' });
    const [u1, u2, u3, u4] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    for (const u of [u1, u2, u3, u4]) await t.addMember(top, u.user, 30);
    const group = top;
    await t.put(`/api/v4/groups/${group.id}/notification_settings`, { level: 'watch' }, { token: u1.token }); // top group watch, subgroup global → watch
    await t.put(`/api/v4/groups/${group.id}/notification_settings`, { level: 'watch' }, { token: u2.token });
    await t.put(`/api/v4/groups/${sub.id}/notification_settings`, { level: 'participating' }, { token: u2.token }); // nearest group wins
    await t.put(`/api/v4/groups/${sub.id}/notification_settings`, { level: 'disabled' }, { token: u3.token });
    await t.put(`/api/v4/projects/${inner.id}/notification_settings`, { level: 'watch' }, { token: u3.token }); // project wins
    await t.put('/api/v4/notification_settings', { level: 'watch' }, { token: u4.token });
    await t.put(`/api/v4/projects/${inner.id}/notification_settings`, { level: 'global' }, { token: u4.token }); // global all the way up → watch
    assert.equal((await t.post(`/api/v4/projects/${inner.id}/issues`, { title: 'Telemetry' })).status, 201);
    assert.deepEqual(recipientsOf(await delivered()), [u1, u3, u4].map(emailOf).sort());
  });

  it('a confidential issue is not mailed to whoever may not read it', async () => {
    const open = await t.createProject({ visibility: 20, name: 'Open' });
    const member = await t.createUser();
    await t.addMember(open, member.user, 20);
    await t.put(`/api/v4/projects/${open.id}/notification_settings`, { level: 'watch' }, { token: outsider.token });
    await t.put(`/api/v4/projects/${open.id}/notification_settings`, { level: 'watch' }, { token: member.token });
    await t.post(`/api/v4/projects/${open.id}/issues`, { title: 'Public matter' }, { token: author.token });
    assert.deepEqual(recipientsOf(await delivered()), [outsider, member].map(emailOf).sort());
    await t.post(`/api/v4/projects/${open.id}/issues`, { title: 'Secret matter', confidential: true }, { token: author.token });
    assert.deepEqual(recipientsOf(await delivered()), [emailOf(member)]);
    // Nor anything of a private project, whatever their setting says.
    await t.db.updateTable('projects').set({ visibility_level: 0 }).where('id', '=', open.id).execute();
    assert.equal((await t.post(`/api/v4/projects/${open.id}/issues`, { title: 'Now private' })).status, 201);
    assert.deepEqual(recipientsOf(await delivered()), [emailOf(member)]);
  });

  it('e-mail disabled on the project or its group: nothing', async () => {
    const quiet = await t.createProject({ group, name: 'Quiet' });
    await t.put(`/api/v4/projects/${quiet.id}`, { emails_enabled: false });
    await t.post(`/api/v4/projects/${quiet.id}/issues`, { title: 'Shh' }, { token: author.token });
    assert.equal((await delivered()).length, 0);
  });

  it('issue due tomorrow: its participants, once, from the daily job', async () => {
    const tomorrow = new Date(Date.now() + 24 * 3600 * 1000).toISOString().slice(0, 10);
    const issue = (await t.post(api('/issues'), { title: 'Launch window', due_date: tomorrow, assignee_ids: [assignee.user.id] }, { token: author.token })).body;
    await delivered();
    await enqueue(t.db, ISSUE_DUE_JOB);
    const mails = await delivered();
    const mine = mails.filter((m) => m.subject!.includes('Launch window'));
    // The author and the assignee (participants); watchers do not get due reminders.
    assert.deepEqual(recipientsOf(mine), [author, assignee].map(emailOf).sort());
    assert.equal(mine[0].subject, `Re: Rocket | Launch window (#${issue.iid})`);
    assert.match(mine[0].text!, new RegExp(`due on ${tomorrow}`));
    await enqueue(t.db, ISSUE_DUE_JOB);
    assert.equal((await delivered()).filter((m) => m.subject!.includes('Launch window')).length, 0);
  });

  it('a notify job run twice mails nobody twice', async () => {
    const issue = (await t.post(api('/issues'), { title: 'Twice', assignee_ids: [assignee.user.id] }, { token: author.token })).body;
    await delivered();
    const payload = { action: 'close_issue', target: { type: 'Issue', id: issue.id }, actorId: author.user.id, key: 'fixed-key-1' };
    await enqueue(t.db, NOTIFY_JOB, payload);
    const first = await delivered();
    assert.ok(first.length > 0);
    await enqueue(t.db, NOTIFY_JOB, payload);
    assert.equal((await delivered()).length, 0);
  });

  it('merge requests: new (reviewers), push, merge', async () => {
    await commitFiles(t, project, { 'README.md': 'rocket\n' }, { token: author.token });
    await commitFiles(t, project, { 'engine.txt': 'v1\n' }, { branch: 'feature', startBranch: 'main', token: author.token });
    await delivered();
    const mr = await t.post(api('/merge_requests'), {
      source_branch: 'feature', target_branch: 'main', title: 'New engine', reviewer_ids: [mentionOnly.user.id], assignee_ids: [assignee.user.id],
    }, { token: author.token });
    assert.equal(mr.status, 201, mr.text);
    let mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [assignee, mentionOnly, watcher, globalWatcher].map(emailOf).sort());
    assert.equal(mails[0].subject, 'Rocket | New engine (!1)');
    assert.equal(mails[0].messageId, `<merge_request_${mr.body.id}@${new URL(t.config.externalUrl).host}>`);

    await commitFiles(t, project, { 'engine.txt': 'v2\n' }, { branch: 'feature', message: 'Engine v2', token: author.token });
    mails = await delivered();
    // Pushes are for participants (watchers are spared them); the reviewer at mention level is not.
    assert.deepEqual(recipientsOf(mails), [emailOf(assignee)]);
    assert.match(mails[0].text!, /Engine v2/);

    const merged = await t.put(api(`/merge_requests/${mr.body.iid}/merge`), {}, { token: assignee.token });
    assert.equal(merged.status, 200, merged.text);
    mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [author, watcher, globalWatcher].map(emailOf).sort());
    assert.equal(mails[0].subject, 'Re: Rocket | New engine (!1)');
    assert.match(mails[0].text!, /was merged by/);
  });

  it('merge request closed and reopened, reassigned', async () => {
    await commitFiles(t, project, { 'nose.txt': 'cone\n' }, { branch: 'nose', startBranch: 'main', token: author.token });
    const mr = (await t.post(api('/merge_requests'), { source_branch: 'nose', target_branch: 'main', title: 'Nose cone' }, { token: author.token })).body;
    await delivered();
    await t.put(api(`/merge_requests/${mr.iid}`), { assignee_ids: [bystander.user.id] }, { token: author.token });
    assert.deepEqual(recipientsOf(await delivered()), [bystander, watcher, globalWatcher].map(emailOf).sort());
    await t.put(api(`/merge_requests/${mr.iid}`), { state_event: 'close' }, { token: bystander.token });
    assert.deepEqual(recipientsOf(await delivered()), [author, watcher, globalWatcher].map(emailOf).sort());
    await t.put(api(`/merge_requests/${mr.iid}`), { state_event: 'reopen' }, { token: author.token });
    assert.deepEqual(recipientsOf(await delivered()), [bystander, watcher, globalWatcher].map(emailOf).sort());
  });

  it('pipelines: failed, then fixed, to the pipeline user as their level allows', async () => {
    const ci = await t.createProject({ group, name: 'Launcher' });
    const dev = await t.createUser();
    await t.addMember(ci, dev.user, 30);
    await t.put(`/api/v4/projects/${ci.id}/notification_settings`, { level: 'watch' }, { token: watcher.token });
    await commitFiles(t, ci, { '.gitlab-ci.yml': 'test: { script: [t] }\n' }, { token: dev.token });
    await delivered();
    let p = await latestPipeline(t, ci.id);
    await runJob(t, (await jobsByName(t, p.id)).test, 'failed');
    let mails = await delivered();
    // Only the pipeline's user (participating by default), not the project's watchers.
    assert.deepEqual(recipientsOf(mails), [emailOf(dev)]);
    assert.equal(mails[0].subject, `Failed pipeline for main | Launcher | ${p.sha.slice(0, 8)}`);
    assert.match(mails[0].text!, /test/);
    assert.ok(mails[0].text!.includes(`/-/pipelines/${p.id}`));

    await commitFiles(t, ci, { 'a.txt': 'x\n' }, { token: dev.token });
    p = await latestPipeline(t, ci.id);
    await runJob(t, (await jobsByName(t, p.id)).test, 'success');
    mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [emailOf(dev)]);
    assert.match(mails[0].subject!, /^Fixed pipeline for main/);

    // Success after success: only for custom success_pipeline (participating and watch do not get it).
    await commitFiles(t, ci, { 'b.txt': 'x\n' }, { token: dev.token });
    p = await latestPipeline(t, ci.id);
    await runJob(t, (await jobsByName(t, p.id)).test, 'success');
    assert.equal((await delivered()).length, 0);
    await t.put(`/api/v4/projects/${ci.id}/notification_settings`, { level: 'custom', success_pipeline: true }, { token: dev.token });
    await commitFiles(t, ci, { 'c.txt': 'x\n' }, { token: dev.token });
    p = await latestPipeline(t, ci.id);
    await runJob(t, (await jobsByName(t, p.id)).test, 'success');
    mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [emailOf(dev)]);
    assert.match(mails[0].subject!, /^Successful pipeline for main/);
    // Disabled: not even failures.
    await t.put(`/api/v4/projects/${ci.id}/notification_settings`, { level: 'disabled' }, { token: dev.token });
    await commitFiles(t, ci, { 'd.txt': 'x\n' }, { token: dev.token });
    p = await latestPipeline(t, ci.id);
    await runJob(t, (await jobsByName(t, p.id)).test, 'failed');
    assert.equal((await delivered()).length, 0);
  });

  it('merge when pipeline succeeds: participants hear it was set, then that it merged', async () => {
    const ci = await t.createProject({ group, name: 'Auto' });
    const [dev, reviewer] = await Promise.all([t.createUser(), t.createUser()]);
    await t.addMember(ci, dev.user, 30);
    await t.addMember(ci, reviewer.user, 30);
    await commitFiles(t, ci, { '.gitlab-ci.yml': 'test: { script: [t] }\n' }, { token: dev.token });
    await commitFiles(t, ci, { 'x.txt': 'x\n' }, { branch: 'auto', startBranch: 'main', token: dev.token });
    const mr = (await t.post(`/api/v4/projects/${ci.id}/merge_requests`, { source_branch: 'auto', target_branch: 'main', title: 'Auto merge me', assignee_ids: [reviewer.user.id] }, { token: dev.token })).body;
    await delivered();
    const res = await t.put(`/api/v4/projects/${ci.id}/merge_requests/${mr.iid}/merge`, { merge_when_pipeline_succeeds: true }, { token: reviewer.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.merge_when_pipeline_succeeds, true);
    let mails = await delivered();
    // The author; not the one who set it; not the global watchers of other projects (they are not members here).
    assert.deepEqual(recipientsOf(mails), [emailOf(dev)]);
    assert.match(mails[0].text!, /scheduled to merge after the pipeline succeeds by/);
    assert.equal(mails[0].headers.get('x-cairn-notificationreason'), 'merge_when_pipeline_succeeds');
    const p = await latestPipeline(t, ci.id);
    await runJob(t, (await jobsByName(t, p.id)).test, 'success');
    mails = await delivered();
    const merged = mails.filter((m) => m.headers.get('x-cairn-notificationreason') === 'merge_merge_request');
    // Merged as the reviewer (who asked): the author hears of it.
    assert.deepEqual(recipientsOf(merged), [emailOf(dev)]);
  });

  it('new epic: the group watchers; notes on epics and commits', async () => {
    const g = await t.createGroup({ visibility: 0 });
    const [owner, gw, plain] = await Promise.all([t.createUser(), t.createUser(), t.createUser()]);
    await t.addMember(g, owner.user, 50);
    await t.addMember(g, gw.user, 20);
    await t.addMember(g, plain.user, 20);
    await t.put(`/api/v4/groups/${g.id}/notification_settings`, { level: 'watch' }, { token: gw.token });
    const epic = await t.post(`/api/v4/groups/${g.id}/epics`, { title: 'Mars' }, { token: owner.token });
    assert.equal(epic.status, 201, epic.text);
    let mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [emailOf(gw)]);
    assert.equal(mails[0].subject, `${g.name} | Mars (&${epic.body.iid})`);
    await t.post(`/api/v4/groups/${g.id}/epics/${epic.body.id}/notes`, { body: 'Plan it' }, { token: plain.token });
    assert.deepEqual(recipientsOf(await delivered()), [owner, gw].map(emailOf).sort());

    const sha = await commitFiles(t, project, { 'commit-note.txt': 'x\n' }, { token: author.token });
    await delivered();
    const c = await t.post(api(`/repository/commits/${sha}/comments`), { note: 'Nice commit' }, { token: assignee.token });
    assert.equal(c.status, 201, c.text);
    mails = await delivered();
    // The commit's author (matched by e-mail) takes part; watchers hear; the commenter does not.
    assert.ok(recipientsOf(mails).includes(emailOf(author)));
    assert.ok(recipientsOf(mails).includes(emailOf(watcher)));
    assert.ok(!recipientsOf(mails).includes(emailOf(assignee)));
    assert.match(mails[0].subject!, /^Re: Rocket \| change \([0-9a-f]{8}\)$/);
    assert.equal(mails[0].inReplyTo, `<commit_${sha}@${new URL(t.config.externalUrl).host}>`);
  });

  it('notes on a project snippet: its author and watchers, never who may not read it', async () => {
    const snippet = await t.post(api('/snippets'), { title: 'Launch script', visibility: 'private', files: [{ file_path: 'go.sh', content: 'echo go\n' }] }, { token: author.token });
    assert.equal(snippet.status, 201, snippet.text);
    await delivered();
    const note = await t.post(api(`/snippets/${snippet.body.id}/notes`), { body: `Looks right, @${outsider.user.username}` }, { token: assignee.token });
    assert.equal(note.status, 201, note.text);
    const mails = await delivered();
    const to = recipientsOf(mails);
    assert.ok(to.includes(emailOf(author)), 'the snippet author takes part');
    assert.ok(to.includes(emailOf(watcher)), 'a project watcher hears');
    assert.ok(!to.includes(emailOf(assignee)), 'not the commenter');
    assert.ok(!to.includes(emailOf(outsider)), 'a mentioned non-member cannot read the private project snippet');
    assert.equal(mails[0].subject, `Re: Rocket | Launch script ($${snippet.body.id})`);
    assert.equal(mails[0].inReplyTo, `<snippet_${snippet.body.id}@${new URL(t.config.externalUrl).host}>`);
  });

  it('moved project: its maintainers and owners', async () => {
    const from = await t.createGroup({ visibility: 0 });
    const to = await t.createGroup({ visibility: 0 });
    const [owner, maint, dev] = await Promise.all([t.createUser(), t.createUser(), t.createUser()]);
    await t.addMember(from, owner.user, 50);
    await t.addMember(to, owner.user, 50);
    const p = await t.createProject({ group: from, name: 'Mover' });
    await t.addMember(p, maint.user, 40);
    await t.addMember(p, dev.user, 30);
    const res = await t.put(`/api/v4/projects/${p.id}/transfer`, { namespace: to.id }, { token: owner.token });
    assert.equal(res.status, 200, res.text);
    const mails = await delivered();
    assert.deepEqual(recipientsOf(mails), [emailOf(maint)]);
    assert.equal(mails[0].subject, 'Mover | Project was moved');
    assert.ok(mails[0].text!.includes(`${from.full_path}/${p.path}`));
    assert.ok(mails[0].text!.includes(`${to.full_path}/${p.path}`));
  });
});

describe('notification e-mail without CAIRN_SMTP_URL', () => {
  let t: TestContext;
  before(async () => {
    t = await createTestContext();
  });
  after(async () => {
    await t?.close();
  });

  it('enqueues nothing', async () => {
    const project = await t.createProject();
    const u = await t.createUser();
    await t.addMember(project, u.user, 30);
    await t.put(`/api/v4/projects/${project.id}/notification_settings`, { level: 'watch' }, { token: u.token });
    await t.post(`/api/v4/projects/${project.id}/issues`, { title: 'Silent' });
    const jobs = await t.db.selectFrom('background_jobs').select('kind').where('kind', 'like', 'notify%').where('recurring', '=', false).execute();
    assert.deepEqual(jobs, []);
  });
});
