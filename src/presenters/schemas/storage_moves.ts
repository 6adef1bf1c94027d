import { Type, type TSchema } from 'typebox';
import { Nullable, Timestamp, strict } from './common.js';

/** GitLab's BasicGroupDetails, as a group storage move shows its group. */
export const BasicGroupSchema = Type.Object({ id: Type.Integer(), web_url: Type.String(), name: Type.String() }, strict);

export const StorageMoveStateSchema = Type.Union(
  ['initial', 'scheduled', 'started', 'replicated', 'finished', 'failed', 'cleanup failed'].map((s) => Type.Literal(s)),
);

/** GitLab's <Kind>RepositoryStorageMove: the move and, under `field`, its container. */
export function storageMoveSchema(field: string, container: TSchema) {
  return Type.Object(
    {
      id: Type.Integer(),
      created_at: Timestamp,
      state: StorageMoveStateSchema,
      source_storage_name: Type.String(),
      destination_storage_name: Type.String(),
      error_message: Nullable(Type.String()),
      [field]: Nullable(container),
    },
    strict,
  );
}
