import type { DeployAccessLevel, ProtectedEnvironment } from '../db/schema/environments.js';
import { accessLevelDescription, type AccessLevelNames } from './access_levels.js';

/** A deploy access level: a role's description, or the user's or group's name (GitLab's humanize). */
export function presentDeployAccessLevel(l: DeployAccessLevel, names: AccessLevelNames) {
  return {
    id: l.id,
    // GitLab's column default: user and group levels show 40.
    access_level: l.access_level ?? 40,
    access_level_description: accessLevelDescription(l, names),
    user_id: l.user_id,
    group_id: l.group_id,
    group_inheritance_type: l.group_inheritance_type,
  };
}

export function presentProtectedEnvironment(env: ProtectedEnvironment, levels: DeployAccessLevel[], names: AccessLevelNames) {
  return {
    name: env.name,
    deploy_access_levels: levels.filter((l) => l.protected_environment_id === env.id).map((l) => presentDeployAccessLevel(l, names)),
    required_approval_count: env.required_approval_count,
  };
}
