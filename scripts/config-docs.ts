// `npm run docs:config`: writes the README's configuration table from the settings schema
// (src/config.ts SETTINGS), between the config-table markers. test/config.test.ts fails when the
// README's table differs from the generated one.
import fs from 'node:fs';
import path from 'node:path';
import { configTableMarkdown } from '../src/config.js';

export const README = path.resolve(import.meta.dirname, '..', 'README.md');
export const START = '<!-- config-table:start (generated from src/config.ts by `npm run docs:config`) -->';
export const END = '<!-- config-table:end -->';

/** The README with its configuration table replaced by the generated one. */
export function withGeneratedTable(readme: string): string {
  const a = readme.indexOf(START);
  const b = readme.indexOf(END);
  if (a < 0 || b < a) throw new Error(`README.md has no ${START} ... ${END} markers`);
  return `${readme.slice(0, a + START.length)}\n${configTableMarkdown()}\n${readme.slice(b)}`;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const before = fs.readFileSync(README, 'utf8');
  const after = withGeneratedTable(before);
  if (after !== before) fs.writeFileSync(README, after);
  console.log(after !== before ? 'README.md: configuration table updated' : 'README.md: configuration table up to date');
}
