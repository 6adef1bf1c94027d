// CI/CD inputs, as GitLab has them: a file's `spec:inputs` header declares typed parameters
// (string, number, boolean, array; `default`, `options`, `regex`), the values come from
// `include:inputs` (or a pipeline's inputs for the main file, or `trigger:include:inputs`), and
// `$[[ inputs.name | function ... ]]` blocks in the rest of the file are replaced by them before
// the file is merged. A block that is a whole YAML value takes the input's type; inside a longer
// string it is its text. Error texts are GitLab's (Gitlab::Ci::Config::Interpolation,
// Ci::Inputs, Gitlab::Ci::Config::Header).
//
// The file is user input: interpolation is bounded (500 000 nodes, 1 MB per string, 10 000
// distinct blocks, 3 functions per block, 1 KB per access path), and blocks are found with RE2.

import { RE2JS } from 're2js';
import { isPlainObject, ReferenceTag } from './yaml.js';

export const INPUT_TYPES = ['array', 'boolean', 'number', 'string'] as const;
export type InputType = (typeof INPUT_TYPES)[number];
export const MAX_INPUT_OPTIONS = 50;
const INPUT_KEYS = ['default', 'description', 'options', 'regex', 'type'];
const MAX_NODES = 500_000;
const MAX_NODE_BYTES = 1024 * 1024;
/** Text that interpolation may add in all (a long input used in many places stays bounded). */
const MAX_ADDED_BYTES = 16 * 1024 * 1024;
const MAX_BLOCKS = 10_000;
const MAX_FUNCTIONS = 3;
const MAX_ACCESS_BYTES = 1024;
const MAX_ACCESS_OBJECTS = 5;

export interface InputSpec {
  name: string;
  type: InputType;
  /** Absent (undefined) when the input is mandatory; a YAML `default: null` is a default too. */
  hasDefault: boolean;
  default: unknown;
  options: unknown[] | null;
  regex: string | null;
}

type Result<T> = { ok: true; value: T } | { ok: false; errors: string[] };

/** The `spec:inputs` of a header document, checked as GitLab's Header::Root entry does. */
export function inputSpecs(header: Record<string, unknown>): Result<InputSpec[]> {
  const errors: string[] = [];
  const unknownRoot = Object.keys(header).filter((k) => k !== 'spec');
  if (unknownRoot.length) errors.push(`header config contains unknown keys: ${unknownRoot.join(', ')}`);
  const spec = header.spec ?? {};
  if (!isPlainObject(spec)) return { ok: false, errors: [...errors, 'header:spec config should be a hash'] };
  // `component` (a CI/CD component's context) is accepted and has no meaning outside the catalog.
  const unknownSpec = Object.keys(spec).filter((k) => k !== 'inputs' && k !== 'component');
  if (unknownSpec.length) errors.push(`header:spec config contains unknown keys: ${unknownSpec.join(', ')}`);
  const inputs = spec.inputs ?? {};
  if (!isPlainObject(inputs)) return { ok: false, errors: [...errors, 'header:spec:inputs config should be a hash'] };
  const out: InputSpec[] = [];
  for (const [name, raw] of Object.entries(inputs)) {
    const path = `header:spec:inputs:${name}`;
    if (!/^[A-Za-z0-9_-]+$/.test(name)) errors.push(`${path} key must be an alphanumeric string`);
    if (raw !== null && !isPlainObject(raw)) {
      errors.push(`${path} config should be a hash`);
      continue;
    }
    const s = raw ?? {};
    const unknown = Object.keys(s).filter((k) => !INPUT_KEYS.includes(k));
    if (unknown.length) errors.push(`${path} config contains unknown keys: ${unknown.join(', ')}`);
    if (s.description !== undefined && s.description !== null && typeof s.description !== 'string' && typeof s.description !== 'number') {
      errors.push(`${path} input description must be an alphanumeric string`);
    }
    if (s.regex !== undefined && s.regex !== null && typeof s.regex !== 'string') errors.push(`${path} input regex should be a string`);
    const type = s.type ?? 'string';
    if (typeof type !== 'string' || !(INPUT_TYPES as readonly string[]).includes(type)) errors.push(`${path} input type unknown value: ${String(type)}`);
    if (s.options !== undefined && s.options !== null) {
      if (!Array.isArray(s.options)) errors.push(`${path} input options should be a array`);
      else if (s.options.length > MAX_INPUT_OPTIONS) errors.push(`${path} config cannot define more than ${MAX_INPUT_OPTIONS} options`);
    }
    out.push({
      name,
      type: type as InputType,
      hasDefault: Object.hasOwn(s, 'default'),
      default: s.default,
      options: Array.isArray(s.options) ? s.options : null,
      regex: typeof s.regex === 'string' ? s.regex : null,
    });
  }
  return errors.length ? { ok: false, errors } : { ok: true, value: out };
}

/** Ruby's #to_s of a YAML value, which is what an input becomes inside a longer string. */
export function rubyToS(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  return rubyInspect(v);
}

function rubyInspect(v: unknown): string {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map(rubyInspect).join(', ')}]`;
  if (isPlainObject(v)) return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)} => ${rubyInspect(x)}`).join(', ')}}`;
  return String(v);
}

/** GitLab's coercion of an input value: strings become their text, other types are read as JSON when given as text. */
function coerce(type: InputType, value: unknown): unknown {
  if (type === 'string') return rubyToS(value);
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

function typeError(type: InputType, value: unknown): boolean {
  switch (type) {
    case 'string':
      return false;
    case 'number':
      return typeof value !== 'number' || !Number.isFinite(value);
    case 'boolean':
      return typeof value !== 'boolean';
    case 'array':
      return !Array.isArray(value);
  }
}

/**
 * The input values a file is interpolated with: `args` (include:inputs, pipeline inputs) checked
 * against the specs, defaults filled in. Errors are GitLab's ("`env` input: ...").
 */
export function resolveInputs(specs: InputSpec[], args: Record<string, unknown>): Result<Record<string, unknown>> {
  const errors: string[] = [];
  const unknown = Object.keys(args).filter((k) => !specs.some((s) => s.name === k));
  if (unknown.length) errors.push(`unknown input arguments: ${unknown.join(', ')}`);
  const values: Record<string, unknown> = {};
  for (const spec of specs) {
    const err = (m: string) => errors.push(`\`${spec.name}\` input: ${m}`);
    const given = Object.hasOwn(args, spec.name) && args[spec.name] !== null && args[spec.name] !== undefined;
    if (!spec.hasDefault && !given) {
      err('required value has not been provided');
      continue;
    }
    const check = (raw: unknown, isDefault: boolean) => {
      const value = coerce(spec.type, raw);
      const which = isDefault ? 'default' : 'provided';
      if (typeError(spec.type, value)) err(`${which} value is not a${spec.type === 'array' ? 'n' : ''} ${spec.type}`);
      if (spec.options) {
        if (spec.type === 'string') {
          if (value !== null && !spec.options.map(rubyToS).includes(value as string)) {
            err(`\`${rubyToS(value)}\` cannot be used because it is not in the list of allowed options`);
          }
        } else if (spec.type === 'number') {
          if (value !== null && !spec.options.includes(value)) err(`\`${rubyToS(value)}\` cannot be used because it is not in the list of the allowed options`);
        } else err('Options can only be used with string and number inputs');
      }
      if (spec.regex !== null) {
        if (spec.type !== 'string') err('RegEx validation can only be used with string inputs');
        else {
          let re: RE2JS | null = null;
          try {
            re = RE2JS.compile(spec.regex);
          } catch {
            err('invalid regular expression');
          }
          if (re && !re.matcher(value as string).find()) err(`${which} value does not match required RegEx pattern`);
        }
      }
    };
    if (spec.hasDefault) check(spec.default, true);
    if (given) check(args[spec.name], false);
    values[spec.name] = coerce(spec.type, given ? args[spec.name] : spec.default);
  }
  return errors.length ? { ok: false, errors } : { ok: true, value: values };
}

// ---- interpolation ---------------------------------------------------------------------------

const BLOCK = RE2JS.compile('\\$\\[\\[\\s*(\\S.*?\\S)\\s*\\]\\]');
const BLOCK_PREFIX = '$[[';

class Halt extends Error {}

interface Block {
  text: string;
  value: unknown;
  errors: string[];
  /** Nodes the value adds wherever it is used (an array or hash input); counted against MAX_NODES. */
  weight?: number;
}

/** Nodes of a value, counting no further than `limit`. */
function nodeCount(v: unknown, limit: number): number {
  let n = 0;
  const stack = [v];
  while (stack.length && n <= limit) {
    const x = stack.pop();
    n++;
    if (Array.isArray(x)) stack.push(...x);
    else if (isPlainObject(x)) stack.push(...Object.values(x));
  }
  return n;
}

/** Ruby's Shellwords.shellescape. */
function shellEscape(s: string): string {
  if (s === '') return "''";
  return s.replace(/[^A-Za-z0-9_\-.,:+/@\n]/g, (c) => `\\${c}`).replace(/\n/g, "'\n'");
}

/** $VAR, ${VAR} and %VAR% of known variables are replaced; unknown ones stay as written (GitLab's expand_existing). */
function expandExisting(text: string, vars: Record<string, string>): string {
  return text.replace(/\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))|%([A-Za-z_][A-Za-z0-9_]*)%/g, (whole, a?: string, b?: string, c?: string) => {
    const name = a ?? b ?? c!;
    return Object.hasOwn(vars, name) ? vars[name] : whole;
  });
}

function applyFunction(expr: string, value: unknown, vars: Record<string, string>): { value: unknown; error?: string } {
  const stringOnly = (name: string) => ({ value: null, error: `error in \`${name}\` function: invalid input type: ${name} can only be used with string inputs` });
  const truncate = /^truncate\(\s*(\d+)\s*,\s*(\d+)\s*\)?$/.exec(expr);
  if (truncate) {
    if (typeof value !== 'string') return stringOnly('truncate');
    const chars = Array.from(value);
    const offset = Number(truncate[1]);
    return { value: offset > chars.length ? '' : chars.slice(offset, offset + Number(truncate[2])).join('') };
  }
  if (expr === 'expand_vars') {
    if (typeof value !== 'string') return stringOnly('expand_vars');
    return { value: expandExisting(value, vars) };
  }
  if (expr === 'posix_escape') {
    if (typeof value !== 'string') return stringOnly('posix_escape');
    return { value: shellEscape(value) };
  }
  return { value: null, error: `no function matching \`${expr}\`: check that the function name, arguments, and types are correct` };
}

function evaluateBlock(text: string, data: string, ctx: Record<string, unknown>, vars: Record<string, string>): Block {
  const [access, ...functions] = data.split('|').map((s) => s.trim());
  // $[[ matrix.X ]] belongs to needs:parallel:matrix expressions, not to inputs: kept as written.
  if (access.split('.')[0] === 'matrix') return { text, value: text, errors: [] };
  const errors: string[] = [];
  const parts = access.split('.');
  const objects = parts.length > MAX_ACCESS_OBJECTS ? [...parts.slice(0, MAX_ACCESS_OBJECTS - 1), parts.slice(MAX_ACCESS_OBJECTS - 1).join('.')] : parts;
  if (objects.length <= 1) errors.push('invalid interpolation access pattern');
  if (Buffer.byteLength(access, 'utf8') > MAX_ACCESS_BYTES) errors.push('maximum interpolation expression size exceeded');
  if (errors.length) return { text, value: null, errors };
  let value: unknown = ctx;
  for (const key of objects) {
    if (!isPlainObject(value) || !Object.hasOwn(value, key)) return { text, value: null, errors: [`unknown interpolation key: \`${key}\``] };
    value = value[key];
  }
  if (functions.length > MAX_FUNCTIONS) return { text, value: null, errors: ['too many functions in interpolation block'] };
  const unknown = functions.filter((f) => !/^truncate\(\s*\d+\s*,\s*\d+\s*\)?$/.test(f) && f !== 'expand_vars' && f !== 'posix_escape');
  if (unknown.length) {
    return { text, value: null, errors: unknown.map((f) => `no function matching \`${f}\`: check that the function name, arguments, and types are correct`) };
  }
  for (const f of functions) {
    const r = applyFunction(f, value, vars);
    if (r.error) return { text, value: null, errors: [r.error] };
    value = r.value;
  }
  return { text, value, errors: [] };
}

/**
 * Replaces the `$[[ ... ]]` blocks of a file's content with input values. `vars` are the
 * variables `expand_vars` may use (those include may use). Stops at the first bad block, as
 * GitLab does, and gives its errors.
 */
export function interpolate(content: unknown, inputs: Record<string, unknown>, vars: Record<string, string>): Result<unknown> {
  const ctx = { inputs };
  const blocks = new Map<string, Block>();
  const errors: string[] = [];
  let visited = 0;
  let added = 0;
  const addBytes = (n: number) => {
    added += n;
    if (added > MAX_ADDED_BYTES) {
      errors.push('config too large');
      throw new Halt();
    }
  };

  const replaceString = (node: string): unknown => {
    if (!node.includes(BLOCK_PREFIX)) return node;
    const found: Block[] = [];
    const m = BLOCK.matcher(node);
    while (m.find()) {
      const text = m.group(0)!;
      let block = blocks.get(text);
      if (!block) {
        block = evaluateBlock(text, m.group(1)!, ctx, vars);
        blocks.set(text, block);
        if (blocks.size > MAX_BLOCKS) {
          errors.push('too many interpolation blocks');
          throw new Halt();
        }
      }
      if (block.errors.length) {
        errors.push(...block.errors);
        throw new Halt();
      }
      found.push(block);
    }
    if (!found.length) return node;
    if (found.length === 1 && found[0].text.length === node.length) {
      // the same array input used in many places must not multiply the configuration without bound
      const b = found[0];
      if (b.weight === undefined) b.weight = typeof b.value === 'object' && b.value !== null ? nodeCount(b.value, MAX_NODES) : 0;
      visited += b.weight;
      if (typeof b.value === 'string') addBytes(b.value.length);
      if (visited > MAX_NODES) {
        errors.push('config too large');
        throw new Halt();
      }
      return b.value;
    }
    let out = node;
    for (const b of found) out = out.split(b.text).join(rubyToS(b.value));
    addBytes(Math.max(0, out.length - node.length));
    return out;
  };

  const walk = (node: unknown): unknown => {
    if (++visited > MAX_NODES) {
      errors.push('config too large');
      throw new Halt();
    }
    if (typeof node === 'string') {
      if (Buffer.byteLength(node, 'utf8') > MAX_NODE_BYTES) {
        errors.push('config node too large');
        throw new Halt();
      }
      return replaceString(node);
    }
    if (Array.isArray(node)) {
      const out: unknown[] = [];
      for (const item of node) {
        const next = walk(item);
        // an array input that is a whole item of an array is spliced into it
        if (typeof item === 'string' && Array.isArray(next)) out.push(...next);
        else out.push(next);
      }
      return out;
    }
    if (node instanceof ReferenceTag) return node;
    if (isPlainObject(node)) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(node)) {
        const key = walk(k);
        out[typeof key === 'string' ? key : rubyToS(key)] = walk(v);
      }
      return out;
    }
    return node;
  };

  try {
    return { ok: true, value: walk(content) };
  } catch (e) {
    if (e instanceof Halt) return { ok: false, errors };
    throw e;
  }
}

/**
 * A file's content with its header applied: `args` checked against `spec:inputs` and the blocks
 * replaced. Without a header, `args` must be empty and the content is used as it is.
 * Errors are joined as GitLab surfaces them (the first three, comma-separated).
 */
export function applyInputs(
  header: Record<string, unknown> | undefined,
  content: unknown,
  args: Record<string, unknown>,
  vars: Record<string, string>,
): { ok: true; value: unknown } | { ok: false; error: string } {
  const fail = (errors: string[]) => ({ ok: false as const, error: errors.slice(0, 3).join(', ') });
  if (!header) return Object.keys(args).length ? fail(['unknown input arguments']) : { ok: true, value: content };
  const specs = inputSpecs(header);
  if (!specs.ok) return fail(specs.errors);
  const values = resolveInputs(specs.value, args);
  if (!values.ok) return fail(values.errors);
  const result = interpolate(content, values.value, vars);
  return result.ok ? result : fail(result.errors);
}
