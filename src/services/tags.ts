import type { Cairn } from '../context.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import { listRefs, readRef, readTag, RefUpdateConflict, resolveCommit, updateRef, writeTagObject, type RefEntry } from '../git/refs.js';
import { isValidTagName, ZERO_OID } from '../git/validate.js';
import { apiError, forbidden, notFound } from '../plugins/errors.js';
import { can, type ProjectAbility } from '../policies/abilities.js';
import { assertRepositoryWritable } from '../policies/code.js';
import type { TagView } from '../presenters/tags.js';
import { matchesSearch, type Caller } from './branches.js';
import { endRefJournal, journalRefUpdates, runPostReceiveHooks } from './post_receive.js';
import { projectRepoPath, recordRefActivity } from './projects.js';

async function tagView(cairn: Cairn, gitDir: string, ref: RefEntry): Promise<TagView> {
  const info = await cairn.catfile.info(gitDir, ref.oid).catch(() => null);
  // The tag's target peeled to its commit (a lightweight tag names the commit itself).
  const [annotation, commit] = await Promise.all([
    info?.type === 'tag' ? readTag(cairn.catfile, gitDir, ref.oid) : Promise.resolve(null),
    resolveCommit(cairn.catfile, gitDir, ref.oid),
  ]);
  return { name: ref.name, target: ref.oid, annotation, commit, protected: false };
}

export type TagOrder = 'name' | 'updated' | 'version';

/** Compares version-like names ("v1.10.0" after "v1.9.2"), numbers numerically. */
function compareVersions(a: string, b: string): number {
  const pa = a.replace(/^v/i, '').split(/[.\-+_]/);
  const pb = b.replace(/^v/i, '').split(/[.\-+_]/);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i];
    const y = pb[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    const nx = /^\d+$/.test(x) ? Number(x) : NaN;
    const ny = /^\d+$/.test(y) ? Number(y) : NaN;
    if (!Number.isNaN(nx) && !Number.isNaN(ny)) {
      if (nx !== ny) return nx - ny;
    } else if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

export async function listTags(cairn: Cairn, project: ProjectWithNamespace, opts: { search?: string; orderBy?: TagOrder; sort?: 'asc' | 'desc' }): Promise<TagView[]> {
  const gitDir = projectRepoPath(cairn, project);
  const refs = (await listRefs(gitDir, 'refs/tags/')).filter((r) => matchesSearch(r.name, opts.search));
  const tags = await Promise.all(refs.map((r) => tagView(cairn, gitDir, r)));
  const orderBy = opts.orderBy ?? 'updated';
  const dir = (opts.sort ?? 'desc') === 'asc' ? 1 : -1;
  const byName = (a: TagView, b: TagView) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  tags.sort((a, b) => {
    if (orderBy === 'name') return byName(a, b) * dir;
    if (orderBy === 'version') return (compareVersions(a.name, b.name) || byName(a, b)) * dir;
    return ((a.commit?.committer.time ?? 0) - (b.commit?.committer.time ?? 0)) * dir || byName(a, b);
  });
  return tags;
}

export async function findTag(cairn: Cairn, project: ProjectWithNamespace, name: string): Promise<TagView> {
  const gitDir = projectRepoPath(cairn, project);
  const oid = await readRef(cairn.catfile, gitDir, `refs/tags/${name}`);
  if (!oid) throw notFound('Tag');
  return tagView(cairn, gitDir, { name, oid });
}

function assertCan(caller: Caller, ability: ProjectAbility, project: ProjectWithNamespace) {
  if (!can(caller.user, ability, { project, accessLevel: caller.accessLevel })) throw forbidden();
}

/** Lightweight tag, or annotated (with the caller as tagger) when a message is given. */
export async function createTag(cairn: Cairn, project: ProjectWithNamespace, caller: Caller, p: { name: string; ref: string; message?: string }) {
  assertRepositoryWritable(project);
  assertCan(caller, 'create_tag', project);
  if (!isValidTagName(p.name)) throw apiError(400, 'Tag name invalid');
  const gitDir = projectRepoPath(cairn, project);
  if (await readRef(cairn.catfile, gitDir, `refs/tags/${p.name}`)) throw apiError(400, `Tag ${p.name} already exists`);
  const commit = await resolveCommit(cairn.catfile, gitDir, p.ref);
  if (!commit) throw apiError(400, `Target ${p.ref} is invalid`);
  let target = commit.oid;
  if (p.message) {
    const user = caller.user!;
    target = await writeTagObject(gitDir, {
      object: commit.oid,
      type: 'commit',
      name: p.name,
      tagger: { name: user.name, email: user.email, time: Math.floor(Date.now() / 1000), tz: '+0000' },
      message: p.message,
    });
  }
  const journal = await journalRefUpdates(cairn, project.id, caller.user?.id ?? null, [{ ref: `refs/tags/${p.name}`, oldSha: ZERO_OID, newSha: target }]);
  try {
    try {
      await updateRef(gitDir, `refs/tags/${p.name}`, target, ZERO_OID, 'tag: created through the API');
    } catch (e) {
      if (e instanceof RefUpdateConflict) throw apiError(400, `Tag ${p.name} already exists`);
      throw e;
    }
    await recordRefActivity(cairn.db, project);
    await runPostReceiveHooks(cairn, { projectId: project.id, userId: caller.user?.id ?? null, changes: [{ ref: `refs/tags/${p.name}`, oldSha: ZERO_OID, newSha: target }], pushOptions: [] });
  } finally {
    await endRefJournal(cairn, journal);
  }
  return findTag(cairn, project, p.name);
}

export async function deleteTag(cairn: Cairn, project: ProjectWithNamespace, caller: Caller, name: string): Promise<void> {
  assertRepositoryWritable(project);
  assertCan(caller, 'delete_tag', project);
  const gitDir = projectRepoPath(cairn, project);
  const oid = await readRef(cairn.catfile, gitDir, `refs/tags/${name}`);
  if (!oid) throw notFound('Tag');
  try {
    await updateRef(gitDir, `refs/tags/${name}`, ZERO_OID, oid, 'tag: deleted through the API');
  } catch (e) {
    if (e instanceof RefUpdateConflict) throw apiError(409, 'Tag was changed while it was being deleted; try again');
    throw e;
  }
  await recordRefActivity(cairn.db, project);
}
