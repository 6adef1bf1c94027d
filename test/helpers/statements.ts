import type { Kysely } from 'kysely';

/**
 * Runs `fn` and returns the SQL statements the database received meanwhile, through every
 * Kysely executor (query builders, raw `sql`, transactions), to check that a list costs a
 * fixed number of statements whatever its length (no N+1). Counts everything that runs in this
 * process while `fn` does, so call it with nothing else going on.
 */
export async function recordStatements<T>(db: Kysely<any>, fn: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
  let owner: any = db.getExecutor();
  while (owner && !Object.prototype.hasOwnProperty.call(owner, 'executeQuery')) owner = Object.getPrototypeOf(owner);
  if (!owner) throw new Error('no executeQuery to observe');
  const original = owner.executeQuery;
  const statements: string[] = [];
  owner.executeQuery = function (this: unknown, compiled: { sql: string }, ...rest: unknown[]) {
    statements.push(compiled.sql);
    return original.call(this, compiled, ...rest);
  };
  try {
    return { result: await fn(), statements };
  } finally {
    owner.executeQuery = original;
  }
}
