import { sql, type Kysely } from 'kysely';

// Members: the onboarding tasks an inviter may attach to a new member, and access-level SQL
// functions that follow GitLab's authorization rules exactly:
// - a group shared with another group grants its access to the DIRECT members of the invited
//   group only (GitLab does not pass a share on to members inherited from the invited group's
//   ancestors);
// - a project shared with a group reaches everyone who has access to that group (its members,
//   members of its ancestors, and direct members of groups the group is shared with), capped at
//   the link's level;
// - shares of a project are ignored while its namespace has share_with_group_lock set;
// - minimal access (5) in a group grants nothing on its projects.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table members add column tasks_to_be_done text[] not null default '{}'`.execute(db);
  await sql`alter table members add column tasks_project_id integer references projects(id) on delete set null`.execute(db);
  await sql`create index members_source on members (source_type, source_id)`.execute(db);

  await sql`
    create or replace function group_authorizations(uid integer)
    returns table(group_id integer, access_level integer) language sql stable as $$
      select n.id, m.access_level from members m
        join namespaces n on n.traversal_ids @> array[m.source_id]
       where m.user_id = uid and m.source_type = 'Namespace' and n.type = 'Group'
         and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
      union all
      select s.id, least(l.group_access, m.access_level) from members m
        join group_group_links l on l.shared_with_group_id = m.source_id
        join namespaces s on s.traversal_ids @> array[l.shared_group_id]
       where m.user_id = uid and m.source_type = 'Namespace' and m.access_level > 5
         and (l.expires_at is null or l.expires_at > current_date)
         and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
    $$`.execute(db);

  await sql`
    create or replace function project_authorizations(uid integer)
    returns table(project_id integer, access_level integer) language sql stable as $$
      select p.id, 50 from projects p join namespaces n on n.id = p.namespace_id
       where n.type = 'User' and n.owner_id = uid
      union all
      select m.source_id, m.access_level from members m
       where m.user_id = uid and m.source_type = 'Project'
         and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
      union all
      select p.id, ga.access_level from group_authorizations(uid) ga
        join projects p on p.namespace_id = ga.group_id
       where ga.access_level >= 10
      union all
      select l.project_id, least(l.group_access, ga.access_level) from group_authorizations(uid) ga
        join project_group_links l on l.group_id = ga.group_id
        join projects p on p.id = l.project_id
        join namespaces pn on pn.id = p.namespace_id
       where ga.access_level >= 10 and (l.expires_at is null or l.expires_at > current_date)
         and (pn.settings -> 'share_with_group_lock') is distinct from 'true'::jsonb
    $$`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('irreversible');
}
