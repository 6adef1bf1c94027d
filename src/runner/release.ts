// The `release` step (a job's `release:`, see src/ci/protocol/release_step.ts) performed by the
// runner itself when the job's environment has neither `glab` nor `release-cli`: the fields are
// read back from the step's `release-cli create ...` line (the same line GitLab's servers send),
// expanded with the job's variables as the job's shell would, and sent to
// POST /api/v4/projects/:id/releases with the job token, logging what release-cli logs. A job
// whose environment has either tool runs the script unchanged (job.ts decides).
import fs from 'node:fs';
import { Dir, openPath } from './nofollow.js';
import type { JobVariable } from './types.js';

export interface ReleaseFields {
  name?: string;
  description?: string;
  tag_name?: string;
  tag_message?: string;
  ref?: string;
  released_at?: string;
  milestones: string[];
  links: Array<Record<string, unknown>>;
}

export class ReleaseStepError extends Error {}

const FLAGS: Record<string, keyof ReleaseFields> = {
  '--name': 'name', '--description': 'description', '--tag-name': 'tag_name', '--tag-message': 'tag_message',
  '--ref': 'ref', '--released-at': 'released_at', '--milestone': 'milestones', '--assets-link': 'links',
};

/** The last `release-cli create` line of the step's script, or null. */
export function releaseCliLine(script: string[]): string | null {
  let found: string | null = null;
  // A line ends at a newline outside double quotes.
  for (const text of script) {
    let start = 0;
    let quoted = false;
    for (let i = 0; i <= text.length; i++) {
      const c = text[i];
      if (c === '\\' && quoted) {
        i++;
        continue;
      }
      if (c === '"') quoted = !quoted;
      if (i === text.length || (c === '\n' && !quoted)) {
        const line = text.slice(start, i).trim();
        if (/^release-cli create(\s|$)/.test(line)) found = line;
        start = i + 1;
      }
    }
  }
  return found;
}

/**
 * The words of a `release-cli create` line: bare words and double-quoted ones, the quoted ones
 * expanded as a POSIX shell does inside double quotes ($NAME, ${NAME}, \$ \" \\ \` and
 * backslash-newline); command substitution or other expansions are refused (they would need a
 * shell).
 */
export function releaseCliWords(line: string, vars: Map<string, JobVariable>): string[] {
  const words: string[] = [];
  let i = 0;
  const n = line.length;
  while (i < n) {
    while (i < n && /[ \t]/.test(line[i])) i++;
    if (i >= n) break;
    let word = '';
    while (i < n && !/[ \t]/.test(line[i])) {
      const c = line[i];
      if (c === '"') {
        i++;
        for (;;) {
          if (i >= n) throw new ReleaseStepError('unterminated quoted value in the release command');
          const d = line[i];
          if (d === '"') {
            i++;
            break;
          }
          if (d === '\\') {
            const e = line[i + 1];
            if (e === '$' || e === '"' || e === '\\' || e === '`') word += e;
            else if (e === '\n') {
              /* line continuation */
            } else word += `\\${e ?? ''}`;
            i += 2;
            continue;
          }
          if (d === '`') throw new ReleaseStepError('the release command runs a command (backquotes): it needs release-cli or glab in the job image');
          if (d === '$') {
            const m = /^\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})/.exec(line.slice(i));
            if (m) {
              word += vars.get(m[1] ?? m[2])?.value ?? '';
              i += m[0].length;
              continue;
            }
            if (line[i + 1] === '(' || line[i + 1] === '{') throw new ReleaseStepError('the release command uses shell expansions: it needs release-cli or glab in the job image');
          }
          word += d;
          i++;
        }
        continue;
      }
      if (c === '\\' || c === "'" || c === '$' || c === '`' || /[;&|<>()]/.test(c)) throw new ReleaseStepError('the release command is not one Cairn can read: it needs release-cli or glab in the job image');
      word += c;
      i++;
    }
    words.push(word);
  }
  return words;
}

/** The release's fields from a `release-cli create` line. */
export function releaseFields(line: string, vars: Map<string, JobVariable>): ReleaseFields {
  const words = releaseCliWords(line, vars);
  if (words[0] !== 'release-cli' || words[1] !== 'create') throw new ReleaseStepError('not a release-cli create command');
  const out: ReleaseFields = { milestones: [], links: [] };
  for (let i = 2; i < words.length; i += 2) {
    const key = FLAGS[words[i]];
    const value = words[i + 1];
    if (!key || value === undefined) throw new ReleaseStepError(`unknown release-cli option ${JSON.stringify(words[i])}`);
    if (key === 'milestones') out.milestones.push(value);
    else if (key === 'links') {
      let link: unknown;
      try {
        link = JSON.parse(value);
      } catch {
        throw new ReleaseStepError(`invalid asset link: ${value}`);
      }
      if (!link || typeof link !== 'object' || Array.isArray(link)) throw new ReleaseStepError(`invalid asset link: ${value}`);
      out.links.push(link as Record<string, unknown>);
    } else out[key] = value;
  }
  return out;
}

const MAX_DESCRIPTION_FILE = 1024 * 1024;

/**
 * release-cli's rule: a description without whitespace that names a regular file inside the
 * project directory is that file's contents. The file is opened without following any link
 * (the job made the tree), and read up to 1 MiB.
 */
export function descriptionFrom(value: string, projectDir: string): string {
  if (!value || /\s/.test(value)) return value;
  const segments = value.replace(/^\.\/+/, '').split('/').filter((s) => s !== '' && s !== '.');
  if (!segments.length || value.startsWith('/') || segments.includes('..') || value.includes('\0')) return value;
  const name = segments.pop()!;
  let root: Dir;
  try {
    root = Dir.open(projectDir);
  } catch {
    return value;
  }
  try {
    const r = openPath(root, segments);
    if (!('dir' in r)) return value;
    try {
      const st = r.dir.lstat(name);
      if (!st || !st.isFile()) return value;
      const fd = fs.openSync(r.dir.at(name), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
      try {
        if (!fs.fstatSync(fd).isFile()) return value;
        const buf = Buffer.alloc(MAX_DESCRIPTION_FILE);
        let len = 0;
        for (;;) {
          const got = fs.readSync(fd, buf, len, buf.length - len, null);
          if (got <= 0) break;
          len += got;
          if (len >= buf.length) throw new ReleaseStepError(`the description file ${value} is larger than 1 MiB`);
        }
        return buf.subarray(0, len).toString('utf8');
      } finally {
        fs.closeSync(fd);
      }
    } finally {
      r.dir.close();
    }
  } finally {
    root.close();
  }
}

function logLine(level: string, msg: string, fields: Record<string, string | undefined>): string {
  const q = (s: string) => (/^[A-Za-z0-9_.:/@+-]+$/.test(s) ? s : JSON.stringify(s));
  const rest = Object.entries(fields).filter(([, v]) => v !== undefined && v !== '').map(([k, v]) => `${k}=${q(v!)}`).join(' ');
  return `time="${new Date().toISOString().replace(/\.\d{3}Z$/, 'Z')}" level=${level} msg=${q(msg)} cli=release-cli command=create${rest ? ` ${rest}` : ''}\n`;
}

export interface NativeRelease {
  /** The server's API base, `<url>/api/v4`. */
  apiUrl: string;
  jobToken: string;
  projectId: string;
  /** The job's project directory on the runner's side (description files). */
  projectDir: string;
  vars: Map<string, JobVariable>;
  write: (text: string) => void;
  fetchImpl?: typeof fetch;
}

/** Performs the release step: true when the release was made, false (logged) when not. */
export async function runReleaseNatively(script: string[], o: NativeRelease): Promise<boolean> {
  o.write('Cairn runner: neither glab nor release-cli is in the job environment; the runner creates the release itself\n');
  let fields: ReleaseFields;
  try {
    const line = releaseCliLine(script);
    if (!line) throw new ReleaseStepError('the release step has no release-cli create command');
    fields = releaseFields(line, o.vars);
    if (fields.description !== undefined) fields.description = descriptionFrom(fields.description, o.projectDir);
  } catch (err) {
    if (!(err instanceof ReleaseStepError)) throw err;
    o.write(logLine('fatal', 'run app', { error: err.message }));
    return false;
  }
  const tag = fields.tag_name || o.vars.get('CI_COMMIT_TAG')?.value || '';
  const ref = fields.ref || o.vars.get('CI_COMMIT_SHA')?.value || undefined;
  o.write(logLine('info', 'Creating Release...', { 'project-id': o.projectId, 'server-url': o.apiUrl.replace(/\/api\/v4$/, ''), name: fields.name, 'tag-name': tag, ref, milestone: fields.milestones.join(',') || undefined }));
  const body: Record<string, unknown> = { tag_name: tag };
  if (fields.name) body.name = fields.name;
  if (fields.description !== undefined) body.description = fields.description;
  if (ref) body.ref = ref;
  if (fields.tag_message) body.tag_message = fields.tag_message;
  if (fields.released_at) body.released_at = fields.released_at;
  if (fields.milestones.length) body.milestones = fields.milestones;
  if (fields.links.length) body.assets = { links: fields.links };
  let res: Response;
  try {
    res = await (o.fetchImpl ?? fetch)(`${o.apiUrl}/projects/${encodeURIComponent(o.projectId)}/releases`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'JOB-TOKEN': o.jobToken, 'user-agent': 'cairn-runner release' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(120_000),
    });
  } catch (err) {
    o.write(logLine('fatal', 'run app', { error: `failed to create release: ${(err as Error).message}` }));
    return false;
  }
  const text = await res.text().catch(() => '');
  if (res.status !== 201) {
    let message = text.slice(0, 500);
    try {
      const j = JSON.parse(text) as { message?: unknown; error?: unknown };
      const m = j.message ?? j.error;
      if (m !== undefined) message = typeof m === 'string' ? m : JSON.stringify(m);
    } catch {
      /* not JSON */
    }
    o.write(logLine('fatal', 'run app', { error: `failed to create release: API Error Response status_code: ${res.status} message: ${message}` }));
    return false;
  }
  let created: { name?: string; tag_name?: string; description?: string; created_at?: string; released_at?: string } = {};
  try {
    created = JSON.parse(text);
  } catch {
    /* the server made it */
  }
  o.write(logLine('info', 'Release created successfully!', { 'tag-name': created.tag_name ?? tag, 'created-at': created.created_at, 'released-at': created.released_at }));
  return true;
}
