// Project and group access tokens (/projects/:id/access_tokens, /groups/:id/access_tokens): a bot
// user per token, a membership at the token's level, a personal access token of the bot.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { buildApp, type App } from '../../src/app.js';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles } from '../helpers/ci.js';

const TOKEN_KEYS = ['access_level', 'active', 'created_at', 'description', 'expires_at', 'id', 'last_used_at', 'name', 'revoked', 'scopes', 'user_id'];

function daysFromToday(days: number): string {
  const d = new Date();
  d.setUTCDate(d.getUTCDate() + days);
  return d.toISOString().slice(0, 10);
}

describe('project and group access tokens', () => {
  let t: TestContext;
  let other: App | undefined;
  let owner: TestUser;
  let maintainer: TestUser;
  let developer: TestUser;
  let outsider: TestUser;
  let group: Namespace;
  let project: Project;
  let P: string;
  let G: string;

  before(async () => {
    t = await createTestContext();
    // With PostgreSQL, a second Cairn on the same database: revocation must reach it at once.
    if (t.databaseUrl) other = await buildApp({ config: t.config, prepare: false, logger: false });
    owner = await t.createUser();
    maintainer = await t.createUser();
    developer = await t.createUser();
    outsider = await t.createUser();
    group = await t.createGroup({ owner: owner.user });
    await t.addMember(group, maintainer.user, 40);
    await t.addMember(group, developer.user, 30);
    project = await t.createProject({ group });
    await commitFiles(t, project, { 'README.md': '# hello\n' });
    P = `/api/v4/projects/${project.id}`;
    G = `/api/v4/groups/${group.id}`;
  });
  after(async () => {
    await other?.close();
    await t.close();
  });

  const create = (base: string, body: Record<string, unknown>, token = maintainer.token) => t.post(`${base}/access_tokens`, body, { token });

  it('creates a project access token with a bot user, in GitLab’s shape', async () => {
    const res = await create(P, { name: 'ci bot', scopes: ['api', 'read_repository'], description: 'for CI' });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(Object.keys(res.body).sort(), [...TOKEN_KEYS, 'token'].sort());
    assert.equal(res.body.name, 'ci bot');
    assert.equal(res.body.description, 'for CI');
    assert.deepEqual(res.body.scopes, ['api', 'read_repository']);
    assert.equal(res.body.access_level, 40, 'Maintainer by default');
    assert.equal(res.body.active, true);
    assert.equal(res.body.revoked, false);
    assert.equal(res.body.last_used_at, null);
    assert.equal(res.body.expires_at, daysFromToday(365), 'the longest lifetime by default');
    assert.match(res.body.token, /^glpat-/);

    // The bot: a project_bot user named after the project, with a no-reply address.
    const bot = await t.get(`/api/v4/users/${res.body.user_id}`);
    assert.equal(bot.status, 200);
    assert.match(bot.body.username, new RegExp(`^project_${project.id}_bot_[0-9a-f]{32}$`));
    assert.equal(bot.body.name, 'ci bot');
    assert.equal(bot.body.bot, true);
    assert.match(bot.body.email, new RegExp(`^${bot.body.username}@noreply\\.`));
    const row = await t.db.selectFrom('users').selectAll().where('id', '=', res.body.user_id).executeTakeFirstOrThrow();
    assert.equal(row.user_type, 'project_bot');
    assert.equal(row.encrypted_password, null);
    // Only the digest is stored.
    const stored = await t.db.selectFrom('personal_access_tokens').selectAll().where('id', '=', res.body.id).executeTakeFirstOrThrow();
    assert.notEqual(stored.token_digest, res.body.token);
    assert.ok(!JSON.stringify(stored).includes(res.body.token));

    // It acts as the bot.
    const me = await t.get('/api/v4/user', { token: res.body.token });
    assert.equal(me.status, 200);
    assert.equal(me.body.id, res.body.user_id);
    assert.equal(me.body.bot, true);
  });

  it('lists, shows and filters the tokens; the bot is a member', async () => {
    const a = await create(P, { name: 'lister', scopes: ['read_api'], access_level: 20, expires_at: daysFromToday(30) });
    assert.equal(a.status, 201, a.text);
    assert.equal(a.body.access_level, 20);
    assert.equal(a.body.expires_at, daysFromToday(30));

    const list = await t.get(`${P}/access_tokens`, { token: maintainer.token });
    assert.equal(list.status, 200);
    const mine = list.body.find((x: any) => x.id === a.body.id);
    assert.ok(mine);
    assert.deepEqual(Object.keys(mine).sort(), TOKEN_KEYS.sort(), 'no token in lists');
    assert.equal(mine.access_level, 20);

    const one = await t.get(`${P}/access_tokens/${a.body.id}`, { token: maintainer.token });
    assert.equal(one.status, 200);
    assert.deepEqual(one.body, mine);

    const members = await t.get(`${P}/members`, { token: developer.token });
    const bot = members.body.find((m: any) => m.id === a.body.user_id);
    assert.ok(bot, 'the bot is listed as a member');
    assert.equal(bot.access_level, 20);

    // Unknown, malformed, and other projects' token ids.
    const missing = await t.get(`${P}/access_tokens/999999`, { token: maintainer.token });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.message, '404 Could not find project access token with token_id: 999999 Not Found');
    assert.equal((await t.get(`${P}/access_tokens/abc`, { token: maintainer.token })).status, 404);
    const elsewhere = await t.createProject({ group });
    assert.equal((await t.get(`/api/v4/projects/${elsewhere.id}/access_tokens/${a.body.id}`, { token: maintainer.token })).status, 404);
    // A personal access token is not a project's access token.
    const pat = await t.db.selectFrom('personal_access_tokens').select('id').where('user_id', '=', maintainer.user.id).executeTakeFirstOrThrow();
    assert.equal((await t.get(`${P}/access_tokens/${pat.id}`, { token: maintainer.token })).status, 404);

    // state: active / inactive.
    assert.equal((await t.delete(`${P}/access_tokens/${a.body.id}`, { token: maintainer.token })).status, 204);
    const active = await t.get(`${P}/access_tokens`, { token: maintainer.token, query: { state: 'active' } });
    assert.ok(!active.body.some((x: any) => x.id === a.body.id));
    const inactive = await t.get(`${P}/access_tokens`, { token: maintainer.token, query: { state: 'inactive' } });
    const revoked = inactive.body.find((x: any) => x.id === a.body.id);
    assert.equal(revoked.revoked, true);
    assert.equal(revoked.active, false);
    assert.ok(inactive.body.every((x: any) => !x.active));
    assert.equal((await t.get(`${P}/access_tokens`, { token: maintainer.token, query: { state: 'bogus' } })).status, 400);
  });

  it('refuses outsiders, developers, and levels above the caller’s', async () => {
    assert.equal((await t.get(`${P}/access_tokens`, { token: outsider.token })).status, 404);
    assert.equal((await create(P, { name: 'x', scopes: ['api'] }, outsider.token)).status, 404);
    assert.equal((await t.get(`${P}/access_tokens`, { token: developer.token })).status, 403);
    assert.equal((await create(P, { name: 'x', scopes: ['api'] }, developer.token)).status, 403);
    assert.equal((await t.get(`${P}/access_tokens`, { token: null })).status, 401);

    const ownerLevel = await create(P, { name: 'x', scopes: ['api'], access_level: 50 });
    assert.equal(ownerLevel.status, 400);
    assert.equal(ownerLevel.body.message, '400 Bad request - Could not provision owner access to project access token');
    const byOwner = await create(P, { name: 'owner bot', scopes: ['api'], access_level: 50 }, owner.token);
    assert.equal(byOwner.status, 201, byOwner.text);
    assert.equal(byOwner.body.access_level, 50);

    // Bad input: GitLab's 400s.
    assert.deepEqual((await create(P, { name: 'x', scopes: ['sudo'] })).body, { error: 'scopes does not have a valid value' });
    assert.deepEqual((await create(P, { name: 'x', scopes: ['api'], access_level: 45 })).body, { error: 'access_level does not have a valid value' });
    assert.equal((await create(P, { scopes: ['api'] })).status, 400);
    const blank = await create(P, { name: ' ', scopes: ['api'] });
    assert.equal(blank.status, 400);
    assert.match(blank.body.message, /Name can't be blank/);
    const noScopes = await create(P, { name: 'x', scopes: [] });
    assert.equal(noScopes.status, 400);
    assert.match(noScopes.body.message, /Scopes can't be blank/);
    const tooLong = await create(P, { name: 'x', scopes: ['api'], expires_at: daysFromToday(400) });
    assert.equal(tooLong.status, 400);
    assert.match(tooLong.body.message, /Expires at must be before/);
    assert.equal((await create(P, { name: 'x', scopes: ['api'], expires_at: 'soon' })).status, 400);
  });

  it('a token acts at its access level and within its scopes', async () => {
    const reporter = await create(P, { name: 'reporter bot', scopes: ['api'], access_level: 20 });
    const readOnly = await create(P, { name: 'read bot', scopes: ['read_api'], access_level: 30 });
    const dev = await create(P, { name: 'dev bot', scopes: ['api'], access_level: 30 });
    for (const r of [reporter, readOnly, dev]) assert.equal(r.status, 201, r.text);

    // Reads at any level.
    assert.equal((await t.get(P, { token: reporter.body.token })).status, 200);
    assert.equal((await t.get(`${P}/repository/files/README.md/raw`, { token: readOnly.body.token, query: { ref: 'main' } })).status, 200);
    // read_api cannot write, whatever the level.
    const scoped = await t.post(`${P}/issues`, { title: 'from read bot' }, { token: readOnly.body.token });
    assert.equal(scoped.status, 403);
    assert.equal(scoped.body.error, 'insufficient_scope');
    // A reporter cannot commit; a developer can (to a new branch: main is protected).
    const file = { branch: 'bot-branch', start_branch: 'main', content: 'x\n', commit_message: 'bot commit' };
    assert.equal((await t.post(`${P}/repository/files/reporter.txt`, file, { token: reporter.body.token })).status, 403);
    assert.equal((await t.post(`${P}/repository/files/dev.txt`, file, { token: dev.body.token })).status, 201);
    // Nothing outside the project.
    const unrelated = await t.createProject({ visibility: 0 });
    assert.equal((await t.get(`/api/v4/projects/${unrelated.id}`, { token: dev.body.token })).status, 404);
    // The project token does not reach the rest of its group.
    const sibling = await t.createProject({ group });
    assert.equal((await t.get(`/api/v4/projects/${sibling.id}`, { token: dev.body.token })).status, 404);
  });

  it('revoking removes access at once, in every process', async () => {
    const made = await create(P, { name: 'revoke me', scopes: ['api'] });
    assert.equal(made.status, 201);
    const token = made.body.token;
    // Warm the token and project caches of both processes.
    assert.equal((await t.get(P, { token })).status, 200);
    if (other) assert.equal((await other.inject({ method: 'GET', url: P, headers: { 'private-token': token } })).statusCode, 200);

    const del = await t.delete(`${P}/access_tokens/${made.body.id}`, { token: maintainer.token });
    assert.equal(del.status, 204);
    assert.equal(del.text, '');
    assert.equal((await t.get(P, { token })).status, 401);
    if (other) assert.equal((await other.inject({ method: 'GET', url: P, headers: { 'private-token': token } })).statusCode, 401);

    // Revoked, not gone: listed as inactive, the bot still a member.
    const shown = await t.get(`${P}/access_tokens/${made.body.id}`, { token: maintainer.token });
    assert.equal(shown.body.revoked, true);
    assert.equal(shown.body.access_level, 40);
    assert.equal((await t.delete(`${P}/access_tokens/999999`, { token: maintainer.token })).status, 404);
    assert.equal((await t.delete(`${P}/access_tokens/${made.body.id}`, { token: developer.token })).status, 403);
  });

  it('rotating issues a new token and revokes the old one', async () => {
    const made = await create(P, { name: 'rotate me', scopes: ['api'], access_level: 30 });
    const old = made.body.token;
    assert.equal((await t.get(P, { token: old })).status, 200);
    if (other) assert.equal((await other.inject({ method: 'GET', url: P, headers: { 'private-token': old } })).statusCode, 200);

    const rotated = await t.post(`${P}/access_tokens/${made.body.id}/rotate`, {}, { token: maintainer.token });
    assert.equal(rotated.status, 200, rotated.text);
    assert.deepEqual(Object.keys(rotated.body).sort(), [...TOKEN_KEYS, 'token'].sort());
    assert.notEqual(rotated.body.id, made.body.id);
    assert.notEqual(rotated.body.token, old);
    assert.equal(rotated.body.user_id, made.body.user_id, 'the same bot');
    assert.equal(rotated.body.access_level, 30);
    assert.equal(rotated.body.name, 'rotate me');
    assert.equal(rotated.body.expires_at, daysFromToday(7), 'a week unless told');

    assert.equal((await t.get(P, { token: old })).status, 401);
    if (other) assert.equal((await other.inject({ method: 'GET', url: P, headers: { 'private-token': old } })).statusCode, 401);
    // Using the old token again revokes its successors too (token family), as for personal tokens;
    // so rotate a fresh one to check the new token works.
    const again = await create(P, { name: 'rotate me too', scopes: ['api'] });
    const next = await t.post(`${P}/access_tokens/${again.body.id}/rotate`, { expires_at: daysFromToday(10) }, { token: maintainer.token });
    assert.equal(next.status, 200);
    assert.equal(next.body.expires_at, daysFromToday(10));
    assert.equal((await t.get(P, { token: next.body.token })).status, 200);

    // Clients may send no body at all; python-gitlab sends expires_at null on create.
    const bare = await create(P, { name: 'bare', scopes: ['api'], expires_at: null });
    assert.equal(bare.body.expires_at, daysFromToday(365));
    const noBody = await t.call('POST', `${P}/access_tokens/${bare.body.id}/rotate`, { token: maintainer.token });
    assert.equal(noBody.status, 200, noBody.text);

    const twice = await t.post(`${P}/access_tokens/${again.body.id}/rotate`, {}, { token: maintainer.token });
    assert.equal(twice.status, 400);
    assert.equal(twice.body.message, '400 Bad request - Token already revoked');
    // GitLab tells only administrators that a token does not exist.
    assert.equal((await t.post(`${P}/access_tokens/999999/rotate`, {}, { token: maintainer.token })).status, 401);
    assert.equal((await t.post(`${P}/access_tokens/999999/rotate`, {})).status, 404);
    // A maintainer may not rotate an owner-level token.
    const ownerToken = await create(P, { name: 'owner level', scopes: ['api'], access_level: 50 }, owner.token);
    const refused = await t.post(`${P}/access_tokens/${ownerToken.body.id}/rotate`, {}, { token: maintainer.token });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.message, '400 Bad request - Not eligible to rotate token with access level higher than the user');
    assert.equal((await t.post(`${P}/access_tokens/${ownerToken.body.id}/rotate`, {}, { token: developer.token })).status, 403);
  });

  it('removing the bot’s membership, or the project, leaves no usable token', async () => {
    const made = await create(P, { name: 'member bot', scopes: ['api'] });
    assert.equal((await t.get(P, { token: made.body.token })).status, 200);
    assert.equal((await t.delete(`${P}/members/${made.body.user_id}`, { token: maintainer.token })).status, 204);
    assert.equal((await t.get('/api/v4/user', { token: made.body.token })).status, 401);
    const shown = await t.get(`${P}/access_tokens/${made.body.id}`, { token: maintainer.token });
    assert.equal(shown.body.revoked, true);
    assert.equal(shown.body.access_level, null);
    // Revoking it now: GitLab's "Failed to find bot user".
    const revoke = await t.delete(`${P}/access_tokens/${made.body.id}`, { token: maintainer.token });
    assert.equal(revoke.status, 400);

    // An administrator deleting the bot user takes its tokens with it.
    const deleted = await create(P, { name: 'deleted bot', scopes: ['api'] });
    const removal = await t.delete(`/api/v4/users/${deleted.body.user_id}`, { query: { hard_delete: true } });
    assert.ok([202, 204].includes(removal.status), removal.text);
    for (let i = 0; i < 50 && (await t.get(`/api/v4/users/${deleted.body.user_id}`)).status !== 404; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal((await t.get('/api/v4/user', { token: deleted.body.token })).status, 401);
    assert.equal((await t.get(`${P}/access_tokens/${deleted.body.id}`, { token: maintainer.token })).status, 404);

    const doomed = await t.createProject({ group, visibility: 20 });
    const onDoomed = await create(`/api/v4/projects/${doomed.id}`, { name: 'doomed', scopes: ['api'] });
    assert.equal((await t.get('/api/v4/user', { token: onDoomed.body.token })).status, 200);
    assert.equal((await t.delete(`/api/v4/projects/${doomed.id}`, { token: owner.token })).status, 202);
    assert.equal((await t.get('/api/v4/user', { token: onDoomed.body.token })).status, 401);
  });

  it('group access tokens: owners only, a group bot reaching the group’s projects', async () => {
    assert.equal((await create(G, { name: 'x', scopes: ['api'] }, maintainer.token)).status, 403);
    assert.equal((await t.get(`${G}/access_tokens`, { token: maintainer.token })).status, 403);
    assert.equal((await t.get(`${G}/access_tokens`, { token: outsider.token })).status, 404);

    const made = await create(G, { name: 'group bot', scopes: ['api'], access_level: 50 }, owner.token);
    assert.equal(made.status, 201, made.text);
    assert.equal(made.body.access_level, 50);
    const bot = await t.get(`/api/v4/users/${made.body.user_id}`);
    assert.match(bot.body.username, new RegExp(`^group_${group.id}_bot_[0-9a-f]{32}$`));
    assert.equal((await t.get(P, { token: made.body.token })).status, 200, 'projects of the group');
    const members = await t.get(`${G}/members`, { token: owner.token });
    assert.ok(members.body.some((m: any) => m.id === made.body.user_id));

    const list = await t.get(`${G}/access_tokens`, { token: owner.token });
    assert.deepEqual(list.body.map((x: any) => x.id), [made.body.id], 'project tokens are not the group’s');
    const rotated = await t.post(`${G}/access_tokens/${made.body.id}/rotate`, {}, { token: owner.token });
    assert.equal(rotated.status, 200);
    assert.equal((await t.get(P, { token: rotated.body.token })).status, 200);
    const missing = await t.get(`${G}/access_tokens/999999`, { token: owner.token });
    assert.equal(missing.body.message, '404 Could not find group access token with token_id: 999999 Not Found');
    assert.equal((await t.delete(`${G}/access_tokens/${rotated.body.id}`, { token: owner.token })).status, 204);
    assert.equal((await t.get(P, { token: rotated.body.token })).status, 401);
  });

  it('the bot cannot sign in with a password', async () => {
    const made = await create(P, { name: 'no login', scopes: ['api'] });
    const bot = await t.db.selectFrom('users').select('username').where('id', '=', made.body.user_id).executeTakeFirstOrThrow();
    const res = await t.call('POST', '/oauth/token', { token: null, body: { grant_type: 'password', username: bot.username, password: made.body.token } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error, 'invalid_grant');
  });
});

describe('access tokens with the real git client', () => {
  let t: TestContext;
  let base: string;
  let home: string;
  let work: string;
  let project: Project;
  let fullPath: string;

  const git = (args: string[], cwd: string): Promise<{ code: number; stderr: string }> =>
    new Promise((resolve) => {
      execFile('git', ['-c', 'user.name=Bot Test', '-c', 'user.email=bot@example.com', ...args], {
        cwd,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, GIT_CONFIG_GLOBAL: path.join(home, '.gitconfig'), GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' },
      }, (err, _stdout, stderr) => resolve({ code: err ? Number((err as any).code ?? 1) : 0, stderr: String(stderr) }));
    });
  const url = (user: string, token: string) => `http://${encodeURIComponent(user)}:${encodeURIComponent(token)}@${base}/${fullPath}.git`;

  before(async () => {
    t = await createTestContext({ defaultBranchProtection: 0 });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-bot-home-'));
    fs.writeFileSync(path.join(home, '.gitconfig'), '');
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-bot-work-'));
    const group = await t.createGroup();
    project = await t.createProject({ group });
    await commitFiles(t, project, { 'README.md': '# cloned by a bot\n' });
    fullPath = `${group.full_path}/${project.path}`;
  });
  after(async () => {
    await t.close();
    fs.rmSync(home, { recursive: true, force: true });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('clones with a reporter token, which cannot push; a developer token pushes; a revoked one is refused', async () => {
    const P = `/api/v4/projects/${project.id}`;
    const reporter = await t.post(`${P}/access_tokens`, { name: 'reader', scopes: ['read_repository', 'write_repository'], access_level: 20 });
    assert.equal(reporter.status, 201, reporter.text);
    const botName = (await t.get(`/api/v4/users/${reporter.body.user_id}`)).body.username;
    const dir = path.join(work, 'clone');
    const clone = await git(['clone', '-q', url(botName, reporter.body.token), dir], work);
    assert.equal(clone.code, 0, clone.stderr);
    assert.equal(fs.readFileSync(path.join(dir, 'README.md'), 'utf8'), '# cloned by a bot\n');

    fs.writeFileSync(path.join(dir, 'bot.txt'), 'bot\n');
    assert.equal((await git(['add', 'bot.txt'], dir)).code, 0);
    assert.equal((await git(['commit', '-q', '-m', 'bot change'], dir)).code, 0);
    const refused = await git(['push', '-q', 'origin', 'HEAD:main'], dir);
    assert.notEqual(refused.code, 0, 'a reporter-level token cannot push');

    const developer = await t.post(`${P}/access_tokens`, { name: 'writer', scopes: ['write_repository'], access_level: 30 });
    const pushed = await git(['push', '-q', url('anything', developer.body.token), 'HEAD:main'], dir);
    assert.equal(pushed.code, 0, pushed.stderr);

    assert.equal((await t.delete(`${P}/access_tokens/${reporter.body.id}`)).status, 204);
    const after = await git(['clone', '-q', url(botName, reporter.body.token), path.join(work, 'again')], work);
    assert.notEqual(after.code, 0);
    assert.match(after.stderr, /Access denied|Authentication failed|401/);
  });
});
