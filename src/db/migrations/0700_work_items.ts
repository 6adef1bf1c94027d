import { sql, type Kysely } from 'kysely';

// Issue tracking and code review: labels, milestones, issues, merge requests, and what hangs off
// any of them (label links and events, award emoji, subscriptions, todos of participation).
// Polymorphic links name their target as (target_type, target_id) with GitLab's class names:
// 'Issue', 'MergeRequest', 'Note', 'Snippet', 'Epic'.
export async function up(db: Kysely<any>): Promise<void> {
  // Per-parent sequences for iids (issues and merge requests per project, milestones per project or
  // group, epics per group): one upsert returns the next value, so two processes never share one.
  await sql`
    create table internal_ids (
      usage text not null,
      parent_id integer not null,
      last_value integer not null,
      primary key (usage, parent_id)
    )`.execute(db);

  await sql`
    create table labels (
      id serial primary key,
      project_id integer references projects(id) on delete cascade,
      group_id integer references namespaces(id) on delete cascade,
      title text not null,
      color text not null,
      description text,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check ((project_id is null) <> (group_id is null))
    )`.execute(db);
  await sql`create unique index labels_project_title on labels (project_id, title) where project_id is not null`.execute(db);
  await sql`create unique index labels_group_title on labels (group_id, title) where group_id is not null`.execute(db);
  // A priority belongs to a (project, label) pair: group labels have one per project that uses them.
  await sql`
    create table label_priorities (
      project_id integer not null references projects(id) on delete cascade,
      label_id integer not null references labels(id) on delete cascade,
      priority integer not null,
      primary key (project_id, label_id)
    )`.execute(db);

  await sql`
    create table milestones (
      id serial primary key,
      iid integer not null,
      project_id integer references projects(id) on delete cascade,
      group_id integer references namespaces(id) on delete cascade,
      title text not null,
      description text,
      state text not null default 'active',
      due_date date,
      start_date date,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check ((project_id is null) <> (group_id is null))
    )`.execute(db);
  await sql`create unique index milestones_project_iid on milestones (project_id, iid) where project_id is not null`.execute(db);
  await sql`create unique index milestones_group_iid on milestones (group_id, iid) where group_id is not null`.execute(db);
  await sql`create unique index milestones_project_title on milestones (project_id, title) where project_id is not null`.execute(db);
  await sql`create unique index milestones_group_title on milestones (group_id, title) where group_id is not null`.execute(db);

  // state_id as GitLab stores it: 1 opened, 2 closed (issues); 1 opened, 2 closed, 3 merged, 4 locked (merge requests).
  await sql`
    create table issues (
      id serial primary key,
      iid integer not null,
      project_id integer not null references projects(id) on delete cascade,
      title text not null,
      description text,
      state_id smallint not null default 1,
      author_id integer references users(id) on delete set null,
      milestone_id integer references milestones(id) on delete set null,
      confidential boolean not null default false,
      discussion_locked boolean,
      issue_type text not null default 'issue',
      due_date date,
      time_estimate integer not null default 0,
      total_time_spent integer not null default 0,
      closed_at timestamptz,
      closed_by_id integer references users(id) on delete set null,
      moved_to_id integer references issues(id) on delete set null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index issues_project_iid on issues (project_id, iid)`.execute(db);
  await sql`create index issues_project_state_created on issues (project_id, state_id, created_at desc, id desc)`.execute(db);
  await sql`create index issues_author on issues (author_id)`.execute(db);
  await sql`create index issues_milestone on issues (milestone_id) where milestone_id is not null`.execute(db);
  await sql`
    create table issue_assignees (
      issue_id integer not null references issues(id) on delete cascade,
      user_id integer not null references users(id) on delete cascade,
      primary key (issue_id, user_id)
    )`.execute(db);
  await sql`create index issue_assignees_user on issue_assignees (user_id)`.execute(db);

  await sql`
    create table merge_requests (
      id serial primary key,
      iid integer not null,
      target_project_id integer not null references projects(id) on delete cascade,
      source_project_id integer references projects(id) on delete set null,
      source_branch text not null,
      target_branch text not null,
      title text not null,
      description text,
      state_id smallint not null default 1,
      author_id integer references users(id) on delete set null,
      milestone_id integer references milestones(id) on delete set null,
      merge_status text not null default 'unchecked',
      merge_error text,
      merge_when_pipeline_succeeds boolean not null default false,
      merge_user_id integer references users(id) on delete set null,
      merge_params jsonb not null default '{}',
      merged_at timestamptz,
      closed_at timestamptz,
      closed_by_id integer references users(id) on delete set null,
      merge_commit_sha text,
      squash_commit_sha text,
      squash boolean not null default false,
      discussion_locked boolean,
      allow_collaboration boolean not null default false,
      time_estimate integer not null default 0,
      total_time_spent integer not null default 0,
      -- The source head and diff bases as last seen (diff_refs), and whether they conflict.
      head_sha text,
      base_sha text,
      start_sha text,
      has_conflicts boolean not null default false,
      merge_ref_sha text,
      rebase_in_progress boolean not null default false,
      head_pipeline_id integer,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index merge_requests_target_iid on merge_requests (target_project_id, iid)`.execute(db);
  await sql`create index merge_requests_target_state_created on merge_requests (target_project_id, state_id, created_at desc, id desc)`.execute(db);
  await sql`create index merge_requests_target_updated on merge_requests (target_project_id, updated_at desc, id desc)`.execute(db);
  await sql`create index merge_requests_author on merge_requests (author_id, created_at desc)`.execute(db);
  await sql`create index merge_requests_source on merge_requests (source_project_id, source_branch)`.execute(db);
  await sql`create index merge_requests_target_branch on merge_requests (target_project_id, target_branch)`.execute(db);
  // Only one open merge request per source and target branch pair (GitLab's validation, made a constraint).
  await sql`create unique index merge_requests_one_open on merge_requests (target_project_id, source_project_id, source_branch, target_branch) where state_id = 1`.execute(db);
  for (const kind of ['assignees', 'reviewers', 'approvals']) {
    await sql`
      create table ${sql.raw(`merge_request_${kind}`)} (
        merge_request_id integer not null references merge_requests(id) on delete cascade,
        user_id integer not null references users(id) on delete cascade,
        created_at timestamptz not null default now(),
        primary key (merge_request_id, user_id)
      )`.execute(db);
    await sql`create index ${sql.raw(`merge_request_${kind}_user`)} on ${sql.raw(`merge_request_${kind}`)} (user_id)`.execute(db);
  }

  await sql`
    create table label_links (
      label_id integer not null references labels(id) on delete cascade,
      target_type text not null,
      target_id integer not null,
      created_at timestamptz not null default now(),
      primary key (target_type, target_id, label_id)
    )`.execute(db);
  await sql`create index label_links_label on label_links (label_id, target_type)`.execute(db);
  // Label changes are records of their own, not notes (the spec).
  await sql`
    create table resource_label_events (
      id serial primary key,
      action text not null,
      target_type text not null,
      target_id integer not null,
      label_id integer references labels(id) on delete set null,
      user_id integer references users(id) on delete set null,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index resource_label_events_target on resource_label_events (target_type, target_id, created_at)`.execute(db);

  await sql`
    create table award_emoji (
      id serial primary key,
      name text not null,
      user_id integer not null references users(id) on delete cascade,
      awardable_type text not null,
      awardable_id integer not null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index award_emoji_once on award_emoji (awardable_type, awardable_id, user_id, name)`.execute(db);
  await sql`create index award_emoji_user on award_emoji (user_id, name)`.execute(db);

  await sql`
    create table subscriptions (
      user_id integer not null references users(id) on delete cascade,
      subscribable_type text not null,
      subscribable_id integer not null,
      project_id integer references projects(id) on delete cascade,
      subscribed boolean not null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      primary key (subscribable_type, subscribable_id, user_id)
    )`.execute(db);

  // Minimal group epics (tier: ultimate in GitLab): a noteable of groups.
  await sql`
    create table epics (
      id serial primary key,
      iid integer not null,
      group_id integer not null references namespaces(id) on delete cascade,
      title text not null,
      description text,
      state_id smallint not null default 1,
      author_id integer references users(id) on delete set null,
      confidential boolean not null default false,
      start_date date,
      due_date date,
      closed_at timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index epics_group_iid on epics (group_id, iid)`.execute(db);

  // Notes of one noteable, newest or oldest first, and a thread's notes.
  await sql`create index notes_noteable_id on notes (noteable_type, noteable_id, id) where noteable_id is not null`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('irreversible');
}
