import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { Namespace, User } from '../db/schema/core.js';
import { pathError, RESERVED_TOP_LEVEL } from '../lib/paths.js';
import { can, effectiveLevel } from '../policies/abilities.js';
import { AccessLevel, VISIBILITY_LEVELS, VISIBILITY_NAMES } from '../policies/access.js';
import { groupAccessLevel } from '../finders/access_levels.js';
import { ApiError, apiError, forbidden } from '../plugins/errors.js';
import { toBoolean } from '../plugins/params.js';
import { GROUP_SETTING_DEFAULTS, PROJECT_CREATION_LEVELS, SUBGROUP_CREATION_LEVELS } from '../presenters/groups.js';
import { deleteProjectRows, rubyErrors } from './projects.js';
import { groupTreeIds } from '../finders/groups.js';
import { createRegistrationToken } from '../ci/runners.js';

export interface NewGroup {
  name: string;
  path: string;
  parent?: Namespace | null;
  visibility_level?: number;
  description?: string;
  settings?: Record<string, unknown>;
  subgroup_creation_level?: number;
  project_creation_level?: number;
  default_branch_name?: string | null;
  request_access_enabled?: boolean;
  /** Becomes an Owner member of the new group, in the same transaction. */
  creator?: User | null;
}

/** Inserts a group namespace with its full path and traversal ids (and the creator's Owner membership). */
export async function insertGroup(cairn: Pick<Cairn, 'db' | 'config'>, attrs: NewGroup): Promise<Namespace> {
  const parent = attrs.parent ?? null;
  return cairn.db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('namespaces')
      .values({
        type: 'Group',
        name: attrs.name,
        path: attrs.path,
        full_path: parent ? `${parent.full_path}/${attrs.path}` : attrs.path,
        full_name: parent ? `${parent.full_name} / ${attrs.name}` : attrs.name,
        parent_id: parent?.id ?? null,
        visibility_level: attrs.visibility_level ?? 0,
        description: attrs.description ?? '',
        settings: attrs.settings ?? {},
        subgroup_creation_level: attrs.subgroup_creation_level,
        project_creation_level: attrs.project_creation_level,
        default_branch_name: attrs.default_branch_name ?? null,
        request_access_enabled: attrs.request_access_enabled,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await createRegistrationToken(trx, cairn.config, { type: 'group_type', namespaceId: row.id });
    if (attrs.creator) {
      await trx
        .insertInto('members')
        .values({ source_type: 'Namespace', source_id: row.id, user_id: attrs.creator.id, access_level: AccessLevel.OWNER, created_by_id: attrs.creator.id })
        .execute();
    }
    return trx
      .updateTable('namespaces')
      .set({ traversal_ids: [...(parent?.traversal_ids ?? []), row.id] })
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}

const GROUP_NAME_RE = /^[\p{L}\p{N}_\p{Extended_Pictographic}][\p{L}\p{N}\p{Extended_Pictographic}\p{M}_.()\- ]*$/u;
const GROUP_NAME_MESSAGE = "can contain only letters, digits, emoji, '_', '.', dash, space, parenthesis. It must start with letter, digit, emoji or '_'.";

type SettingKind = 'boolean' | 'nullable_boolean' | 'integer' | 'nullable_integer' | 'string' | readonly string[];

/** Group settings kept in namespaces.settings that the Groups API accepts. */
const SETTING_KINDS: Record<string, SettingKind> = {
  share_with_group_lock: 'boolean',
  require_two_factor_authentication: 'boolean',
  two_factor_grace_period: 'integer',
  auto_devops_enabled: 'nullable_boolean',
  emails_enabled: 'boolean',
  show_diff_preview_in_email: 'boolean',
  mentions_disabled: 'nullable_boolean',
  lfs_enabled: 'boolean',
  math_rendering_limits_enabled: 'boolean',
  lock_math_rendering_limits_enabled: 'boolean',
  default_branch_protection: ['0', '1', '2', '3', '4'],
  shared_runners_setting: ['enabled', 'disabled_and_overridable', 'disabled_and_unoverridable', 'disabled_with_override'],
  max_artifacts_size: 'nullable_integer',
  wiki_access_level: ['disabled', 'private', 'enabled'],
  prevent_sharing_groups_outside_hierarchy: 'boolean',
  membership_lock: 'boolean',
  prevent_forking_outside_group: 'boolean',
  file_template_project_id: 'nullable_integer',
  enabled_git_access_protocol: ['ssh', 'http', 'all'],
  duo_features_enabled: 'boolean',
  lock_duo_features_enabled: 'boolean',
};
/** Settings only administrators may set. */
const ADMIN_SETTINGS = new Set(['shared_runners_minutes_limit', 'extra_shared_runners_minutes_limit', 'ldap_cn', 'ldap_access']);

interface ParsedGroupParams {
  columns: Partial<Pick<NewGroup, 'description' | 'subgroup_creation_level' | 'project_creation_level' | 'default_branch_name' | 'request_access_enabled'>> & {
    visibility_level?: number;
  };
  settings: Record<string, unknown>;
}

function parseGroupParams(params: Record<string, unknown>, admin: boolean): ParsedGroupParams {
  const errors: string[] = [];
  const columns: ParsedGroupParams['columns'] = {};
  const settings: Record<string, unknown> = {};
  if (params.visibility !== undefined) {
    const level = VISIBILITY_LEVELS[String(params.visibility)];
    if (level === undefined) errors.push('visibility does not have a valid value');
    else columns.visibility_level = level;
  }
  if (params.description !== undefined) columns.description = params.description === null ? '' : String(params.description);
  if (params.subgroup_creation_level !== undefined) {
    const i = SUBGROUP_CREATION_LEVELS.indexOf(String(params.subgroup_creation_level) as any);
    if (i < 0) errors.push('subgroup_creation_level does not have a valid value');
    else columns.subgroup_creation_level = i;
  }
  if (params.project_creation_level !== undefined) {
    const i = PROJECT_CREATION_LEVELS.indexOf(String(params.project_creation_level) as any);
    if (i < 0) errors.push('project_creation_level does not have a valid value');
    else columns.project_creation_level = i;
  }
  if (params.default_branch !== undefined) columns.default_branch_name = params.default_branch ? String(params.default_branch) : null;
  if (params.request_access_enabled !== undefined) {
    const b = toBoolean(params.request_access_enabled);
    if (b === undefined) errors.push('request_access_enabled is invalid');
    else columns.request_access_enabled = b;
  }
  if (params.emails_disabled !== undefined && params.emails_enabled === undefined) {
    const b = toBoolean(params.emails_disabled);
    if (b === undefined) errors.push('emails_disabled is invalid');
    else settings.emails_enabled = !b;
  }
  for (const [key, kind] of Object.entries(SETTING_KINDS)) {
    const v = params[key];
    if (v === undefined) continue;
    if (kind === 'boolean' || kind === 'nullable_boolean') {
      const b = v === null || v === '' ? null : toBoolean(v);
      if (b === undefined || (b === null && kind === 'boolean')) errors.push(`${key} is invalid`);
      else settings[key] = b;
    } else if (kind === 'integer' || kind === 'nullable_integer') {
      const n = v === null || v === '' ? null : typeof v === 'number' ? v : /^\d+$/.test(String(v).trim()) ? Number(v) : NaN;
      if ((n === null && kind === 'integer') || (n !== null && !Number.isInteger(n))) errors.push(`${key} is invalid`);
      else settings[key] = n;
    } else if (kind === 'string') {
      settings[key] = v === null ? null : String(v);
    } else if (!kind.includes(String(v))) {
      errors.push(`${key} does not have a valid value`);
    } else {
      settings[key] = key === 'default_branch_protection' ? Number(v) : String(v);
    }
  }
  for (const key of ADMIN_SETTINGS) {
    if (params[key] === undefined || !admin) continue;
    const v = params[key];
    if (key === 'ldap_cn') settings[key] = v === null ? null : String(v);
    else if (v === null || v === '') settings[key] = null;
    else if (/^\d+$/.test(String(v))) settings[key] = Number(v);
    else errors.push(`${key} is invalid`);
  }
  if (errors.length) throw new ApiError(400, { error: errors.join(', ') });
  return { columns, settings };
}

async function fullPathTaken(db: Database, fullPath: string, exceptNamespaceId?: number): Promise<boolean> {
  const ns = await db
    .selectFrom('namespaces')
    .select('id')
    .where(sql`lower(full_path)`, '=', fullPath.toLowerCase())
    .$if(exceptNamespaceId !== undefined, (q) => q.where('id', '<>', exceptNamespaceId!))
    .executeTakeFirst();
  if (ns) return true;
  const slash = fullPath.lastIndexOf('/');
  if (slash < 0) return false;
  const project = await db
    .selectFrom('projects as p')
    .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
    .select('p.id')
    .where(sql`lower(n.full_path)`, '=', fullPath.slice(0, slash).toLowerCase())
    .where(sql`lower(p.path)`, '=', fullPath.slice(slash + 1).toLowerCase())
    .executeTakeFirst();
  return !!project;
}

function pathProblems(path: string, topLevel: boolean): string[] {
  const problem = pathError(path);
  if (problem) return [problem];
  if (topLevel && RESERVED_TOP_LEVEL.has(path.toLowerCase())) return [`${path} is a reserved name`];
  return [];
}

/** May `user` create a subgroup of `parent` (GitLab's create_subgroup)? */
export async function canCreateSubgroup(db: Database, user: User, parent: Namespace): Promise<boolean> {
  if (user.admin) return true;
  return can(user, 'create_subgroup', { group: parent, accessLevel: effectiveLevel(user, await groupAccessLevel(db, user.id, parent)) });
}

/** POST /groups: checks rights and rules, then inserts the group with the creator as Owner. */
export async function createGroup(cairn: Cairn, user: User, parent: Namespace | null, params: Record<string, unknown>): Promise<Namespace> {
  const { db } = cairn;
  if (parent) {
    if (!(await canCreateSubgroup(db, user, parent))) throw forbidden();
  } else if (!user.admin && !user.can_create_group) {
    throw forbidden();
  }
  const name = String(params.name ?? '').trim();
  const path = String(params.path ?? '').trim();
  const { columns, settings } = parseGroupParams(params, user.admin);
  const visibility = columns.visibility_level ?? 0;

  const problems: Record<string, string[]> = {};
  if (!name) problems.name = ["can't be blank"];
  else if (!GROUP_NAME_RE.test(name)) problems.name = [GROUP_NAME_MESSAGE];
  const pathIssues = pathProblems(path, !parent);
  if (pathIssues.length) problems.path = pathIssues;
  else if (await fullPathTaken(db, parent ? `${parent.full_path}/${path}` : path)) problems.path = ['has already been taken'];
  if (parent && visibility > parent.visibility_level) {
    problems.visibility_level = [`${VISIBILITY_NAMES[visibility]} is not allowed since the parent group has a ${VISIBILITY_NAMES[parent.visibility_level]} visibility.`];
  }
  if (Object.keys(problems).length) throw apiError(400, `Failed to save group ${rubyErrors(problems)}`);

  return insertGroup(cairn, {
    name,
    path,
    parent,
    visibility_level: visibility,
    description: columns.description,
    subgroup_creation_level: columns.subgroup_creation_level,
    project_creation_level: columns.project_creation_level,
    default_branch_name: columns.default_branch_name,
    request_access_enabled: columns.request_access_enabled,
    settings,
    creator: user,
  });
}

/** The highest visibility among a group's subgroups and projects (a floor for lowering it). */
async function highestChildVisibility(db: Database, group: Namespace): Promise<number> {
  const row = await sql<{ level: number | null }>`
    select max(level)::int as level from (
      select n.visibility_level as level from namespaces n where n.traversal_ids @> array[${group.id}]::int[] and n.id <> ${group.id}
      union all
      select p.visibility_level from projects p join namespaces n on n.id = p.namespace_id where n.traversal_ids @> array[${group.id}]::int[]
    ) levels`.execute(db);
  return row.rows[0]?.level ?? 0;
}

/**
 * PUT /groups/:id. A new path or name rewrites full_path / full_name of the group and every
 * descendant in one transaction (projects derive their paths from their namespace).
 */
export async function updateGroup(cairn: Cairn, user: User, group: Namespace, params: Record<string, unknown>): Promise<Namespace> {
  const { db } = cairn;
  const { columns, settings } = parseGroupParams(params, user.admin);
  const problems: Record<string, string[]> = {};
  const name = typeof params.name === 'string' ? params.name.trim() : undefined;
  const path = typeof params.path === 'string' ? params.path.trim() : undefined;
  const parentPath = group.parent_id ? group.full_path.slice(0, group.full_path.lastIndexOf('/')) : null;
  const parentName = group.parent_id ? group.full_name.slice(0, group.full_name.length - group.name.length - 3) : null;

  if (name !== undefined && name !== group.name && !GROUP_NAME_RE.test(name)) problems.name = [GROUP_NAME_MESSAGE];
  if (path !== undefined && path !== group.path) {
    const issues = pathProblems(path, !group.parent_id);
    if (issues.length) problems.path = issues;
    else if (await fullPathTaken(db, parentPath ? `${parentPath}/${path}` : path, group.id)) problems.path = ['has already been taken'];
  }
  if (columns.visibility_level !== undefined && columns.visibility_level !== group.visibility_level) {
    const level = columns.visibility_level;
    if (group.parent_id) {
      const parent = await db.selectFrom('namespaces').select('visibility_level').where('id', '=', group.parent_id).executeTakeFirstOrThrow();
      if (level > parent.visibility_level) {
        problems.visibility_level = [`${VISIBILITY_NAMES[level]} is not allowed since the parent group has a ${VISIBILITY_NAMES[parent.visibility_level]} visibility.`];
      }
    }
    if (!problems.visibility_level && level < (await highestChildVisibility(db, group))) {
      problems.visibility_level = [`${VISIBILITY_NAMES[level]} is not allowed since there are sub-groups or projects with higher visibility.`];
    }
  }
  if (Object.keys(problems).length) throw validationProblems(problems);

  const newPath = path ?? group.path;
  const newName = name ?? group.name;
  const newFullPath = parentPath ? `${parentPath}/${newPath}` : newPath;
  const newFullName = parentName ? `${parentName} / ${newName}` : newName;
  return db.transaction().execute(async (trx) => {
    if (newFullPath !== group.full_path || newFullName !== group.full_name) {
      // Descendants keep their own suffix after the old prefix.
      await sql`
        update namespaces set
          full_path = ${newFullPath} || substr(full_path, ${group.full_path.length + 1}),
          full_name = ${newFullName} || substr(full_name, ${group.full_name.length + 1}),
          updated_at = now()
        where traversal_ids @> array[${group.id}]::int[] and id <> ${group.id}`.execute(trx);
    }
    return trx
      .updateTable('namespaces')
      .set({
        name: newName,
        path: newPath,
        full_path: newFullPath,
        full_name: newFullName,
        ...columns,
        ...(Object.keys(settings).length ? { settings: sql`settings || ${JSON.stringify(settings)}::jsonb` as any } : {}),
        updated_at: new Date(),
      })
      .where('id', '=', group.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}

function validationProblems(problems: Record<string, string[]>) {
  return new ApiError(400, { message: problems });
}

/**
 * DELETE /groups/:id: the group, its subgroups, their projects and memberships, in one
 * transaction; the repositories leave the disk in the queue (the API answers 202).
 */
export async function deleteGroup(cairn: Cairn, group: Namespace): Promise<void> {
  const { db } = cairn;
  const groupIds = await groupTreeIds(db, group.id);
  const projects = await db.selectFrom('projects').select(['id', 'repository_storage', 'disk_path']).where('namespace_id', 'in', groupIds).execute();
  await db.transaction().execute(async (trx) => {
    await deleteProjectRows(trx, projects);
    await trx.deleteFrom('members').where('source_type', '=', 'Namespace').where('source_id', 'in', groupIds).execute();
    await trx.deleteFrom('notification_settings').where('source_type', '=', 'Namespace').where('source_id', 'in', groupIds).execute();
    // Subgroups go with it (namespaces.parent_id cascades).
    await trx.deleteFrom('namespaces').where('id', '=', group.id).execute();
  });
}

/**
 * POST /groups/:id/transfer: moves a group under a new parent (or to the top level), rewriting
 * full paths, names and traversal ids of the whole subtree; repositories stay where they are.
 */
export async function transferGroup(cairn: Cairn, user: User, group: Namespace, newParent: Namespace | null): Promise<Namespace> {
  const { db } = cairn;
  const fail = (message: string) => apiError(400, `Transfer failed: ${message}`);
  if (newParent) {
    if (newParent.id === group.parent_id) throw fail('Group is already associated to the parent group.');
    if (newParent.traversal_ids.includes(group.id)) throw fail('Cannot transfer group to one of its subgroup.');
    if (!(await canCreateSubgroup(db, user, newParent))) throw fail('You don\'t have enough permissions.');
  } else {
    if (!group.parent_id) throw fail('Group is already a root group.');
    if (!user.admin && !user.can_create_group) throw fail('You don\'t have enough permissions.');
    if (RESERVED_TOP_LEVEL.has(group.path.toLowerCase())) throw fail(`${group.path} is a reserved name`);
  }
  const newFullPath = newParent ? `${newParent.full_path}/${group.path}` : group.path;
  const newFullName = newParent ? `${newParent.full_name} / ${group.name}` : group.name;
  if (await fullPathTaken(db, newFullPath, group.id)) throw fail('The parent group already has a subgroup or a project with the same path.');
  const prefix = newParent ? newParent.traversal_ids : [];
  const depth = group.traversal_ids.length; // the group's own position (1-based) in its descendants' traversal_ids
  const cap = newParent ? newParent.visibility_level : 20;
  return db.transaction().execute(async (trx) => {
    await sql`
      update namespaces set
        full_path = ${newFullPath} || substr(full_path, ${group.full_path.length + 1}),
        full_name = ${newFullName} || substr(full_name, ${group.full_name.length + 1}),
        traversal_ids = ${prefix}::int[] || traversal_ids[${depth}:],
        parent_id = case when id = ${group.id} then ${newParent?.id ?? null}::int else parent_id end,
        visibility_level = least(visibility_level, ${cap}),
        updated_at = now()
      where traversal_ids @> array[${group.id}]::int[]`.execute(trx);
    await sql`
      update projects set visibility_level = least(visibility_level, ${cap})
       where namespace_id in (select id from namespaces where traversal_ids @> array[${group.id}]::int[])`.execute(trx);
    return trx.selectFrom('namespaces').selectAll().where('id', '=', group.id).executeTakeFirstOrThrow();
  });
}

export { GROUP_SETTING_DEFAULTS };
