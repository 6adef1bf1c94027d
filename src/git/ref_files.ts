import { readdirSync, readFileSync, statSync, type Dirent, type Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { isObjectId, isValidRefComponent, isValidRefName } from './validate.js';
import { recordRepositoryRead } from '../cache/read_tracking.js';

/**
 * Reads a repository's refs the way git's files backend stores them, without starting git:
 * loose refs (one file per ref under refs/) and packed-refs (one file listing many, read again
 * whenever it is replaced). Listing a repository's branches this way costs a few file reads
 * instead of a process (~2 ms). Writers stay git's (update-ref, receive-pack, pack-refs).
 *
 * Always current: loose refs are read on every call, and packed-refs is parsed again whenever its
 * identity (inode, size, times) differs from the parsed copy's, or the copy was parsed so soon after
 * the file was written that a later rewrite could carry the same times (as git guards its index
 * against "racy" timestamps).
 */

export interface PackedRefs {
  /** Changes whenever the file is replaced; 'none' when there is no packed-refs file. */
  identity: string;
  /** Full ref name -> object id. */
  refs: Map<string, string>;
  /** Some ref under refs/replace/ is packed. */
  hasReplaceRefs: boolean;
}

/** Below this age a packed-refs file is parsed again on every read (file times are coarse). */
const RACY_MS = 3000;
const MAX_REPOSITORIES = 1000;

const packedCache = new Map<string, { packed: PackedRefs; trusted: boolean }>();

const NO_PACKED_REFS: PackedRefs = { identity: 'none', refs: new Map(), hasReplaceRefs: false };

function parsePackedRefs(identity: string, text: string): PackedRefs {
  const refs = new Map<string, string>();
  let hasReplaceRefs = false;
  for (const line of text.split('\n')) {
    // '#' starts the header, '^' a peeled value of the line before.
    if (!line || line[0] === '#' || line[0] === '^') continue;
    const sp = line.indexOf(' ');
    if (sp < 0) continue;
    const oid = line.slice(0, sp);
    const name = line.slice(sp + 1).replace(/\r$/, '');
    if (!isObjectId(oid)) continue;
    refs.set(name, oid);
    if (name.startsWith('refs/replace/')) hasReplaceRefs = true;
  }
  return { identity, refs, hasReplaceRefs };
}

/** The repository's packed refs; null when the file exists but cannot be read. */
export async function readPackedRefs(gitDir: string): Promise<PackedRefs | null> {
  recordRepositoryRead();
  const file = path.join(gitDir, 'packed-refs');
  // Synchronous and not throwing when missing: this runs on every memoized read, where an
  // asynchronous stat's error for a missing file costs more than the stat.
  let stat: Stats | undefined;
  try {
    stat = statSync(file, { throwIfNoEntry: false });
  } catch {
    return null;
  }
  if (stat === undefined) {
    packedCache.delete(gitDir);
    return NO_PACKED_REFS;
  }
  const identity = `${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`;
  const known = packedCache.get(gitDir);
  if (known && known.trusted && known.packed.identity === identity) return known.packed;
  const readAt = Date.now();
  const text = await fs.readFile(file, 'utf8').catch(() => null);
  if (text === null) return null;
  const packed = parsePackedRefs(identity, text);
  packedCache.delete(gitDir);
  packedCache.set(gitDir, { packed, trusted: readAt - Math.max(stat.mtimeMs, stat.ctimeMs) > RACY_MS });
  if (packedCache.size > MAX_REPOSITORIES) packedCache.delete(packedCache.keys().next().value!);
  return packed;
}

function readSmallFile(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

/**
 * Loose refs below `prefix` (e.g. "refs/heads/"): full name -> file content, trimmed. Read
 * synchronously: a ref file is a few bytes on local disk, and the asynchronous reads cost several
 * times more (four round trips through the thread pool per file).
 */
function readLooseRefs(gitDir: string, prefix: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(path.join(gitDir, dir), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!isValidRefComponent(e.name)) continue;
      const name = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(name);
      else {
        const content = readSmallFile(path.join(gitDir, name));
        // Gone since the listing (deleted, or packed: packed-refs is read after this).
        if (content !== null) out.set(name, content.trim());
      }
    }
  };
  walk(prefix.replace(/\/+$/, ''));
  return out;
}

/** What a loose ref file holds: an object id, a symbolic ref, or nothing usable. */
function looseValue(content: string): { oid: string } | { target: string } | null {
  if (content.startsWith('ref:')) return { target: content.slice(4).trim() };
  const m = /^([0-9a-f]{40}|[0-9a-f]{64})(?:\s|$)/.exec(content);
  return m ? { oid: m[1] } : null;
}

function resolveSymbolic(gitDir: string, target: string, packed: PackedRefs, depth: number): string | null {
  if (depth > 5 || !target.startsWith('refs/') || !isValidRefName(target)) return null;
  const content = readSmallFile(path.join(gitDir, target));
  if (content === null) return packed.refs.get(target) ?? null;
  const value = looseValue(content.trim());
  if (!value) return null;
  return 'oid' in value ? value.oid : resolveSymbolic(gitDir, value.target, packed, depth + 1);
}

/** Compares as strcmp does on UTF-8 bytes: by code point. */
function compareRefNames(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!;
    const y = b.codePointAt(i)!;
    if (x !== y) return x - y;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
}

export interface RefValue {
  /** Full name (refs/heads/main). */
  ref: string;
  oid: string;
}

/**
 * The refs below `prefix` with their values, sorted by name as `git for-each-ref` lists them;
 * refs that are broken (unreadable value, invalid name) are left out as git leaves them out.
 * Loose refs are read before packed-refs: `git pack-refs` writes packed-refs before it deletes
 * the loose files, so a ref that was packed meanwhile is still found. Null when packed-refs
 * cannot be read.
 */
export async function readRefs(gitDir: string, prefix: string): Promise<RefValue[] | null> {
  recordRepositoryRead();
  const loose = readLooseRefs(gitDir, prefix);
  const packed = await readPackedRefs(gitDir);
  if (!packed) return null;
  const values = new Map<string, string>();
  for (const [ref, oid] of packed.refs) if (ref.startsWith(prefix) && isValidRefName(ref)) values.set(ref, oid);
  for (const [ref, content] of loose) {
    const value = looseValue(content);
    const oid = !value ? null : 'oid' in value ? value.oid : resolveSymbolic(gitDir, value.target, packed, 1);
    if (oid) values.set(ref, oid);
    else values.delete(ref);
  }
  return [...values].map(([ref, oid]) => ({ ref, oid })).sort((a, b) => compareRefNames(a.ref, b.ref));
}
