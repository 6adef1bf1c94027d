import type { Generated, Selectable } from 'kysely';
import type { Timestamp } from './core.js';

export interface ProtectedBranchesTable {
  id: Generated<number>;
  project_id: number;
  name: string;
  allow_force_push: Generated<boolean>;
  code_owner_approval_required: Generated<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type ProtectedBranch = Selectable<ProtectedBranchesTable>;

export interface ProtectedBranchAccessLevelsTable {
  id: Generated<number>;
  protected_branch_id: number;
  kind: 'push' | 'merge' | 'unprotect';
  access_level: number | null;
  user_id: number | null;
  group_id: number | null;
  created_at: Timestamp;
}
export type ProtectedBranchAccessLevel = Selectable<ProtectedBranchAccessLevelsTable>;

export interface BranchTables {
  protected_branches: ProtectedBranchesTable;
  protected_branch_access_levels: ProtectedBranchAccessLevelsTable;
}
