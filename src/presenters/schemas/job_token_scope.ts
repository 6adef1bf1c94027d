import { Type } from 'typebox';
import { strict } from './common.js';

/** GET /projects/:id/job_token_scope. */
export const JobTokenScopeSchema = Type.Object({ inbound_enabled: Type.Boolean(), outbound_enabled: Type.Boolean() }, strict);
/** GitLab's ProjectScopeLink: the answer of POST .../job_token_scope/allowlist. */
export const ProjectScopeLinkSchema = Type.Object({ source_project_id: Type.Integer(), target_project_id: Type.Integer() }, strict);
/** GitLab's GroupScopeLink: the answer of POST .../job_token_scope/groups_allowlist. */
export const GroupScopeLinkSchema = Type.Object({ source_project_id: Type.Integer(), target_group_id: Type.Integer() }, strict);
/** GitLab's BasicGroupDetails: the groups of .../groups_allowlist. */
export const BasicGroupDetailsSchema = Type.Object({ id: Type.Integer(), web_url: Type.String(), name: Type.String() }, strict);
