// What a backup archive holds and how its entries are named; shared by create.ts and restore.ts.
import type { SequenceValue } from './database.js';

export const FORMAT = 'cairn-backup';
export const FORMAT_VERSION = 1;
export const MANIFEST = 'manifest.json';
export const SECRET_ENTRY = 'secrets/secret_key_base';

export interface ManifestEntry {
  name: string;
  size: number;
  sha256: string;
}

export interface ManifestRepository {
  kind: 'project' | 'wiki' | 'snippet' | 'group';
  /** The row it belongs to (project, snippet or group id). */
  id: number;
  storage: string;
  diskPath: string;
  refs: number;
}

export interface Manifest {
  format: typeof FORMAT;
  formatVersion: number;
  cairnVersion: string;
  createdAt: string;
  database: {
    kind: 'postgres' | 'pglite';
    /** The applied migrations: the schema the table dumps are in. */
    migrations: string[];
    tables: { name: string; rows: number }[];
    sequences: SequenceValue[];
  };
  repositories: ManifestRepository[];
  objects: number;
  /** Where the secret key base came from: the data directory's file (in the archive) or CAIRN_SECRET_KEY_BASE (not in it). */
  secretKeyBase: 'file' | 'environment' | 'none';
  /** Every other entry of the archive, in archive order, with its size and SHA-256. */
  entries: ManifestEntry[];
}

/** A path component a backup may name: no separators, nothing a path resolution would treat specially. */
const COMPONENT = /^[A-Za-z0-9@_+=,.-]{1,255}$/;

export function validComponents(relative: string): boolean {
  if (!relative || relative.length > 4096) return false;
  return relative.split('/').every((c) => COMPONENT.test(c) && c !== '.' && c !== '..');
}

export const tableEntry = (table: string) => `database/${table}.ndjson`;
export const repositoryEntry = (storage: string, diskPath: string, part: 'refs' | 'pack') => `repositories/${storage}/${diskPath}/${part}`;
export const objectEntry = (key: string) => `objects/${key}`;

export type ParsedEntryName =
  | { kind: 'manifest' }
  | { kind: 'secret' }
  | { kind: 'table'; table: string }
  | { kind: 'repository'; storage: string; diskPath: string; part: 'refs' | 'pack' }
  | { kind: 'object'; key: string };

/**
 * What an archive entry's name says it is, or null for a name a backup never writes: absolute,
 * climbing (`..`), empty or odd components, or outside the known places. Names are matched as
 * text against these shapes only; no name is ever resolved against the file system to decide.
 */
export function parseEntryName(name: string): ParsedEntryName | null {
  if (name === MANIFEST) return { kind: 'manifest' };
  if (name === SECRET_ENTRY) return { kind: 'secret' };
  if (!validComponents(name)) return null;
  const parts = name.split('/');
  if (parts[0] === 'database' && parts.length === 2) {
    const m = /^([a-z_][a-z0-9_]{0,62})\.ndjson$/.exec(parts[1]);
    return m ? { kind: 'table', table: m[1] } : null;
  }
  if (parts[0] === 'repositories' && parts.length >= 4) {
    const part = parts[parts.length - 1];
    const diskPath = parts.slice(2, -1).join('/');
    if ((part !== 'refs' && part !== 'pack') || !diskPath.endsWith('.git')) return null;
    return { kind: 'repository', storage: parts[1], diskPath, part };
  }
  if (parts[0] === 'objects' && parts.length >= 2) return { kind: 'object', key: parts.slice(1).join('/') };
  return null;
}
