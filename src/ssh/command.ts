import type { GitCommandName } from '../git/http.js';

/**
 * The command of an SSH `exec` request, as git sends it (`git-upload-pack '/group/project.git'`),
 * checked strictly: one of the three git commands, then one path argument, single-quoted or bare,
 * made of project path characters only. Nothing of it ever reaches a shell or git's command line:
 * the path names a repository through the project finders, and git runs in that repository's
 * directory with `.` as its argument.
 */
export type ParsedSshCommand =
  | { ok: true; service: GitCommandName; path: string }
  | { ok: true; service: 'git-lfs-authenticate'; path: string; operation: 'download' | 'upload' }
  | { ok: false; message: string };

const SERVICES: Record<string, GitCommandName> = {
  'git-upload-pack': 'git-upload-pack',
  'git-receive-pack': 'git-receive-pack',
  'git-upload-archive': 'git-upload-archive',
  'git upload-pack': 'git-upload-pack',
  'git receive-pack': 'git-receive-pack',
  'git upload-archive': 'git-upload-archive',
};

/** A group may nest 20 levels deep, so a project path has up to 21 segments (and a snippet's two more). */
const MAX_SEGMENTS = 23;

/** A path segment as GitLab allows it in a group or project path: no leading `-`, not `.` or `..`. */
const SEGMENT = /^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,254}$/;

export const UNKNOWN_COMMAND =
  'This is a git server: only git-upload-pack, git-receive-pack, git-upload-archive and git-lfs-authenticate with a repository path are accepted (git clone ssh://git@HOST:PORT/group/project.git).';

const LFS_USAGE = "git-lfs-authenticate takes a repository path and an operation: git-lfs-authenticate 'group/project.git' download|upload.";

export function parseSshCommand(command: string): ParsedSshCommand {
  const bad = (message: string): ParsedSshCommand => ({ ok: false, message });
  if (typeof command !== 'string' || command.length > 4096 || /[\0\r\n]/.test(command)) return bad(UNKNOWN_COMMAND);
  const lfs = /^git-lfs-authenticate(?: +(.*))?$/.exec(command.trim());
  if (lfs) {
    // git-lfs sends the path (quoted or not), then the operation.
    const parts = /^(?:'([^']*)'|([^'\s]+)) +(download|upload)$/.exec((lfs[1] ?? '').trim());
    if (!parts) return bad(LFS_USAGE);
    const raw = parts[1] ?? parts[2];
    if (parts[2] !== undefined && /['"\s\\`$;|&<>(){}*?!#]/.test(raw)) return bad(LFS_USAGE);
    const path = repositoryPath(raw);
    if (!path) return bad(LFS_USAGE);
    return { ok: true, service: 'git-lfs-authenticate', path, operation: parts[3] as 'download' | 'upload' };
  }
  const m = /^(git-upload-pack|git-receive-pack|git-upload-archive|git upload-pack|git receive-pack|git upload-archive) +(.*)$/.exec(command.trim());
  if (!m) return bad(UNKNOWN_COMMAND);
  const service = SERVICES[m[1]];
  const arg = m[2].trim();
  // git quotes the path in single quotes (a quote inside becomes '\'' , which no valid path has).
  const quoted = /^'([^']*)'$/.exec(arg);
  const raw = quoted ? quoted[1] : arg;
  if (!quoted && /['"\s\\`$;|&<>(){}*?!#]/.test(raw)) return bad(`Invalid repository path for ${service}: give one path, as git does: ${service} 'group/project.git'.`);
  const path = repositoryPath(raw);
  if (!path) return bad(`Invalid repository path for ${service}: 'group/project.git' or '/group/project.git' is expected.`);
  return { ok: true, service, path };
}

/** `/group/project.git`, `group/project.git/`, `~/group/project` -> `group/project`; null for anything else. */
function repositoryPath(raw: string): string | null {
  let p = raw;
  if (p.startsWith('~/')) p = p.slice(2);
  p = p.replace(/^\/+/, '').replace(/\/+$/, '');
  if (/\.git$/i.test(p)) p = p.slice(0, -4);
  if (!p || p.length > 2048) return null;
  const segments = p.split('/');
  if (segments.length < 2 || segments.length > MAX_SEGMENTS) return null;
  for (const s of segments) if (!SEGMENT.test(s) || s === '.' || s === '..' || s.includes('..')) return null;
  return p;
}
