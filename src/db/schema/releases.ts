import type { Generated, Selectable } from 'kysely';
import type { Timestamp } from './core.js';

/** A release of a project, one per tag (migration 1000). */
export interface ReleasesTable {
  id: Generated<number>;
  project_id: number;
  tag: string;
  name: string;
  description: Generated<string>;
  /** The tag's commit when the release was made. */
  sha: string | null;
  author_id: number | null;
  released_at: Timestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Release = Selectable<ReleasesTable>;

export type ReleaseLinkType = 'other' | 'runbook' | 'image' | 'package';
export const RELEASE_LINK_TYPES: ReleaseLinkType[] = ['other', 'runbook', 'image', 'package'];

export interface ReleaseLinksTable {
  id: Generated<number>;
  release_id: number;
  name: string;
  url: string;
  /** The path of the link's permanent URL under /-/releases/:tag/downloads (GitLab's direct_asset_path). */
  filepath: string | null;
  link_type: Generated<ReleaseLinkType>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type ReleaseLink = Selectable<ReleaseLinksTable>;

export interface ReleaseMilestonesTable {
  release_id: number;
  milestone_id: number;
}

export interface ReleaseTables {
  releases: ReleasesTable;
  release_links: ReleaseLinksTable;
  release_milestones: ReleaseMilestonesTable;
}
