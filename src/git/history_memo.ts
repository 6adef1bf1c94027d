import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * Results of history walks (`rev-list` pages and counts) kept in memory. A walk from pinned
 * commit ids gives the same answer for as long as the objects do not change, and objects never
 * change, with one exception: replace refs (`refs/replace/*`, which a push may create) make git
 * read other objects in their place (grafts and shallow files would too; Cairn writes neither).
 * So nothing is kept for a repository that may hold replace refs, and a result is dropped when
 * its replace refs may have changed while it was computed. No invalidation is needed otherwise,
 * across processes included; the least recently used entries go first.
 */
export class HistoryMemo {
  private readonly entries = new Map<string, Promise<unknown>>();
  /** Per repository: the identity of its packed-refs file when last read, and whether it lists a replace ref. */
  private readonly packedRefs = new Map<string, { identity: string; hasReplaceRefs: boolean }>();

  constructor(private readonly maxEntries = 1000) {}

  /**
   * The state of `gitDir`'s replace refs as a token, or null when it may have some (nothing is
   * kept for it then). Loose replace refs live under refs/replace/ (the directory outlives them,
   * so its presence alone counts); packed ones in packed-refs, read again whenever it is rewritten.
   */
  async replaceRefsState(gitDir: string): Promise<string | null> {
    const [looseDir, packed] = await Promise.all([
      fs.stat(path.join(gitDir, 'refs', 'replace')).catch(() => null),
      fs.stat(path.join(gitDir, 'packed-refs')).catch(() => null),
    ]);
    if (looseDir) return null;
    if (!packed) return 'no packed-refs';
    const identity = `${packed.ino}:${packed.size}:${packed.mtimeMs}`;
    let known = this.packedRefs.get(gitDir);
    if (known?.identity !== identity) {
      const text = await fs.readFile(path.join(gitDir, 'packed-refs'), 'latin1').catch(() => null);
      if (text === null) return null;
      known = { identity, hasReplaceRefs: text.includes(' refs/replace/') };
      this.packedRefs.delete(gitDir);
      this.packedRefs.set(gitDir, known);
      if (this.packedRefs.size > this.maxEntries) this.packedRefs.delete(this.packedRefs.keys().next().value!);
    }
    return known.hasReplaceRefs ? null : identity;
  }

  /**
   * The kept result for `key`, or the result of `load` (kept unless it failed or the replace refs
   * moved meanwhile). `state` is replaceRefsState(gitDir), taken before the walk's revisions were
   * pinned. Concurrent callers of one key share one load.
   */
  remember<T>(gitDir: string, state: string, key: string, load: () => Promise<T>): Promise<T> {
    const fullKey = `${gitDir}\0${key}`;
    const kept = this.entries.get(fullKey) as Promise<T> | undefined;
    if (kept) {
      this.entries.delete(fullKey);
      this.entries.set(fullKey, kept);
      return kept;
    }
    const loading = load();
    this.entries.set(fullKey, loading);
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    const forget = () => {
      if (this.entries.get(fullKey) === loading) this.entries.delete(fullKey);
    };
    loading.then(async () => {
      if ((await this.replaceRefsState(gitDir)) !== state) forget();
    }, forget);
    return loading;
  }
}
