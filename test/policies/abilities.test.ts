import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { can, effectiveLevel, type ProjectAbility } from '../../src/policies/abilities.js';

const user = (extra: { admin?: boolean; external?: boolean } = {}) => ({ id: 1, admin: false, external: false, ...extra });
const project = (visibility_level: number, settings: Record<string, unknown> = {}) => ({ visibility_level, archived: false, repository_read_only: false, settings });

describe('abilities', () => {
  it('reads projects by visibility and membership', () => {
    assert.equal(can(null, 'read_project', { project: project(20), accessLevel: 0 }), true);
    assert.equal(can(null, 'read_project', { project: project(10), accessLevel: 0 }), false);
    assert.equal(can(user(), 'read_project', { project: project(10), accessLevel: 0 }), true);
    assert.equal(can(user({ external: true }), 'read_project', { project: project(10), accessLevel: 0 }), false);
    assert.equal(can(user({ external: true }), 'read_project', { project: project(10), accessLevel: 10 }), true);
    assert.equal(can(user(), 'read_project', { project: project(0), accessLevel: 0 }), false);
    assert.equal(can(user(), 'read_project', { project: project(0), accessLevel: 10 }), true);
  });

  it('keeps the code of a private project from guests', () => {
    assert.equal(can(user(), 'download_code', { project: project(0), accessLevel: 10 }), false);
    assert.equal(can(user(), 'download_code', { project: project(0), accessLevel: 20 }), true);
    assert.equal(can(null, 'download_code', { project: project(20), accessLevel: 0 }), true);
  });

  it('grants by level, administrators counting as owners', () => {
    const table: [ProjectAbility, number][] = [['push_code', 30], ['admin_project', 40], ['owner_project', 50], ['update_tag', 40]];
    for (const [ability, min] of table) {
      for (const level of [0, 10, 20, 30, 40, 50]) {
        assert.equal(can(user(), ability, { project: project(20), accessLevel: level }), level >= min, `${ability} at ${level}`);
      }
    }
    const admin = user({ admin: true });
    assert.equal(can(admin, 'owner_project', { project: project(0), accessLevel: effectiveLevel(admin, 0) }), true);
    assert.equal(can(null, 'push_code', { project: project(20), accessLevel: 50 }), false);
  });

  it('follows feature settings for merge requests', () => {
    assert.equal(can(user(), 'create_merge_request_in', { project: project(20), accessLevel: 30 }), true);
    assert.equal(can(user(), 'create_merge_request_in', { project: project(20, { merge_requests_access_level: 'disabled' }), accessLevel: 30 }), false);
  });

  it('lets guests read and reporters manage labels and milestones, while issues or merge requests are on and the project is not archived', () => {
    for (const [read, admin] of [['read_label', 'admin_label'], ['read_milestone', 'admin_milestone']] as const) {
      assert.equal(can(user(), read, { project: project(0), accessLevel: 10 }), true);
      assert.equal(can(user(), read, { project: project(0), accessLevel: 0 }), false);
      assert.equal(can(user(), admin, { project: project(20), accessLevel: 10 }), false);
      assert.equal(can(user(), admin, { project: project(20), accessLevel: 20 }), true);
      assert.equal(can(user(), admin, { project: { ...project(20), archived: true }, accessLevel: 40 }), false);
      const off = project(20, { issues_access_level: 'disabled', merge_requests_access_level: 'disabled' });
      assert.equal(can(user(), read, { project: off, accessLevel: 40 }), false);
      assert.equal(can(user(), read, { project: project(20, { issues_access_level: 'disabled' }), accessLevel: 0 }), true);
      const group = { visibility_level: 0, subgroup_creation_level: 1, project_creation_level: 2 };
      assert.equal(can(user(), read, { group, accessLevel: 10 }), true);
      assert.equal(can(user(), admin, { group, accessLevel: 10 }), false);
      assert.equal(can(user(), admin, { group, accessLevel: 20 }), true);
    }
  });

  it('decides group creation rules from the group settings', () => {
    const group = (subgroup_creation_level: number, project_creation_level: number) => ({ visibility_level: 0, subgroup_creation_level, project_creation_level });
    assert.equal(can(user(), 'create_subgroup', { group: group(1, 2), accessLevel: 40 }), true);
    assert.equal(can(user(), 'create_subgroup', { group: group(0, 2), accessLevel: 40 }), false);
    assert.equal(can(user(), 'create_projects', { group: group(1, 2), accessLevel: 30 }), true);
    assert.equal(can(user(), 'create_projects', { group: group(1, 1), accessLevel: 30 }), false);
    assert.equal(can(user(), 'create_projects', { group: group(1, 0), accessLevel: 50 }), false);
    assert.equal(can(user(), 'read_group', { group: group(1, 2), accessLevel: 0, accessBelow: true }), true);
  });

  it('lets outsiders ask to join, and reads a namespace through membership only', () => {
    const group = (visibility_level: number) => ({ visibility_level, subgroup_creation_level: 1, project_creation_level: 2 });
    const admin = user({ admin: true });
    assert.equal(can(user(), 'request_access', { project: project(20), accessLevel: 0 }), true);
    assert.equal(can(user(), 'request_access', { project: project(20), accessLevel: 10 }), false);
    assert.equal(can(user(), 'request_access', { project: project(0), accessLevel: 0 }), false);
    assert.equal(can(admin, 'request_access', { group: group(20), accessLevel: effectiveLevel(admin, 0) }), false);
    assert.equal(can(null, 'request_access', { group: group(20), accessLevel: 0 }), false);
    assert.equal(can(user(), 'read_namespace_via_membership', { group: group(20), accessLevel: 0 }), false);
    assert.equal(can(user(), 'read_namespace_via_membership', { group: group(0), accessLevel: 10 }), true);
    assert.equal(can(admin, 'read_namespace_via_membership', { group: group(0), accessLevel: effectiveLevel(admin, 0) }), true);
  });
});
