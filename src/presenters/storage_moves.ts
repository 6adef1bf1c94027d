import type { Selectable } from 'kysely';
import type { RepositoryStorageMovesTable } from '../db/schema/storage_moves.js';
import { iso } from './users.js';

export type StorageMove = Selectable<RepositoryStorageMovesTable>;

/** GitLab shows the state machine's human name: cleanup_failed is "cleanup failed". */
export function presentStorageMove(move: StorageMove, field: string, container: Record<string, unknown> | null) {
  return {
    id: Number(move.id),
    created_at: iso(move.created_at)!,
    state: move.state.replace('_', ' '),
    source_storage_name: move.source_storage_name,
    destination_storage_name: move.destination_storage_name,
    error_message: move.error_message,
    [field]: container,
  };
}
