import fs from 'node:fs/promises';
import type { Config } from '../config.js';

/** The directory of a named repository storage (projects' and snippets' repositories are located from it). */
export function storageRoot(cairn: { config: Pick<Config, 'storages'> }, storage: string): string {
  const root = cairn.config.storages[storage];
  if (!root) throw new Error(`unknown repository storage "${storage}"`);
  return root;
}

/**
 * Checks at start that every configured repository storage is a directory Cairn can write
 * (creating it when missing), so a typo in CAIRN_STORAGES fails fast instead of at first push.
 */
export async function ensureStorages(config: Pick<Config, 'storages'>): Promise<void> {
  for (const [name, dir] of Object.entries(config.storages)) {
    try {
      await fs.mkdir(dir, { recursive: true });
      const stat = await fs.stat(dir);
      if (!stat.isDirectory()) throw new Error('not a directory');
      await fs.access(dir, fs.constants.W_OK | fs.constants.R_OK | fs.constants.X_OK);
    } catch (e) {
      throw new Error(`repository storage "${name}" at ${dir} is not usable: ${(e as Error).message}`);
    }
  }
}
