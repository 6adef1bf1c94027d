// Columns migration 0840_commit_statuses adds to ci_builds for external commit statuses
// (GitLab's GenericCommitStatus rows, type 'GenericCommitStatus'); declaration merging keeps ci.ts untouched.
declare module './ci.js' {
  interface CiBuildsTable {
    target_url: string | null;
    description: string | null;
  }
}

export {};
