import { sql, type Kysely } from 'kysely';

// Access rules, defined once. What level a user has on a group or a project is answered by two
// views, and every other question (one user on one project, one user's every project, every user
// of one project, ...) is a filter on them, through the functions below. They replace the rule
// texts of 0001/0250 (project_authorizations, group_authorizations), 0051 (project_access_level)
// and the TypeScript copies (groupAccessLevel, listProjectUsers), which no longer hold rules.
//
// The rules, after GitLab's:
// - a membership counts while it is active, is not a pending access request and has not expired
//   (membership_active); a share counts until it expires (share_active);
// - membership of a group gives that level on the group and on all its subgroups;
// - a group shared with another group gives the share's level, at most, to the DIRECT members of
//   the invited group (not to members inherited from the invited group's ancestors), on the shared
//   group and its subgroups; minimal access in the invited group gets nothing from a share;
// - on a project: direct membership; 50 for the owner of a personal namespace; everyone's level on
//   the project's group; and, for each group the project is shared with (unless its namespace sets
//   share_with_group_lock), everyone's level on that group capped at the share's level;
// - a level from a group below Guest (minimal access, 5) gives nothing on projects.
//
// Why views with flat branches rather than one function calling another: PostgreSQL pushes a
// filter on a view's column (user_id = $1, project_id = $2) into every branch of a UNION ALL, but
// never a join condition into a subquery; so each branch joins members, shares and namespaces
// itself, and the planner can walk from the user's memberships (one user's every project) or from
// the project (every user of one project, or one pair) with indexes either way. Each tree join
// states its condition twice, once for each index: `x = any(tree)` for the btree on the member
// side, `tree @> array[x]` for the GIN index on namespaces.traversal_ids. The two ways into a
// group tree are written once (reachTree) and used for a group itself, a project's group and the
// groups a project is shared with.
//
// The functions are PL/pgSQL with a generic plan: the plan of these unions costs milliseconds to
// make, so each connection makes it once and reuses it. That matters most on PGlite, where the
// app's statements are not prepared and would plan an inlined view on every call. The callers see
// an opaque function; they filter and join its answer. A caller that must correlate per row may
// use a view directly (users without projects: one anti-join rather than a call per user).

/** A member `m` reaches the group tree `tree` (the group's traversal_ids): the rows, with the level each gives. */
function reachTree(tree: string): { joins: string; level: string }[] {
  return [
    // Membership of the group or one of its ancestors.
    {
      joins: `join members m on m.source_type = 'Namespace' and m.source_id = any(${tree}) and ${tree} @> array[m.source_id]
                and membership_active(m)`,
      level: 'm.access_level',
    },
    // Direct membership of a group that the group or an ancestor is shared with, capped by the share.
    {
      joins: `join group_group_links gl on gl.shared_group_id = any(${tree}) and ${tree} @> array[gl.shared_group_id]
                and share_active(gl.expires_at)
              join members m on m.source_type = 'Namespace' and m.source_id = gl.shared_with_group_id
                and m.access_level > 5 and membership_active(m)`,
      level: 'least(gl.group_access, m.access_level)',
    },
  ];
}

const GUEST = 10;

function groupAccessGrants(): string {
  return reachTree('g.traversal_ids')
    .map((r) => `select m.user_id, g.id as group_id, ${r.level} as access_level
                   from namespaces g ${r.joins}
                  where g.type = 'Group'`)
    .join('\n  union all\n');
}

function projectAccessGrants(): string {
  const ownerAndDirect = [
    `select n.owner_id as user_id, p.id as project_id, 50 as access_level
       from projects p join namespaces n on n.id = p.namespace_id
      where n.type = 'User'`,
    `select m.user_id, m.source_id, m.access_level
       from members m
      where m.source_type = 'Project' and membership_active(m)`,
  ];
  const fromGroup = reachTree('n.traversal_ids').map(
    (r) => `select m.user_id, p.id, ${r.level}
              from projects p join namespaces n on n.id = p.namespace_id ${r.joins}
             where n.type = 'Group' and ${r.level} >= ${GUEST}`,
  );
  const fromShares = reachTree('sg.traversal_ids').map(
    (r) => `select m.user_id, p.id, least(pl.group_access, ${r.level})
              from project_group_links pl
              join projects p on p.id = pl.project_id
              join namespaces pn on pn.id = p.namespace_id
              join namespaces sg on sg.id = pl.group_id ${r.joins}
             where share_active(pl.expires_at) and (pn.settings -> 'share_with_group_lock') is distinct from 'true'::jsonb
               and sg.type = 'Group' and least(pl.group_access, ${r.level}) >= ${GUEST}`,
  );
  return [...ownerAndDirect, ...fromGroup, ...fromShares].join('\n  union all\n');
}

export async function up(db: Kysely<any>): Promise<void> {
  // A user's group memberships (source_type = 'Namespace' and user_id = $1, perhaps with the
  // source) are where a grant starts from the user's side: with (user_id) alone, a planner
  // without statistics (PGlite is never analyzed) took the (source_type, source_id, user_id)
  // index and read every group membership. This one serves every lookup members_user did.
  await sql`create index members_user_source on members (user_id, source_type, source_id)`.execute(db);
  await sql`drop index members_user`.execute(db);

  // Small enough for PostgreSQL to inline: callers' indexes and filters work through them.
  await sql`
    create or replace function membership_active(m members) returns boolean language sql stable as $$
      select m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
    $$`.execute(db);
  await sql`
    create or replace function share_active(expires_at date) returns boolean language sql stable as $$
      select expires_at is null or expires_at > current_date
    $$`.execute(db);

  // One row per way a user reaches a group or a project; a user's level is the highest of them.
  await sql.raw(`create or replace view group_access_grants as\n  ${groupAccessGrants()}`).execute(db);
  await sql.raw(`create or replace view project_access_grants as\n  ${projectAccessGrants()}`).execute(db);

  await sql`
    create or replace function group_access_level(uid integer, gid integer)
    returns integer language plpgsql stable set plan_cache_mode = force_generic_plan as $$
    begin
      return (select coalesce(max(a.access_level), 0) from group_access_grants a where a.user_id = uid and a.group_id = gid);
    end $$`.execute(db);
  await sql`
    create or replace function project_access_level(uid integer, pid integer)
    returns integer language plpgsql stable set plan_cache_mode = force_generic_plan as $$
    begin
      return (select coalesce(max(a.access_level), 0) from project_access_grants a where a.user_id = uid and a.project_id = pid);
    end $$`.execute(db);
  // A user's every group / project, a row per grant (a project may come more than once).
  await sql`
    create or replace function group_authorizations(uid integer)
    returns table(group_id integer, access_level integer) language plpgsql stable rows 100
    set plan_cache_mode = force_generic_plan as $$
    begin
      return query select a.group_id, a.access_level from group_access_grants a where a.user_id = uid;
    end $$`.execute(db);
  await sql`
    create or replace function project_authorizations(uid integer)
    returns table(project_id integer, access_level integer) language plpgsql stable rows 100
    set plan_cache_mode = force_generic_plan as $$
    begin
      return query select a.project_id, a.access_level from project_access_grants a where a.user_id = uid;
    end $$`.execute(db);
  // Every user of one project, a row per grant.
  await sql`
    create or replace function project_authorized_users(pid integer)
    returns table(user_id integer, access_level integer) language plpgsql stable rows 100
    set plan_cache_mode = force_generic_plan as $$
    begin
      return query select a.user_id, a.access_level from project_access_grants a where a.project_id = pid;
    end $$`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('irreversible');
}
