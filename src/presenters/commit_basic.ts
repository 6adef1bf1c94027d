import { signatureDate, type ParsedCommit } from '../git/catfile.js';

/** Where commit links point: the instance URL and the project's full path. */
export interface CommitLinkContext {
  externalUrl: string;
  projectFullPath: string;
}

/** GitLab's title: the first line; one of 100 characters or more is cut near 80 at a space, with an ellipsis. */
export function commitTitle(message: string): string {
  const first = message.replace(/^\s+/, '').split('\n')[0]?.trimEnd() ?? '';
  if (first.length < 100) return first;
  const space = first.lastIndexOf(' ', 80);
  return `${first.slice(0, space > 0 ? space : 80)}…`;
}

/** The Commit form (compare, merge_base, branch and tag targets). Dates in the commit's own offset. */
export function presentCommit(c: ParsedCommit, ctx: CommitLinkContext) {
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
    trailers: {},
    extended_trailers: {},
    web_url: `${ctx.externalUrl}/${ctx.projectFullPath}/-/commit/${c.oid}`,
  };
}
