import path from 'node:path';
import { setting } from '../../config.js';

/** Where the runner keeps its images: CAIRN_RUNNER_IMAGE_DIR, else `$CAIRN_DATA_DIR/runner/images`. */
export function imageCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return setting<string | null>('CAIRN_RUNNER_IMAGE_DIR', env) ?? path.join(setting<string>('CAIRN_DATA_DIR', env), 'runner', 'images');
}
