import { signatureDate, type ParsedCommit } from '../git/catfile.js';
import type { BlameRange, CommitStats, DiffFile } from '../git/commits.js';
import type { PresentContext } from './users.js';
import type { Static } from 'typebox';
import type { PipelineSummarySchema } from './schemas/commits.js';

/** What commit presenters need beyond the commit: where the project lives. */
export interface CommitContext extends PresentContext {
  projectFullPath: string;
}

/** GitLab's Commit#full_title: the first line, or a placeholder for an empty message. */
export function commitFullTitle(message: string): string {
  if (!message.trim()) return '--no commit message';
  return message.split(/[\r\n]/, 1)[0];
}

/** GitLab's Commit#title: the first line, cut at a word boundary to 80 characters plus '…' when 100 or longer. */
export function commitTitle(message: string): string {
  const full = commitFullTitle(message);
  const chars = [...full];
  if (chars.length < 100) return full;
  const head = chars.slice(0, 80).join('');
  const cut = head.lastIndexOf(' ');
  return (cut > 0 ? head.slice(0, cut) : head) + '…';
}

export interface Trailers {
  trailers: Record<string, string>;
  extended: Record<string, string[]>;
}

/**
 * Git trailers (`Key: value` lines in the last paragraph of the message, after at least one
 * other paragraph); continuation lines start with whitespace.
 */
export function parseTrailers(message: string): Trailers {
  const result: Trailers = { trailers: {}, extended: {} };
  const paragraphs = message.replace(/\s+$/, '').split(/\n[ \t]*\n/);
  if (paragraphs.length < 2) return result;
  const lines = paragraphs[paragraphs.length - 1].split('\n');
  const parsed: [string, string][] = [];
  for (const line of lines) {
    if (/^[ \t]/.test(line) && parsed.length) {
      parsed[parsed.length - 1][1] += ' ' + line.trim();
      continue;
    }
    const m = /^([A-Za-z0-9][A-Za-z0-9-]*)[ \t]*:[ \t]*(.*)$/.exec(line);
    if (!m) return result;
    parsed.push([m[1], m[2].trim()]);
  }
  for (const [k, v] of parsed) {
    result.trailers[k] = v;
    (result.extended[k] ??= []).push(v);
  }
  return result;
}

export function commitWebUrl(ctx: CommitContext, oid: string): string {
  return `${ctx.baseUrl}/${ctx.projectFullPath}/-/commit/${oid}`;
}

/** GitLab's Entities::Commit; `trailers` only when asked for (empty objects otherwise). */
export function presentCommit(ctx: CommitContext, c: ParsedCommit, opts: { trailers?: boolean } = {}) {
  const t = opts.trailers ? parseTrailers(c.message) : { trailers: {}, extended: {} };
  const committed = signatureDate(c.committer);
  return {
    id: c.oid,
    short_id: c.oid.slice(0, 8),
    created_at: committed,
    parent_ids: c.parents,
    title: commitTitle(c.message),
    message: c.message,
    author_name: c.author.name,
    author_email: c.author.email,
    authored_date: signatureDate(c.author),
    committer_name: c.committer.name,
    committer_email: c.committer.email,
    committed_date: committed,
    trailers: t.trailers,
    extended_trailers: t.extended,
    web_url: commitWebUrl(ctx, c.oid),
  };
}

export function presentStats(s: CommitStats | undefined) {
  return { additions: s?.additions ?? 0, deletions: s?.deletions ?? 0, total: s?.total ?? 0 };
}

/** Entities::CommitWithStats (list with with_stats=true). */
export function presentCommitWithStats(ctx: CommitContext, c: ParsedCommit, stats: CommitStats | undefined, opts: { trailers?: boolean } = {}) {
  return { ...presentCommit(ctx, c, opts), stats: presentStats(stats) };
}

/** The commit's latest pipeline as CommitDetail shows it. */
export type CommitPipeline = Static<typeof PipelineSummarySchema>;

/** Entities::CommitDetail: single reads and creation; stats are opt-out; status is the latest pipeline's. */
export function presentCommitDetail(ctx: CommitContext & { projectId: number }, c: ParsedCommit, stats: CommitStats | null, pipeline: CommitPipeline | null = null) {
  return {
    ...presentCommit(ctx, c),
    ...(stats ? { stats: presentStats(stats) } : {}),
    status: pipeline?.status ?? null,
    project_id: ctx.projectId,
    last_pipeline: pipeline,
  };
}

/** Git prints absent modes as 000000; GitLab prints the octal number ("0", "100644"). */
function mode(m: string): string {
  return parseInt(m, 8).toString(8);
}

/** Entities::Diff. */
export function presentDiff(d: DiffFile) {
  return {
    diff: d.diff,
    collapsed: d.collapsed,
    too_large: d.tooLarge,
    new_path: d.newPath,
    old_path: d.oldPath,
    a_mode: mode(d.aMode),
    b_mode: mode(d.bMode),
    new_file: d.newFile,
    renamed_file: d.renamedFile,
    deleted_file: d.deletedFile,
    generated_file: false,
  };
}

export interface RepositoryFile {
  path: string;
  size: number;
  content: Buffer;
  ref: string;
  blobId: string;
  commitId: string;
  lastCommitId: string;
  mode: string;
  sha256: string;
}

/** The files API's blob form (content always base64). */
export function presentFile(f: RepositoryFile) {
  return {
    file_name: f.path.split('/').pop()!,
    file_path: f.path,
    size: f.size,
    encoding: 'base64',
    content_sha256: f.sha256,
    ref: f.ref,
    blob_id: f.blobId,
    commit_id: f.commitId,
    last_commit_id: f.lastCommitId,
    execute_filemode: f.mode === '100755',
    content: f.content.toString('base64'),
  };
}

/** Header values must be printable ASCII; others go URL-encoded. */
function headerValue(s: string): string {
  return /^[\x20-\x7e]*$/.test(s) ? s : encodeURIComponent(s);
}

/** The X-Gitlab-* headers GitLab sends with file reads (HEAD answers with these alone). */
export function fileHeaders(f: RepositoryFile): Record<string, string> {
  return {
    'x-gitlab-blob-id': f.blobId,
    'x-gitlab-commit-id': f.commitId,
    'x-gitlab-content-sha256': f.sha256,
    'x-gitlab-encoding': 'base64',
    'x-gitlab-file-name': headerValue(f.path.split('/').pop()!),
    'x-gitlab-file-path': headerValue(f.path),
    'x-gitlab-last-commit-id': f.lastCommitId,
    'x-gitlab-ref': headerValue(f.ref),
    'x-gitlab-size': String(f.size),
    'x-gitlab-execute-filemode': String(f.mode === '100755'),
  };
}

/** Entities::BlameRange: the commit summary and its lines. */
export function presentBlameRange(range: BlameRange, c: ParsedCommit) {
  return {
    commit: {
      id: c.oid,
      parent_ids: c.parents,
      message: c.message,
      authored_date: signatureDate(c.author),
      author_name: c.author.name,
      author_email: c.author.email,
      committed_date: signatureDate(c.committer),
      committer_name: c.committer.name,
      committer_email: c.committer.email,
    },
    lines: range.lines,
  };
}
