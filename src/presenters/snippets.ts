import type { User } from '../db/schema/core.js';
import type { Snippet } from '../db/schema/snippets.js';
import { VISIBILITY_NAMES } from '../policies/access.js';
import { iso, presentUserBasic, sshRepoUrl, type PresentContext } from './users.js';

/** What a snippet's form needs besides its row, preloaded by the caller. */
export interface SnippetExtras {
  author: User;
  /** The project's full path for project snippets, null for personal ones. */
  projectPath: string | null;
  /** Its files' paths at the default branch (services/snippets.ts snippetFiles). */
  files: string[];
  /** The branch the files' raw URLs name. */
  defaultBranch: string;
}

const encodePath = (p: string) => p.split('/').map(encodeURIComponent).join('/');

/** A snippet's addresses: its page, raw file, and repository (ssh and http). */
function snippetUrls(ctx: PresentContext, s: Pick<Snippet, 'id'>, projectPath: string | null) {
  const owner = projectPath ? `${ctx.baseUrl}/${projectPath}` : ctx.baseUrl;
  const webUrl = `${owner}/-/snippets/${s.id}`;
  const repoPath = projectPath ? `${projectPath}/snippets/${s.id}` : `snippets/${s.id}`;
  return {
    web_url: webUrl,
    raw_url: `${webUrl}/raw`,
    ssh_url_to_repo: sshRepoUrl(ctx.baseUrl, ctx.sshPort, repoPath),
    http_url_to_repo: `${ctx.baseUrl}/${repoPath}.git`,
  };
}

/** GitLab's BasicSnippet: a snippet inside another record (a repository storage move). */
export function presentBasicSnippet(ctx: PresentContext, s: Snippet, projectPath: string | null) {
  return {
    id: s.id,
    title: s.title,
    description: s.description,
    visibility: VISIBILITY_NAMES[s.visibility_level] ?? 'private',
    created_at: iso(s.created_at)!,
    updated_at: iso(s.updated_at)!,
    project_id: s.project_id,
    ...snippetUrls(ctx, s, projectPath),
  };
}

/** GitLab's Snippet entity (PersonalSnippet and ProjectSnippet have the same fields): a BasicSnippet and more. */
export function presentSnippet(ctx: PresentContext, s: Snippet, x: SnippetExtras) {
  const basic = presentBasicSnippet(ctx, s, x.projectPath);
  return {
    ...basic,
    file_name: x.files[0] ?? null,
    author: presentUserBasic(ctx, x.author),
    expires_at: iso(s.expires_at),
    files: x.files.map((path) => ({ path, raw_url: `${basic.web_url}/raw/${x.defaultBranch}/${encodePath(path)}` })),
    imported: false,
    imported_from: 'none',
  };
}

/** GitLab's UserAgentDetail. */
export function presentUserAgentDetail(s: Pick<Snippet, 'user_agent' | 'ip_address'>) {
  return { user_agent: s.user_agent ?? '', ip_address: s.ip_address ?? '', akismet_submitted: false, spamcheck_submitted: false };
}
