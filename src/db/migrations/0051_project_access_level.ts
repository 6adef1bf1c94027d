import { sql, type Kysely } from 'kysely';

// The caller's level on one project as a SQL function, so that looking a project up and
// computing the caller's access is one statement (every project-scoped request does both).
// Same rules as project_authorizations(uid), restricted to one project. PL/pgSQL, because a
// `language sql` function is planned again on every call (~1 ms); PL/pgSQL caches the plan
// per connection (~0.2 ms).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create or replace function project_access_level(uid integer, pid integer)
    returns integer language plpgsql stable as $$
    begin
      return (
      with proj as (select p.id, p.namespace_id from projects p where p.id = pid),
      ns as (select n.id, n.type, n.owner_id, n.traversal_ids, n.settings from namespaces n join proj on proj.namespace_id = n.id),
      reach as (
        select ns.traversal_ids, 50 as cap from ns where ns.type = 'Group'
        union all
        select g.traversal_ids, l.group_access from project_group_links l
          join namespaces g on g.id = l.group_id
          join ns pn on true
         where l.project_id = pid and (l.expires_at is null or l.expires_at > current_date)
           and ((pn.settings -> 'share_with_group_lock') is distinct from 'true'::jsonb)
      )
      select coalesce(max(level), 0) from (
        select 50 as level from ns where ns.type = 'User' and ns.owner_id = uid
        union all
        select m.access_level from members m
         where m.user_id = uid and m.source_type = 'Project' and m.source_id = pid
           and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
        union all
        select least(r.cap, m.access_level) from reach r
          join members m on m.source_type = 'Namespace' and m.source_id = any(r.traversal_ids)
         where m.user_id = uid and m.access_level >= 10
           and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
        union all
        select least(r.cap, l.group_access, m.access_level) from reach r
          join group_group_links l on l.shared_group_id = any(r.traversal_ids)
          join members m on m.source_type = 'Namespace' and m.source_id = l.shared_with_group_id
         where (l.expires_at is null or l.expires_at > current_date) and m.user_id = uid and m.access_level >= 10
           and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
      ) levels);
    end
    $$`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('irreversible');
}
