import { sql } from 'kysely';

/**
 * `count(*) over ()`: how many rows the filtered query has before limit and offset, on every row
 * of the page, so that a page and its total (X-Total) come from one statement.
 */
export const totalCount = sql<number>`(count(*) over ())::int`.as('total_count');

/**
 * The page and the total from rows that carry `total_count`. Only a page past the end has no row
 * to read the total from; then `count` runs (on the same filtered query).
 */
export async function pageWithTotal<R extends { total_count: number }>(
  rows: R[],
  offset: number,
  count: () => Promise<number>,
): Promise<{ rows: Omit<R, 'total_count'>[]; total: number }> {
  const total = rows.length ? rows[0].total_count : offset > 0 ? await count() : 0;
  return { rows: rows.map(({ total_count: _total, ...row }) => row), total };
}
