/** Object keys are Cairn's own relative names; anything that could climb or confuse a path is refused. */
export function checkKey(key: string) {
  if (!key || key.startsWith('/') || key.split('/').some((p) => p === '' || p === '.' || p === '..') || key.includes('\0')) {
    throw new Error(`invalid object key "${key}"`);
  }
}
