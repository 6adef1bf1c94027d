import type { Generated, Selectable } from 'kysely';
import type { Timestamp } from './core.js';

/** Forks (migration 0730_forks): one network per root project, one member row per project in it. */
export interface ForkNetworksTable {
  id: Generated<number>;
  /** Null once the root project was deleted (or unlinked); the network lives on for its forks. */
  root_project_id: number | null;
  deleted_root_project_name: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ForkNetworkMembersTable {
  project_id: number;
  fork_network_id: number;
  /** The project this one was forked from; null for the root, and once that project is gone. */
  forked_from_project_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type ForkNetworkMember = Selectable<ForkNetworkMembersTable>;

export interface ForkTables {
  fork_networks: ForkNetworksTable;
  fork_network_members: ForkNetworkMembersTable;
}
