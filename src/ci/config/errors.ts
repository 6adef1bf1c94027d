// Errors the repository functions given to the compiler (types.ts RepositoryAccess) may throw.

/** rules:changes:compare_to names no commit of the repository (GitLab's Clause::ParseError). */
export class InvalidCompareToError extends Error {
  constructor() {
    super('rules:changes:compare_to is not a valid ref');
  }
}
