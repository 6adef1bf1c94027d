import { sql, type Kysely } from 'kysely';

// What the CI engine (src/ci/jobs/state.ts) keeps beyond migration 0800:
//  - ci_builds.enqueue_immediately: a retried or played job goes to pending as soon as its
//    predecessors allow, even when its `when` is manual or delayed (GitLab's enqueue_immediately);
//  - ci_job_variables: variables given when a manual job is played (job_variables_attributes),
//    values encrypted as CI variables are.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table ci_builds add column enqueue_immediately boolean not null default false`.execute(db);
  await sql`
    create table ci_job_variables (
      id serial primary key,
      job_id integer not null references ci_builds(id) on delete cascade,
      key text not null,
      value_encrypted text not null,
      variable_type text not null default 'env_var',
      unique (job_id, key)
    )`.execute(db);
  await sql`create index ci_builds_pipeline_name on ci_builds (pipeline_id, name)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index ci_builds_pipeline_name`.execute(db);
  await sql`drop table ci_job_variables`.execute(db);
  await sql`alter table ci_builds drop column enqueue_immediately`.execute(db);
}
