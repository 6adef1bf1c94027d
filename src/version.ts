import fs from 'node:fs';
import path from 'node:path';

/** Cairn's package.json: the nearest one above this module (src/, or the bundle in .cache/dist/). */
function packageJson(): { version: string } {
  for (let dir = import.meta.dirname; ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8'));
    if (path.dirname(dir) === dir) throw new Error('package.json not found');
  }
}

const pkg = packageJson();

export const CAIRN_VERSION = pkg.version;
/** The GitLab release whose API v4 Cairn answers as; clients gate features on it. */
export const GITLAB_COMPAT_VERSION = '17.5.0';
