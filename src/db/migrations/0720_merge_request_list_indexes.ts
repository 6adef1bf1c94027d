import { sql, type Kysely } from 'kysely';

// Merge request lists (src/finders/merge_requests.ts) read a page as an index walk in the list's
// order that stops at the page's end, and count separately. 0700 covers a project's list by state
// and creation (target_project_id, state_id, created_at, id) and by update without state; these
// add the other orders GitLab's lists ask for: a project's every state by creation, a state by
// update, and the global list (GET /merge_requests, a user's every readable project), whose page
// walks the whole table in order and keeps the rows of readable projects.
const INDEXES: [name: string, columns: string][] = [
  ['merge_requests_target_created', 'target_project_id, created_at desc, id desc'],
  ['merge_requests_target_state_updated', 'target_project_id, state_id, updated_at desc, id desc'],
  ['merge_requests_state_created', 'state_id, created_at desc, id desc'],
  ['merge_requests_state_updated', 'state_id, updated_at desc, id desc'],
  ['merge_requests_created', 'created_at desc, id desc'],
  ['merge_requests_updated', 'updated_at desc, id desc'],
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const [name, columns] of INDEXES) await sql.raw(`create index ${name} on merge_requests (${columns})`).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const [name] of INDEXES) await sql.raw(`drop index if exists ${name}`).execute(db);
}
