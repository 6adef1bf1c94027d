import { createRequire } from 'node:module';

const pkg = createRequire(import.meta.url)('../package.json') as { version: string };

export const CAIRN_VERSION = pkg.version;
/** The GitLab release whose API v4 Cairn answers as; clients gate features on it. */
export const GITLAB_COMPAT_VERSION = '17.5.0';
