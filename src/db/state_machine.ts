import type { Selectable } from 'kysely';
import type { Database } from './index.js';
import type { DB } from './types.js';

/**
 * State machines as data. A machine names its table and state column and, for each event, the
 * states it leaves (`from`) and the state it reaches (`to`; none for a guard, an update that
 * only holds while the row is in one of those states). Every change is one guarded
 * `UPDATE ... WHERE <column> = ANY(from)`, so two processes racing on the same row can never both
 * make it: the loser's update matches no row, and its caller answers as it always has.
 */

export type StateValue = string | number;

export interface Transition<S extends StateValue = StateValue> {
  readonly from: readonly S[];
  readonly to?: S;
}

type StatesOf<T extends Record<string, Transition>> = T[keyof T]['from'][number] | NonNullable<T[keyof T]['to']>;

export interface Machine<Table extends keyof DB, T extends Record<string, Transition>> {
  readonly table: Table;
  readonly column: keyof DB[Table] & string;
  readonly transitions: T;
  /** Whether `event` may leave `state`. */
  can(event: keyof T, state: StatesOf<T> | StateValue): boolean;
}

export type EventOf<M> = M extends Machine<any, infer T> ? keyof T & string : never;
export type StateOf<M> = M extends Machine<any, infer T> ? StatesOf<T> : never;

export function defineMachine<Table extends keyof DB, const T extends Record<string, Transition>>(
  table: Table,
  column: keyof DB[Table] & string,
  transitions: T,
): Machine<Table, T> {
  return {
    table,
    column,
    transitions,
    can: (event, state) => (transitions[event].from as readonly StateValue[]).includes(state),
  };
}

export interface TransitionOptions<S> {
  /** Other columns the change sets (timestamps, who did it...). */
  set?: Record<string, unknown>;
  /** Only some of the states the event leaves (each must be one of them). */
  from?: readonly S[];
  /** More conditions the row must meet (a head that has not moved, a job untouched since...). */
  where?: (qb: any) => any;
}

/** Which rows: one id, several ids, or a condition on the rows (`qb => qb.where(...)`). */
type Target = number | readonly number[] | ((qb: any) => any);

/**
 * Makes `event` on the row(s) still in one of its `from` states, in `db` (a transaction or not).
 * One id: the updated row, or null when the row was not in such a state (or absent). Several
 * ids or a condition: the rows that changed.
 */
export async function transition<Table extends keyof DB, T extends Record<string, Transition>>(
  db: Database, machine: Machine<Table, T>, target: number, event: keyof T & string, opts?: TransitionOptions<StatesOf<T>>,
): Promise<Selectable<DB[Table]> | null>;
export async function transition<Table extends keyof DB, T extends Record<string, Transition>>(
  db: Database, machine: Machine<Table, T>, target: readonly number[] | ((qb: any) => any), event: keyof T & string, opts?: TransitionOptions<StatesOf<T>>,
): Promise<Selectable<DB[Table]>[]>;
export async function transition<Table extends keyof DB, T extends Record<string, Transition>>(
  db: Database, machine: Machine<Table, T>, target: Target, event: keyof T & string, opts: TransitionOptions<StatesOf<T>> = {},
): Promise<Selectable<DB[Table]> | null | Selectable<DB[Table]>[]> {
  const t = machine.transitions[event];
  const allowed = t.from as readonly StateValue[];
  const from = opts.from ?? allowed;
  const stray = (from as readonly StateValue[]).filter((s) => !allowed.includes(s));
  if (stray.length) throw new Error(`${machine.table}: ${event} does not leave ${stray.join(', ')}`);
  if (typeof target !== 'function' && typeof target !== 'number' && !target.length) return [];
  const set = t.to === undefined ? { ...opts.set } : { [machine.column]: t.to, ...opts.set };
  let q: any = (db as any).updateTable(machine.table).set(set);
  if (typeof target === 'number') q = q.where('id', '=', target);
  else if (typeof target === 'function') q = target(q);
  else q = q.where('id', 'in', target);
  q = q.where(machine.column, 'in', from);
  if (opts.where) q = opts.where(q);
  q = q.returningAll();
  if (typeof target === 'number') return ((await q.executeTakeFirst()) as Selectable<DB[Table]> | undefined) ?? null;
  return (await q.execute()) as Selectable<DB[Table]>[];
}
