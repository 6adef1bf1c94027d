/** The largest value of PostgreSQL's `integer`, the type of every id column. */
export const MAX_ROW_ID = 2147483647;

/**
 * A row id from user input (a number or a string of digits), or undefined when it cannot name
 * a row: an id beyond the integer range does not exist, and asking PostgreSQL about it would
 * be an error rather than "not found".
 */
export function rowId(value: unknown): number | undefined {
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : NaN;
  return Number.isInteger(n) && n >= 1 && n <= MAX_ROW_ID ? n : undefined;
}
