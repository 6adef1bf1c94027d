import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { tokenDigest } from '../../../src/lib/secrets.js';
import { insertPersonalAccessToken } from '../../../src/services/tokens.js';
import type { TestContext, TestUser } from '../../helpers/app.js';
import { runJob } from '../../helpers/ci.js';
import { makeNodeSshKey } from '../../helpers/ssh-keys.js';

/**
 * The fixture the fuzzer aims at: a public group with a subgroup, a public project with a real
 * history (branches, a tag, HTML and SVG files, a pipeline whose job ran), an issue with notes,
 * a discussion and an award, a merge request, labels, milestones, snippets, an epic, variables,
 * keys, a runner, an impersonation token and custom attributes. Every id and name is kept, so
 * generated requests can name things that exist (and reach the code past the 404s).
 */
export interface World {
  /** An administrator (not root: the fuzzer may delete or demote whomever it names). */
  admin: TestUser;
  /** A Developer of the group and the project. */
  member: TestUser;
  /** A user with no membership, the target of user routes. */
  other: TestUser;
  groupId: number;
  groupPath: string;
  subgroupId: number;
  projectId: number;
  projectPath: string;
  /** Valid raw values (not URL-encoded) for each path parameter name; `id` by the collection before it. */
  values: Record<string, (string | number)[]>;
  ids: Record<string, (string | number)[]>;
  /** The strings a valid body or query might carry (refs, paths, names). */
  strings: string[];
  /** Integers worth trying for any id-like field. */
  integers: number[];
}

let worldSeq = 0;

async function ok(res: { status: number; text: string }, what: string, statuses = [200, 201, 202, 204]) {
  assert.ok(statuses.includes(res.status), `fixture: ${what} answered ${res.status}: ${res.text.slice(0, 300)}`);
}

export async function buildWorld(t: TestContext): Promise<World> {
  const n = ++worldSeq;
  const tag = `${process.pid.toString(36)}w${n}`;
  const admin = await t.createUser({ username: `fzadmin${tag}`, admin: true, scopes: ['api', 'sudo', 'read_user', 'read_repository', 'write_repository'] });
  const member = await t.createUser({ username: `fzmember${tag}` });
  const other = await t.createUser({ username: `fzother${tag}` });
  const as = { token: admin.token };

  const g = await t.post('/api/v4/groups', { name: `Fuzz ${tag}`, path: `fuzz-${tag}`, visibility: 'public' }, as);
  await ok(g, 'group');
  const sg = await t.post('/api/v4/groups', { name: 'Sub', path: 'sub', parent_id: g.body.id, visibility: 'public' }, as);
  await ok(sg, 'subgroup');
  const p = await t.post('/api/v4/projects', { name: 'Target', path: 'target', namespace_id: g.body.id, visibility: 'public', initialize_with_readme: false }, as);
  await ok(p, 'project');
  const projectId: number = p.body.id;
  const P = `/api/v4/projects/${projectId}`;

  await ok(await t.post(`${P}/members`, { user_id: member.user.id, access_level: 30 }, as), 'project member');
  await ok(await t.post(`/api/v4/groups/${g.body.id}/members`, { user_id: member.user.id, access_level: 30 }, as), 'group member');

  const ci = 'build:\n  script: echo build\n  artifacts:\n    paths: [out.txt]\ntest:\n  script: echo test\n';
  // Through the commits API as the fixture's admin (root may be deleted or blocked by an earlier request).
  const commit = async (branch: string, message: string, actions: object[], start?: string) => {
    const res = await t.post(`${P}/repository/commits`, { branch, commit_message: message, actions, ...(start ? { start_branch: start } : {}) }, as);
    await ok(res, `commit on ${branch}`);
    return res.body.id as string;
  };
  const create = (file_path: string, content: string) => ({ action: 'create', file_path, content });
  const main1 = await commit('main', 'first', [
    create('README.md', '# Target\n\nHello.\n'),
    create('docs/guide.md', 'A guide.\n'),
    create('page.html', '<html><body><script>alert(1)</script></body></html>\n'),
    create('image.svg', '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><rect width="1" height="1"/></svg>\n'),
    create('data.xml', '<?xml version="1.0"?><root/>\n'),
    create('.gitlab-ci.yml', ci),
  ]);
  const feature = await commit('feature', 'feature work', [create('feature.txt', 'a feature\n'), { action: 'update', file_path: 'README.md', content: '# Target\n\nChanged.\n' }], 'main');
  await ok(await t.post(`${P}/repository/tags`, { tag_name: 'v1.0', ref: main1, message: 'release' }, as), 'tag');
  // main is protected from its first commit (default branch protection); the world asks anyway.
  const protectMain = await t.post(`${P}/protected_branches`, { name: 'main' }, as);
  await ok(protectMain, 'protected branch', [201, 409]);
  await ok(await t.post(`${P}/protected_environments`, { name: 'production', deploy_access_levels: [{ access_level: 40 }] }, as), 'protected environment');

  const label = await t.post(`${P}/labels`, { name: 'bug', color: '#ff0000' }, as);
  await ok(label, 'label');
  const glabel = await t.post(`/api/v4/groups/${g.body.id}/labels`, { name: 'group-label', color: '#00ff00' }, as);
  await ok(glabel, 'group label');
  const ms = await t.post(`${P}/milestones`, { title: 'v1' }, as);
  await ok(ms, 'milestone');
  const gms = await t.post(`/api/v4/groups/${g.body.id}/milestones`, { title: 'g1' }, as);
  await ok(gms, 'group milestone');

  const issue = await t.post(`${P}/issues`, { title: 'An issue', description: 'Body', labels: 'bug', milestone_id: ms.body.id, assignee_ids: [member.user.id] }, as);
  await ok(issue, 'issue');
  const I = `${P}/issues/${issue.body.iid}`;
  const note = await t.post(`${I}/notes`, { body: 'a note' }, as);
  await ok(note, 'issue note');
  const disc = await t.post(`${I}/discussions`, { body: 'a discussion' }, as);
  await ok(disc, 'issue discussion');
  const award = await t.post(`${I}/award_emoji`, { name: 'thumbsup' }, as);
  await ok(award, 'award');
  const noteAward = await t.post(`${I}/notes/${note.body.id}/award_emoji`, { name: 'tada' }, as);
  await ok(noteAward, 'note award');
  await t.put(I, { labels: 'bug,group-label' }, as);
  const labelEvents = await t.get(`${I}/resource_label_events`, as);

  const mr = await t.post(`${P}/merge_requests`, { source_branch: 'feature', target_branch: 'main', title: 'A change', labels: 'bug' }, as);
  await ok(mr, 'merge request');
  const M = `${P}/merge_requests/${mr.body.iid}`;
  const mrNote = await t.post(`${M}/notes`, { body: 'mr note' }, as);
  await ok(mrNote, 'mr note');
  const mrDisc = await t.post(`${M}/discussions`, { body: 'mr discussion' }, as);
  await ok(mrDisc, 'mr discussion');
  const commitNote = await t.post(`${P}/repository/commits/${main1}/comments`, { note: 'commit comment' }, as);
  const commitDisc = await t.post(`${P}/repository/commits/${main1}/discussions`, { body: 'commit discussion' }, as);

  const snippet = await t.post(`${P}/snippets`, { title: 'snip', visibility: 'public', files: [{ file_path: 'snip.html', content: '<b>x</b>' }] }, as);
  await ok(snippet, 'project snippet');
  const snippetNote = await t.post(`${P}/snippets/${snippet.body.id}/notes`, { body: 'snippet note' }, as);
  const psnippet = await t.post('/api/v4/snippets', { title: 'mine', visibility: 'public', files: [{ file_path: 'a.svg', content: '<svg/>' }] }, as);
  await ok(psnippet, 'personal snippet');

  const epic = await t.post(`/api/v4/groups/${g.body.id}/epics`, { title: 'An epic' }, as);
  const epicNote = epic.status === 201 ? await t.post(`/api/v4/groups/${g.body.id}/epics/${epic.body.iid}/notes`, { body: 'epic note' }, as) : null;

  await ok(await t.post(`${P}/variables`, { key: 'FUZZ_VAR', value: 'secret-value' }, as), 'variable');
  await ok(await t.post(`/api/v4/groups/${g.body.id}/variables`, { key: 'GROUP_VAR', value: 'v' }, as), 'group variable');
  const schedule = await t.post(`${P}/pipeline_schedules`, { description: 'fuzz', ref: 'main', cron: '0 1 * * *' }, as);
  await ok(schedule, 'pipeline schedule');
  await ok(await t.post(`${P}/pipeline_schedules/${schedule.body.id}/variables`, { key: 'FUZZ_VAR', value: 'v' }, as), 'schedule variable');
  const trigger = await t.post(`${P}/triggers`, { description: 'fuzz' }, as);
  await ok(trigger, 'trigger token');
  const deployKey = await t.post(`${P}/deploy_keys`, { title: 'deploy', key: makeNodeSshKey('ed25519', 0, `deploy-${tag}`).text }, as);
  const userKey = await t.post(`/api/v4/users/${member.user.id}/keys`, { title: 'key', key: makeNodeSshKey('ed25519', 0, `user-${tag}`).text }, as);
  const imp = await t.post(`/api/v4/users/${other.user.id}/impersonation_tokens`, { name: 'imp', scopes: ['api'] }, as);
  await t.put(`/api/v4/users/${other.user.id}/custom_attributes/fuzz_key`, { value: 'v' }, as);

  const runner = await t.db
    .insertInto('ci_runners')
    .values({ token_digest: tokenDigest(`fuzz-runner-${tag}`), runner_type: 'instance_type', tag_list: [], description: 'fuzz runner' })
    .returning('id')
    .executeTakeFirstOrThrow();
  const pipeline = await t.db.selectFrom('ci_pipelines').select('id').where('project_id', '=', projectId).orderBy('id').executeTakeFirst();
  const jobs = pipeline ? await t.db.selectFrom('ci_builds').select(['id', 'name', 'status']).where('pipeline_id', '=', pipeline.id).orderBy('id').execute() : [];
  const build = jobs.find((j) => j.name === 'build' && j.status === 'pending');
  if (build) await runJob(t, build.id, 'success', { trace: '<html><script>alert("trace")</script></html>\n' });

  const moves = await t.db.selectFrom('repository_storage_moves').select('id').limit(2).execute();

  const ids: Record<string, (string | number)[]> = {
    projects: [projectId, `fuzz-${tag}/target`],
    groups: [g.body.id, `fuzz-${tag}`, sg.body.id, `fuzz-${tag}/sub`],
    users: [member.user.id, other.user.id],
    snippets: [psnippet.body.id],
    runners: [runner.id],
    keys: [userKey.body?.id ?? 0],
    namespaces: [g.body.id, `fuzz-${tag}`],
    deploy_keys: [deployKey.body?.id ?? 0],
    personal_access_tokens: [],
    applications: [],
    jobs: jobs.map((j) => j.id),
    default: [projectId, g.body.id, member.user.id],
  };
  const values: Record<string, (string | number)[]> = {
    merge_request_iid: [mr.body.iid],
    issue_iid: [issue.body.iid],
    note_id: [note.body.id, mrNote.body.id, snippetNote.body?.id, epicNote?.body?.id, commitNote.body?.id].filter((x) => x !== undefined),
    discussion_id: [disc.body.id, mrDisc.body.id, commitDisc.body?.id].filter((x) => x !== undefined),
    award_id: [award.body.id, noteAward.body.id],
    label_id: [label.body.id, 'bug', glabel.body.id, 'group-label'],
    milestone_id: [ms.body.id, gms.body.id],
    snippet_id: [snippet.body.id],
    sha: [main1, feature, 'main', 'feature', 'v1.0', main1.slice(0, 8)],
    epic_id: [epic.body?.id ?? 1, epic.body?.iid ?? 1],
    epic_iid: [epic.body?.iid ?? 1],
    key_id: [deployKey.body?.id ?? 0, userKey.body?.id ?? 0],
    key: ['FUZZ_VAR', 'GROUP_VAR', 'fuzz_key'],
    file_path: ['README.md', 'docs/guide.md', 'page.html', 'image.svg', 'data.xml', 'snip.html', 'a.svg'],
    pipeline_id: pipeline ? [pipeline.id] : [],
    job_id: jobs.map((j) => j.id),
    name: ['main', 'production'],
    branch: ['feature', 'main'],
    tag_name: ['v1.0'],
    user_id: [member.user.id, other.user.id],
    impersonation_token_id: [imp.body?.id ?? 0],
    group_id: [sg.body.id, g.body.id],
    ref: ['main', main1],
    format: ['tar.gz', 'zip', 'tar', 'tar.bz2'],
    member_id: [member.user.id],
    provider: ['github', 'ldapmain'],
    project_id: [projectId],
    namespace: [`fuzz-${tag}`, `fuzz-${tag}/sub`],
    forked_from_id: [projectId],
    runner_id: [runner.id],
    error_id: [1],
    resource_label_event_id: Array.isArray(labelEvents.body) ? labelEvents.body.map((e: { id: number }) => e.id) : [],
    repository_storage_move_id: moves.map((m: any) => m.id),
    pipeline_schedule_id: [schedule.body.id],
    trigger_id: [trigger.body.id],
  };
  const strings = ['main', 'feature', 'v1.0', main1, feature, 'README.md', 'docs', 'docs/guide.md', 'page.html', 'bug', 'group-label',
    member.user.username, other.user.username, `fuzz-${tag}`, `fuzz-${tag}/target`, 'thumbsup', 'FUZZ_VAR', 'production', 'opened', 'closed'];
  const integers = [projectId, g.body.id, sg.body.id, member.user.id, other.user.id, issue.body.iid, mr.body.iid, label.body.id, ms.body.id, runner.id, ...jobs.map((j) => j.id)];
  return {
    admin, member, other,
    groupId: g.body.id, groupPath: `fuzz-${tag}`, subgroupId: sg.body.id,
    projectId, projectPath: `fuzz-${tag}/target`,
    values, ids, strings, integers,
  };
}

/**
 * Whether the fixture still stands as built: its users active (the admin still one), their tokens
 * live, the member still a Developer, the group and project present, public and not archived or
 * on their way out. Requests are random: any of these may have been undone by one.
 */
export async function worldIntact(t: TestContext, w: World): Promise<string | null> {
  const r = await sql<{ problem: string | null }>`
    select case
      when (select count(*) from users where id in (${w.admin.user.id}, ${w.member.user.id}) and state = 'active') < 2 then 'users'
      when not coalesce((select admin from users where id = ${w.admin.user.id}), false) then 'admin'
      when (select count(*) from personal_access_tokens where token_digest in (${tokenDigest(w.admin.token)}, ${tokenDigest(w.member.token)})
            and not revoked and (expires_at is null or expires_at > now())) < 2 then 'tokens'
      when not exists (select 1 from projects where id = ${w.projectId} and not archived and not pending_delete and visibility_level = 20) then 'project'
      when not exists (select 1 from namespaces where id = ${w.groupId} and visibility_level = 20) then 'group'
      when not exists (select 1 from members where source_type = 'Project' and source_id = ${w.projectId} and user_id = ${w.member.user.id} and access_level = 30) then 'membership'
      else null end as problem`.execute(t.db);
  return r.rows[0]?.problem ?? null;
}

/**
 * Puts the fixture back as built where that is cheap (new tokens, unblocked users, an unarchived
 * public project, the member re-added); false when only a rebuild will do (something deleted).
 */
export async function repairWorld(t: TestContext, w: World, problem: string): Promise<boolean> {
  const as = { token: w.admin.token };
  if (problem === 'tokens') {
    for (const who of [w.admin, w.member]) {
      const live = await t.db.selectFrom('personal_access_tokens').select('id')
        .where('token_digest', '=', tokenDigest(who.token)).where('revoked', '=', false)
        .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<string>`now()`)])).executeTakeFirst();
      if (!live) {
        const { token } = await insertPersonalAccessToken(t.db, { userId: who.user.id, name: 'fuzz', scopes: who === w.admin ? ['api', 'sudo'] : ['api'], expiresAt: null });
        who.token = token;
      }
    }
  } else if (problem === 'users') {
    const admin = await t.db.selectFrom('users').select('state').where('id', '=', w.admin.user.id).executeTakeFirst();
    if (admin?.state !== 'active') return false;
    const member = await t.db.selectFrom('users').select('state').where('id', '=', w.member.user.id).executeTakeFirst();
    if (!member) return false;
    const action = { blocked: 'unblock', banned: 'unban', deactivated: 'activate', ldap_blocked: 'unblock' }[member.state];
    if (!action) return false;
    await t.post(`/api/v4/users/${w.member.user.id}/${action}`, {}, as);
  } else if (problem === 'project') {
    const p = await t.db.selectFrom('projects').select(['archived', 'pending_delete', 'visibility_level']).where('id', '=', w.projectId).executeTakeFirst();
    if (!p || p.pending_delete) return false;
    if (p.archived) await t.post(`/api/v4/projects/${w.projectId}/unarchive`, {}, as);
    if (p.visibility_level !== 20) await t.put(`/api/v4/projects/${w.projectId}`, { visibility: 'public' }, as);
  } else if (problem === 'group') {
    const g = await t.db.selectFrom('namespaces').select('id').where('id', '=', w.groupId).executeTakeFirst();
    if (!g) return false;
    await t.put(`/api/v4/groups/${w.groupId}`, { visibility: 'public' }, as);
  } else if (problem === 'membership') {
    const exists = await t.db.selectFrom('members').select('id').where('source_type', '=', 'Project').where('source_id', '=', w.projectId).where('user_id', '=', w.member.user.id).executeTakeFirst();
    if (exists) await t.put(`/api/v4/projects/${w.projectId}/members/${w.member.user.id}`, { access_level: 30 }, as);
    else await t.post(`/api/v4/projects/${w.projectId}/members`, { user_id: w.member.user.id, access_level: 30 }, as);
  } else {
    return false;
  }
  return (await worldIntact(t, w)) === null;
}
