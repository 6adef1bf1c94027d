import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { GlobalNotificationSettingSchema, NotificationSettingSchema } from '../../src/presenters/schemas/notification_settings.js';
import { NOTIFICATION_EVENTS } from '../../src/services/notification_settings.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertOne } from '../helpers/contract.js';

const LEVELS = ['disabled', 'participating', 'watch', 'global', 'mention', 'custom'];

describe('notification settings API', () => {
  let t: TestContext;
  let me: TestUser, guest: TestUser, outsider: TestUser, readOnly: TestUser;
  let privateGroup: Namespace, publicGroup: Namespace;
  let privateProject: Project, publicProject: Project;

  before(async () => {
    t = await createTestContext();
    [me, guest, outsider] = await Promise.all([t.createUser(), t.createUser(), t.createUser()]);
    readOnly = await t.createUser({ scopes: ['read_api'] });
    privateGroup = await t.createGroup({ visibility: 0 });
    publicGroup = await t.createGroup({ visibility: 20 });
    privateProject = await t.createProject({ group: privateGroup });
    publicProject = await t.createProject({ visibility: 20 });
    await t.addMember(privateGroup, me.user, 30);
    await t.addMember(privateProject, guest.user, 10);
  });
  after(async () => {
    await t?.close();
  });

  describe('global', () => {
    it('defaults to participating, to the primary e-mail', async () => {
      const res = await t.get('/api/v4/notification_settings', { token: me.token });
      assertOne(GlobalNotificationSettingSchema, res, 'GET global');
      assert.deepEqual(res.body, { level: 'participating', notification_email: me.user.email });
    });

    it('needs a signed-in caller', async () => {
      assert.equal((await t.get('/api/v4/notification_settings', { token: null })).status, 401);
      assert.equal((await t.put('/api/v4/notification_settings', { level: 'watch' }, { token: null })).status, 401);
    });

    it('takes every level; events appear only when custom', async () => {
      const u = await t.createUser();
      for (const level of LEVELS) {
        const res = await t.put('/api/v4/notification_settings', { level }, { token: u.token });
        assertOne(GlobalNotificationSettingSchema, res, `PUT ${level}`);
        assert.equal(res.body.level, level);
        assert.equal('events' in res.body, level === 'custom', level);
        assert.equal(res.body.notification_email, u.user.email);
        assert.equal((await t.get('/api/v4/notification_settings', { token: u.token })).body.level, level);
      }
    });

    it('custom: all 18 flags, failed and fixed pipeline on until set, the rest off; flags merge', async () => {
      const u = await t.createUser();
      const res = await t.put('/api/v4/notification_settings', { level: 'custom', new_issue: true, new_epic: true }, { token: u.token });
      assertOne(GlobalNotificationSettingSchema, res, 'PUT custom');
      assert.deepEqual(Object.keys(res.body.events), [...NOTIFICATION_EVENTS]);
      assert.equal(NOTIFICATION_EVENTS.length, 18);
      for (const e of NOTIFICATION_EVENTS) {
        assert.equal(res.body.events[e], ['new_issue', 'new_epic', 'failed_pipeline', 'fixed_pipeline'].includes(e), e);
      }
      // Every flag can be set either way, and a later PUT keeps the flags it does not name.
      const all = Object.fromEntries(NOTIFICATION_EVENTS.map((e, i) => [e, i % 2 === 0]));
      const res2 = await t.put('/api/v4/notification_settings', all, { token: u.token });
      assert.equal(res2.status, 200);
      assert.deepEqual(res2.body.events, all);
      const res3 = await t.put('/api/v4/notification_settings', { failed_pipeline: true }, { token: u.token });
      assert.deepEqual(res3.body.events, { ...all, failed_pipeline: true });
      // Form-encoded booleans, as python-gitlab sends them.
      const form = await t.call('PUT', '/api/v4/notification_settings', { token: u.token, form: 'new_note=true&close_issue=false' });
      assert.equal(form.status, 200, form.text);
      assert.equal(form.body.events.new_note, true);
      assert.equal(form.body.events.close_issue, false);
      // Flags are kept when the level changes away and back.
      await t.put('/api/v4/notification_settings', { level: 'watch' }, { token: u.token });
      const back = await t.put('/api/v4/notification_settings', { level: 'custom' }, { token: u.token });
      assert.equal(back.body.events.new_note, true);
    });

    it('400 for an unknown level, as GitLab words it', async () => {
      const res = await t.put('/api/v4/notification_settings', { level: 'loud' }, { token: me.token });
      assert.equal(res.status, 400);
      assert.deepEqual(res.body, { message: "'loud' is not a valid level" });
      assert.equal((await t.get('/api/v4/notification_settings', { token: me.token })).body.level, 'participating');
    });

    it('400 for a flag that is not a boolean', async () => {
      const res = await t.put('/api/v4/notification_settings', { new_note: 'sometimes' }, { token: me.token });
      assert.equal(res.status, 400);
    });

    it('notification_email must be one of the verified e-mails; blank resets it', async () => {
      const u = await t.createUser();
      const bad = await t.put('/api/v4/notification_settings', { notification_email: 'someone-else@example.com' }, { token: u.token });
      assert.equal(bad.status, 400);
      assert.deepEqual(bad.body, { message: { notification_email: ['must be an email you have verified'] } });
      const good = await t.put('/api/v4/notification_settings', { notification_email: u.user.email.toUpperCase(), level: 'watch' }, { token: u.token });
      assert.equal(good.status, 200, good.text);
      assert.deepEqual(good.body, { level: 'watch', notification_email: u.user.email.toUpperCase() });
      const reset = await t.put('/api/v4/notification_settings', { notification_email: '' }, { token: u.token });
      assert.equal(reset.body.notification_email, u.user.email);
    });

    it('a read_api token reads but does not change', async () => {
      assert.equal((await t.get('/api/v4/notification_settings', { token: readOnly.token })).status, 200);
      assert.equal((await t.put('/api/v4/notification_settings', { level: 'watch' }, { token: readOnly.token })).status, 403);
    });
  });

  it('settings go with a deleted group and its projects', async () => {
    const g = await t.createGroup();
    const p = await t.createProject({ group: g });
    await t.addMember(g, me.user, 30);
    assert.equal((await t.put(`/api/v4/projects/${p.id}/notification_settings`, { level: 'watch' }, { token: me.token })).status, 200);
    assert.equal((await t.put(`/api/v4/groups/${g.id}/notification_settings`, { level: 'watch' }, { token: me.token })).status, 200);
    assert.equal((await t.delete(`/api/v4/groups/${g.id}`)).status, 202);
    const left = await t.db.selectFrom('notification_settings').select('id').where('user_id', '=', me.user.id)
      .where((eb) => eb.or([eb.and([eb('source_type', '=', 'Project'), eb('source_id', '=', p.id)]), eb.and([eb('source_type', '=', 'Namespace'), eb('source_id', '=', g.id)])]))
      .execute();
    assert.deepEqual(left, []);
  });

  for (const kind of ['groups', 'projects'] as const) {
    describe(kind, () => {
      const privateOne = () => (kind === 'groups' ? privateGroup : privateProject);
      const publicOne = () => (kind === 'groups' ? publicGroup : publicProject);
      const url = (s: { id: number }) => `/api/v4/${kind}/${s.id}/notification_settings`;

      it('defaults to global; every level; events only when custom', async () => {
        const first = await t.get(url(privateOne()), { token: me.token });
        assertOne(NotificationSettingSchema, first, `GET ${kind}`);
        assert.deepEqual(first.body, { level: 'global' });
        for (const level of LEVELS) {
          const res = await t.put(url(privateOne()), { level }, { token: me.token });
          assertOne(NotificationSettingSchema, res, `PUT ${kind} ${level}`);
          assert.equal(res.body.level, level);
          assert.equal('events' in res.body, level === 'custom');
          assert.equal('notification_email' in res.body, false);
        }
        const custom = await t.put(url(privateOne()), { level: 'custom', merge_merge_request: true, failed_pipeline: false }, { token: me.token });
        assert.deepEqual(Object.keys(custom.body.events), [...NOTIFICATION_EVENTS]);
        assert.equal(custom.body.events.merge_merge_request, true);
        assert.equal(custom.body.events.failed_pipeline, false);
        assert.equal(custom.body.events.fixed_pipeline, true);
        assert.equal(custom.body.events.new_note, false);
        assert.deepEqual((await t.get(url(privateOne()), { token: me.token })).body, custom.body);
        // By full path too.
        const path = kind === 'groups' ? privateGroup.full_path : `${privateGroup.full_path}/${privateProject.path}`;
        assert.equal((await t.get(`/api/v4/${kind}/${encodeURIComponent(path)}/notification_settings`, { token: me.token })).body.level, 'custom');
        // Settings are per user: another reader still has the default.
        assert.deepEqual((await t.get(url(publicOne()), { token: me.token })).body, { level: 'global' });
      });

      it('400 for an unknown level', async () => {
        const res = await t.put(url(privateOne()), { level: 'everything' }, { token: me.token });
        assert.equal(res.status, 400);
        assert.deepEqual(res.body, { message: "'everything' is not a valid level" });
      });

      it('anonymous 401; who cannot read it 404; whoever reads it may set theirs', async () => {
        assert.equal((await t.get(url(publicOne()), { token: null })).status, 401);
        assert.equal((await t.put(url(publicOne()), { level: 'watch' }, { token: null })).status, 401);
        const hidden = await t.get(url(privateOne()), { token: outsider.token });
        assert.equal(hidden.status, 404);
        assert.equal((await t.put(url(privateOne()), { level: 'watch' }, { token: outsider.token })).status, 404);
        assert.equal((await t.get(`/api/v4/${kind}/999999/notification_settings`, { token: me.token })).status, 404);
        // Readable to a non-member (public) and, for the private project, to a guest.
        const pub = await t.put(url(publicOne()), { level: 'watch' }, { token: outsider.token });
        assert.equal(pub.status, 200);
        assert.equal(pub.body.level, 'watch');
        if (kind === 'projects') {
          const g = await t.put(url(privateProject), { level: 'mention' }, { token: guest.token });
          assert.deepEqual(g.body, { level: 'mention' });
        }
        // An administrator reads every group and project.
        assert.equal((await t.get(url(privateOne()))).status, 200);
        // read_api reads, does not write.
        const ro = await t.get(url(publicOne()), { token: readOnly.token });
        assert.equal(ro.status, 200);
        assert.equal((await t.put(url(publicOne()), { level: 'watch' }, { token: readOnly.token })).status, 403);
      });
    });
  }
});
