import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Cairn } from '../../src/context.js';
import type { ProjectWithNamespace } from '../../src/finders/projects.js';
import { checkGitAccess, GIT_MESSAGES, type GitCredential } from '../../src/policies/git_access.js';
import { checkRefUpdates, PUSH_MESSAGES } from '../../src/services/push_rules.js';

/** The decisions of git over HTTP, as a table (pure: no database). */
const user = (extra: { admin?: boolean; external?: boolean } = {}) => ({ id: 7, admin: false, external: false, state: 'active', ...extra }) as any;
const cred = (u = user(), rights: Partial<Pick<GitCredential, 'download' | 'push'>> = {}): GitCredential => ({ user: u, download: true, push: true, ...rights });
const project = (visibility_level: number, extra: Record<string, unknown> = {}) =>
  ({ id: 1, namespace_id: 1, default_branch: 'main', visibility_level, archived: false, repository_read_only: false, settings: {}, ...extra }) as unknown as ProjectWithNamespace;

type Outcome = 'ok' | [number, string];
const outcome = (d: ReturnType<typeof checkGitAccess>): Outcome => (d.allowed ? 'ok' : [d.status, d.message]);

describe('git access over HTTP', () => {
  it('fetch and push by visibility, membership and credential', () => {
    const PUBLIC = 20, INTERNAL = 10, PRIVATE = 0;
    const cases: [string, number, GitCredential | null, number, Outcome, Outcome][] = [
      ['anonymous, public', PUBLIC, null, 0, 'ok', [401, GIT_MESSAGES.push]],
      ['anonymous, internal', INTERNAL, null, 0, [401, GIT_MESSAGES.projectNotFound], [401, GIT_MESSAGES.projectNotFound]],
      ['signed in, internal', INTERNAL, cred(), 0, 'ok', [403, GIT_MESSAGES.push]],
      ['external outsider, internal', INTERNAL, cred(user({ external: true })), 0, [404, GIT_MESSAGES.projectNotFound], [404, GIT_MESSAGES.projectNotFound]],
      ['external guest, internal', INTERNAL, cred(user({ external: true })), 10, 'ok', [403, GIT_MESSAGES.push]],
      ['outsider, private', PRIVATE, cred(), 0, [404, GIT_MESSAGES.projectNotFound], [404, GIT_MESSAGES.projectNotFound]],
      ['guest, private', PRIVATE, cred(), 10, [403, GIT_MESSAGES.download], [403, GIT_MESSAGES.push]],
      ['reporter, private', PRIVATE, cred(), 20, 'ok', [403, GIT_MESSAGES.push]],
      ['developer, private', PRIVATE, cred(), 30, 'ok', 'ok'],
      ['administrator, private', PRIVATE, cred(user({ admin: true })), 0, 'ok', 'ok'],
      ['read-only credential', PRIVATE, cred(user(), { push: false }), 30, 'ok', [403, GIT_MESSAGES.authUpload]],
      ['credential without download', PRIVATE, cred(user(), { download: false, push: false }), 30, [403, GIT_MESSAGES.authDownload], [403, GIT_MESSAGES.authUpload]],
    ];
    for (const [name, visibility, c, level, fetch, push] of cases) {
      assert.deepEqual(outcome(checkGitAccess(project(visibility), c, 'git-upload-pack', level)), fetch, `${name}: fetch`);
      assert.deepEqual(outcome(checkGitAccess(project(visibility), c, 'git-receive-pack', level)), push, `${name}: push`);
    }
    assert.deepEqual(outcome(checkGitAccess(undefined, null, 'git-upload-pack', 0)), [401, GIT_MESSAGES.projectNotFound]);
    assert.deepEqual(outcome(checkGitAccess(project(PRIVATE, { archived: true }), cred(), 'git-receive-pack', 40)), [403, GIT_MESSAGES.archived]);
    assert.deepEqual(outcome(checkGitAccess(project(PRIVATE, { repository_read_only: true }), cred(), 'git-receive-pack', 40)), [403, GIT_MESSAGES.readOnly]);
    const admin = checkGitAccess(project(PRIVATE), cred(user({ admin: true })), 'git-receive-pack', 0);
    assert.deepEqual(admin, { allowed: true, accessLevel: 50 });
  });

  it('tags: anyone who may push creates them; only maintainers move or delete existing ones', async () => {
    const cairn = {} as Cairn; // tag rules need no database when the level is given
    const zero = '0'.repeat(40);
    const a = 'a'.repeat(40);
    const b = 'b'.repeat(40);
    const create = { ref: 'refs/tags/v1', oldSha: zero, newSha: a };
    const move = { ref: 'refs/tags/v2', oldSha: a, newSha: b };
    const remove = { ref: 'refs/tags/v3', oldSha: a, newSha: zero };
    const refusals = async (u: any, level: number) => Object.fromEntries((await checkRefUpdates(cairn, project(0), u, [create, move, remove], level)).refusals);
    assert.deepEqual(await refusals(user(), 30), { 'refs/tags/v2': PUSH_MESSAGES.changeTags, 'refs/tags/v3': PUSH_MESSAGES.changeTags });
    assert.deepEqual(await refusals(user(), 40), {});
    assert.deepEqual(await refusals(user({ admin: true }), 0), {});
    const reporter = await refusals(user(), 20);
    assert.deepEqual(Object.values(reporter), [PUSH_MESSAGES.pushCode, PUSH_MESSAGES.pushCode, PUSH_MESSAGES.pushCode]);
    assert.equal(Object.keys(await refusals(null, 50)).length, 3);
  });
});
