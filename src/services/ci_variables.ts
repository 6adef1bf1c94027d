import { validationFailed } from '../plugins/errors.js';

/**
 * The rules of a CI/CD variable's fields, GitLab's, for every kind of variable: instance, group
 * and project variables (api/ci_variables), pipeline schedule variables (api/pipeline_schedules).
 * A field left undefined is not checked (a kind that does not have it, or an update that keeps it).
 */
export const VARIABLE_TYPES = ['env_var', 'file'] as const;
export type VariableType = (typeof VARIABLE_TYPES)[number];

/** GitLab's mask rules: one line of at least 8 characters from the Base64 alphabet and @ : . ~ - _ */
const MASKABLE = /^[a-zA-Z0-9_+=/@:.~-]{8,}$/;
export const MAX_VALUE_LENGTH = 10_000;

export interface VariableFields {
  key?: string;
  value?: string;
  variable_type?: string;
  masked?: boolean;
  environment_scope?: string;
}

/** The errors of a variable's fields, GitLab's words, by field (empty when it is valid). */
export function variableErrors(v: VariableFields): Record<string, string[]> {
  const errors: Record<string, string[]> = {};
  if (v.key !== undefined) {
    if (!v.key) errors.key = ["can't be blank"];
    else if (v.key.length > 255) errors.key = ['is too long (maximum is 255 characters)'];
    else if (!/^[a-zA-Z0-9_]+$/.test(v.key)) errors.key = ["can contain only letters, digits and '_'."];
  }
  if (v.value !== undefined) {
    if (v.masked && !MASKABLE.test(v.value)) errors.value = ['is invalid'];
    if (v.value.length > MAX_VALUE_LENGTH) errors.value = [`is too long (maximum is ${MAX_VALUE_LENGTH} characters)`];
  }
  if (v.variable_type !== undefined && !(VARIABLE_TYPES as readonly string[]).includes(v.variable_type)) errors.variable_type = ['is not included in the list'];
  if (v.environment_scope !== undefined && (!v.environment_scope || v.environment_scope.length > 255)) errors.environment_scope = ['is invalid'];
  return errors;
}

/** Throws GitLab's 400 {"message":{"field":[...]}} when a variable's fields are invalid. */
export function validateVariable(v: VariableFields): void {
  const errors = variableErrors(v);
  if (Object.keys(errors).length) throw validationFailed(errors);
}
