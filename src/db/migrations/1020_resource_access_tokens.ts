import { sql, type Kysely } from 'kysely';

// Project and group access tokens (GitLab's resource access tokens). Each token belongs to a bot
// user (user_type 'project_bot') made for it, a direct member of one project or group at the
// token's access level; the token itself is an ordinary personal access token of the bot (digest
// stored, the same authentication path). `resource_bots` says which project or group a bot
// belongs to (source_type 'Project' or 'Namespace', as in members).
//
// A bot has no credential but its tokens, so whatever ends its membership (the members API, a
// deleted project or group, a removed user) must end its tokens too: a trigger on members revokes
// the bot's tokens when its membership of its own resource goes, in the same transaction, so no
// caller of any delete path can forget it.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table resource_bots (
      user_id integer primary key references users(id) on delete cascade,
      source_type text not null check (source_type in ('Project', 'Namespace')),
      source_id integer not null,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index resource_bots_source on resource_bots (source_type, source_id)`.execute(db);
  await sql`
    create function cairn_revoke_resource_bot_tokens() returns trigger language plpgsql as $$
    begin
      update personal_access_tokens t set revoked = true, updated_at = now()
       where t.user_id = old.user_id and t.revoked = false
         and exists (select 1 from resource_bots b
                      where b.user_id = old.user_id and b.source_type = old.source_type and b.source_id = old.source_id);
      return null;
    end $$`.execute(db);
  await sql`
    create trigger members_revoke_resource_bot_tokens after delete on members
      for each row execute function cairn_revoke_resource_bot_tokens()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger if exists members_revoke_resource_bot_tokens on members`.execute(db);
  await sql`drop function if exists cairn_revoke_resource_bot_tokens()`.execute(db);
  await sql`drop table resource_bots`.execute(db);
}
