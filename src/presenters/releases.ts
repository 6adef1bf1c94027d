import type { User } from '../db/schema/core.js';
import type { Release, ReleaseLink } from '../db/schema/releases.js';
import type { ParsedCommit } from '../git/catfile.js';
import { renderMarkdown } from '../lib/markdown.js';
import { presentCommit } from './commits.js';
import { presentMilestone, type MilestoneView } from './milestones.js';
import { projectFullPath, type ProjectRow } from './projects.js';
import { iso, presentUserBasic, type PresentContext } from './users.js';

/** The source archives GitLab offers with every release, in its order. */
export const RELEASE_SOURCE_FORMATS = ['zip', 'tar.gz', 'tar.bz2', 'tar'] as const;

/** What presenting a page of releases needs, loaded once per page (finders/releases.ts). */
export interface ReleaseExtras {
  authors: Map<number, User>;
  commits: Map<string, ParsedCommit>;
  links: Map<number, ReleaseLink[]>;
  milestones: Map<number, Array<MilestoneView & { issue_stats: { total: number; closed: number } }>>;
}

/** What the caller may do, which decides what a release shows (GitLab hides the code from who may not download it). */
export interface ReleaseViewer {
  downloadCode: boolean;
  update: boolean;
  html: boolean;
}

const encodeTag = (tag: string) => encodeURIComponent(tag);

/** The permanent URL of a link: under the release when it has a path, else its own URL. */
export function directAssetUrl(ctx: PresentContext, project: ProjectRow, tag: string, link: Pick<ReleaseLink, 'url' | 'filepath'>): string {
  return link.filepath ? `${ctx.baseUrl}/${projectFullPath(project)}/-/releases/${encodeTag(tag)}/downloads${link.filepath}` : link.url;
}

/** The source archives of the release of `tag`, in GitLab's order. */
export function releaseSources(ctx: Pick<PresentContext, 'baseUrl'>, project: ProjectRow, tag: string) {
  const base = `${ctx.baseUrl}/${projectFullPath(project)}`;
  return RELEASE_SOURCE_FORMATS.map((format) => ({ format, url: `${base}/-/archive/${tag.split('/').map(encodeURIComponent).join('/')}/${project.path}-${tag.replace(/\//g, '-')}.${format}` }));
}

/** GitLab's Releases::Link. */
export function presentReleaseLink(ctx: PresentContext, project: ProjectRow, tag: string, link: ReleaseLink) {
  return { id: link.id, name: link.name, url: link.url, direct_asset_url: directAssetUrl(ctx, project, tag, link), link_type: link.link_type };
}

/** GitLab's Release: code (commit, paths, source archives) only for callers who may download it. */
export function presentRelease(ctx: PresentContext, project: ProjectRow, r: Release, x: ReleaseExtras, viewer: ReleaseViewer) {
  const path = projectFullPath(project);
  const base = `${ctx.baseUrl}/${path}`;
  const author = r.author_id !== null ? x.authors.get(r.author_id) : undefined;
  const commit = r.sha ? x.commits.get(r.sha) : undefined;
  const links = (x.links.get(r.id) ?? []).map((l) => presentReleaseLink(ctx, project, r.tag, l));
  const sources = viewer.downloadCode ? releaseSources(ctx, project, r.tag) : [];
  const milestones = x.milestones.get(r.id) ?? [];
  const released = new Date(r.released_at as unknown as string);
  const created = new Date(r.created_at as unknown as string);
  const milestoneQuery = milestones.length ? `&milestone_title=${encodeURIComponent(milestones[0].title)}` : '';
  return {
    name: r.name,
    tag_name: r.tag,
    description: r.description,
    ...(viewer.html ? { description_html: renderMarkdown(r.description) } : {}),
    created_at: iso(r.created_at)!,
    released_at: iso(r.released_at)!,
    upcoming_release: released.getTime() > Date.now(),
    historical_release: released.getTime() < created.getTime(),
    author: author ? presentUserBasic(ctx, author) : null,
    ...(viewer.downloadCode
      ? {
          commit: commit ? presentCommit({ ...ctx, projectFullPath: path }, commit) : null,
          commit_path: `/${path}/-/commit/${r.sha}`,
          tag_path: `/${path}/-/tags/${encodeTag(r.tag)}`,
        }
      : {}),
    ...(milestones.length ? { milestones: milestones.map((m) => ({ ...presentMilestone(ctx, m), issue_stats: m.issue_stats })) } : {}),
    assets: { count: sources.length + links.length, sources, links },
    evidences: [] as never[],
    _links: {
      closed_issues_url: `${base}/-/issues?release_tag=${encodeTag(r.tag)}&scope=all&state=closed${milestoneQuery}`,
      closed_merge_requests_url: `${base}/-/merge_requests?release_tag=${encodeTag(r.tag)}&scope=all&state=closed${milestoneQuery}`,
      ...(viewer.update ? { edit_url: `${base}/-/releases/${encodeTag(r.tag)}/edit` } : {}),
      merged_merge_requests_url: `${base}/-/merge_requests?release_tag=${encodeTag(r.tag)}&scope=all&state=merged${milestoneQuery}`,
      opened_issues_url: `${base}/-/issues?release_tag=${encodeTag(r.tag)}&scope=all&state=opened${milestoneQuery}`,
      opened_merge_requests_url: `${base}/-/merge_requests?release_tag=${encodeTag(r.tag)}&scope=all&state=opened${milestoneQuery}`,
      self: `${base}/-/releases/${encodeTag(r.tag)}`,
    },
  };
}
