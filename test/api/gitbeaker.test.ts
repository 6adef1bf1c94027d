import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Gitlab } from '@gitbeaker/rest';
import { createTestContext, ROOT_TOKEN, type TestContext } from '../helpers/app.js';

describe('groups and projects through @gitbeaker/rest', () => {
  let t: TestContext;
  let host: string;
  before(async () => {
    t = await createTestContext();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    host = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  after(async () => { await t.close(); });

  it('creates, reads, lists, edits and removes', async () => {
    const api = new Gitlab({ host, token: ROOT_TOKEN });
    const group = await api.Groups.create('Beaker Group', 'beaker-group', { visibility: 'internal' });
    assert.equal(group.full_path, 'beaker-group');
    const sub = await api.Groups.create('Beaker Sub', 'beaker-sub', { parentId: group.id as number });
    assert.equal(sub.full_path, 'beaker-group/beaker-sub');
    const project = await api.Projects.create({ name: 'Beaker Project', namespaceId: sub.id as number, initializeWithReadme: true });
    assert.equal(project.path_with_namespace, 'beaker-group/beaker-sub/beaker-project');
    assert.equal(project.empty_repo, false);

    const shown = await api.Projects.show('beaker-group/beaker-sub/beaker-project');
    assert.equal(shown.id, project.id);
    const all = await api.Projects.all({ search: 'Beaker', simple: true });
    assert.ok(all.some((p) => p.id === project.id));
    const groupProjects = await api.Groups.allProjects(group.id as number, { includeSubgroups: true });
    assert.deepEqual(groupProjects.map((p) => p.id), [project.id]);
    const subgroups = await api.Groups.allSubgroups(group.id as number);
    assert.deepEqual(subgroups.map((g) => g.id), [sub.id]);
    const shownGroup = await api.Groups.show('beaker-group');
    assert.equal(shownGroup.id, group.id);

    const edited = await api.Projects.edit(project.id as number, { description: 'edited by gitbeaker' });
    assert.equal(edited.description, 'edited by gitbeaker');
    const namespaces = await api.Namespaces.all({ search: 'beaker' });
    assert.ok(namespaces.some((n) => n.id === group.id));

    await api.Projects.remove(project.id as number);
    await assert.rejects(api.Projects.show(project.id as number));
    await api.Groups.remove(group.id as number);
    await assert.rejects(api.Groups.show(group.id as number));
  });
});
