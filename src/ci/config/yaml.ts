// YAML loading as GitLab does it (Psych, YAML 1.1): anchors and aliases, `<<` merge keys,
// duplicate keys allowed (the last one wins), and GitLab's `!reference [job, key, ...]` tag, which
// is kept as a ReferenceTag marker and resolved once includes and extends are applied.

import type { CollectionTag, ScalarTag, Tags, YAMLSeq } from 'yaml';

/**
 * The `yaml` package (about 10 MB of memory), loaded by loadYamlLibrary() when the first
 * configuration is compiled (index.ts build()), not at server start.
 */
let yamlLib: typeof import('yaml') | null = null;

export async function loadYamlLibrary(): Promise<void> {
  yamlLib ??= await import('yaml');
}

function lib(): typeof import('yaml') {
  if (!yamlLib) throw new Error('loadYamlLibrary() must be awaited before YAML is parsed');
  return yamlLib;
}

/** Upper bound on the configuration text (GitLab's default max total YAML size is 2 MB per file... and we are stricter on depth). */
export const MAX_YAML_BYTES = 2 * 1024 * 1024;
export const MAX_YAML_DEPTH = 100;

export class ReferenceTag {
  constructor(readonly path: string[]) {}
  toString(): string {
    return `!reference [${this.path.map((p) => JSON.stringify(p)).join(', ')}]`;
  }
}

const referenceTag: CollectionTag = {
  tag: '!reference',
  collection: 'seq',
  identify: (v) => v instanceof ReferenceTag,
  resolve(seq, onError) {
    const items = (seq as YAMLSeq).items;
    const path: string[] = [];
    for (const item of items) {
      if (lib().isScalar(item) && (typeof item.value === 'string' || typeof item.value === 'number')) path.push(String(item.value));
      else onError('!reference tag must be an array of strings');
    }
    return new ReferenceTag(path);
  },
};

const psychBooleans: ScalarTag[] = [
  { tag: 'tag:yaml.org,2002:bool', default: true, test: /^(?:[Yy]es|YES|[Tt]rue|TRUE|[Oo]n|ON)$/, resolve: () => true },
  { tag: 'tag:yaml.org,2002:bool', default: true, test: /^(?:[Nn]o|NO|[Ff]alse|FALSE|[Oo]ff|OFF)$/, resolve: () => false },
];

const PARSE_OPTIONS = {
  version: '1.1' as const,
  merge: true,
  uniqueKeys: false,
  // dates stay strings (a timestamp-looking value is never a Date in a job definition)
  // and booleans are Psych's (yes/no/on/off/true/false), not YAML 1.1's y/n
  customTags: (tags: Tags) => [
    ...psychBooleans,
    ...tags.filter((t) => typeof t === 'string' || (t.tag !== 'tag:yaml.org,2002:timestamp' && t.tag !== 'tag:yaml.org,2002:bool')),
    referenceTag,
  ],
  prettyErrors: true,
};

/**
 * `header` is the parsed `spec:` header document when the file has one (GitLab: two documents,
 * the first a hash with a `spec` key), undefined otherwise.
 */
export type YamlResult = { ok: true; value: unknown; header?: Record<string, unknown> } | { ok: false; error: string };

export function loadYaml(text: string): YamlResult {
  if (Buffer.byteLength(text, 'utf8') > MAX_YAML_BYTES) return { ok: false, error: 'The parsed YAML is too big' };
  let found;
  try {
    found = configDocument(text);
  } catch (e) {
    return { ok: false, error: `(<unknown>): ${(e as Error).message}` };
  }
  if (found === null) return { ok: false, error: '(<unknown>): a file has at most two documents: a spec header and the configuration' };
  const { doc, header } = found;
  if (doc.errors.length > 0) {
    const e = doc.errors[0];
    const pos = e.linePos?.[0];
    const where = pos ? ` at line ${pos.line} column ${pos.col}` : '';
    return { ok: false, error: `(<unknown>): ${e.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '')}${where}` };
  }
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 1000 });
  } catch (e) {
    return { ok: false, error: `(<unknown>): ${(e as Error).message}` };
  }
  if (depthExceeds(value, MAX_YAML_DEPTH)) return { ok: false, error: 'The parsed YAML is too big' };
  return header === undefined ? { ok: true, value } : { ok: true, value, header };
}

/**
 * The configuration document, and the header before it. A file may start with a header document
 * (a hash with a `spec:` key: CI/CD inputs) followed by `---` and the configuration, as GitLab
 * allows (Gitlab::Ci::Config::Yaml::Documents); inputs.ts checks and applies the header.
 */
function configDocument(text: string) {
  const { parseAllDocuments, parseDocument } = lib();
  const docs = parseAllDocuments(text, PARSE_OPTIONS);
  if (!Array.isArray(docs)) return { doc: docs, header: undefined }; // an empty stream
  if (docs.length <= 1) return { doc: docs[0] ?? parseDocument('', PARSE_OPTIONS), header: undefined };
  if (docs.length === 2 && docs[0].errors.length === 0) {
    const header = docs[0].toJS({ maxAliasCount: 1000 });
    if (isPlainObject(header) && 'spec' in header) {
      if (depthExceeds(header, MAX_YAML_DEPTH)) throw new Error('The parsed YAML is too big');
      return { doc: docs[1], header };
    }
  }
  return null;
}

function depthExceeds(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (d > max) return true;
    if (Array.isArray(v)) for (const x of v) stack.push([x, d + 1]);
    else if (isPlainObject(v)) for (const x of Object.values(v)) stack.push([x, d + 1]);
  }
  return false;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof ReferenceTag) && !(v instanceof Date);
}

/** The merged configuration as YAML, as /ci/lint's merged_yaml. */
export function dumpYaml(value: unknown): string {
  return lib().stringify(value, { customTags: [referenceTag], lineWidth: 0, aliasDuplicateObjects: false, version: '1.1' });
}

/** Deep copy of plain YAML data (ReferenceTag markers are immutable and shared). */
export function deepClone<T>(v: T): T {
  if (Array.isArray(v)) return v.map(deepClone) as T;
  if (isPlainObject(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = deepClone(x);
    return out as T;
  }
  return v;
}

/** GitLab's Hash#deep_merge: hashes merge recursively, anything else is replaced by the right side. */
export function deepMerge(left: Record<string, unknown>, right: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...left };
  for (const [k, v] of Object.entries(right)) {
    const l = out[k];
    out[k] = isPlainObject(l) && isPlainObject(v) ? deepMerge(l, v) : v;
  }
  return out;
}
