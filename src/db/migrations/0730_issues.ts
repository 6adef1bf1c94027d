import { sql, type Kysely } from 'kysely';

// Issues: which merge requests would close which issues (GitLab's merge_requests_closing_issues),
// kept from the merge request's description and commit messages, so an issue's
// merge_requests_count and its closed_by list are one indexed read.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table merge_requests_closing_issues (
      merge_request_id integer not null references merge_requests(id) on delete cascade,
      issue_id integer not null references issues(id) on delete cascade,
      created_at timestamptz not null default now(),
      primary key (merge_request_id, issue_id)
    )`.execute(db);
  await sql`create index merge_requests_closing_issues_issue on merge_requests_closing_issues (issue_id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists merge_requests_closing_issues`.execute(db);
}
