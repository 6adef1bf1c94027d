import type { HLJSApi } from 'highlight.js';
import { esc } from './html.js';
import { renderCache } from '../cache/lru.js';

/**
 * Syntax highlighting with highlight.js (its common languages), by file name, line by line: a
 * code view and a diff show one table row per line, so the highlighter's HTML is cut at each
 * newline, closing the spans open there and opening them again on the next line. Big files
 * (over HIGHLIGHT_MAX_BYTES) and unknown languages are shown escaped, uncoloured.
 *
 * The module loads on first use (not at start: #16's memory), and results are kept per content
 * digest in a small LRU: content-addressed, so two processes can never disagree about them.
 */
export const HIGHLIGHT_MAX_BYTES = 512 * 1024;

let hljs: HLJSApi | null = null;
async function load(): Promise<HLJSApi> {
  if (!hljs) hljs = ((await import('highlight.js/lib/common')) as unknown as { default: HLJSApi }).default;
  return hljs;
}

const BY_NAME: Record<string, string> = { dockerfile: 'dockerfile', makefile: 'makefile', gemfile: 'ruby', rakefile: 'ruby', 'cmakelists.txt': 'cmake' };
const BY_EXT: Record<string, string> = { mjs: 'javascript', cjs: 'javascript', mts: 'typescript', cts: 'typescript', tsx: 'typescript', jsx: 'javascript', yml: 'yaml', h: 'c', hpp: 'cpp', cc: 'cpp', vue: 'xml', svg: 'xml', toml: 'ini', gradle: 'groovy' };

/** The highlight.js language of a file name, or null. */
export async function languageOf(fileName: string): Promise<string | null> {
  const base = fileName.split('/').pop()!.toLowerCase();
  if (BY_NAME[base]) return BY_NAME[base];
  const dot = base.lastIndexOf('.');
  if (dot < 0) return null;
  const ext = base.slice(dot + 1);
  const api = await load();
  const name = BY_EXT[ext] ?? ext;
  return api.getLanguage(name) ? name : null;
}

/** Cuts highlighted HTML at newlines, each line with balanced spans. */
export function splitHighlighted(htmlText: string): string[] {
  const lines: string[] = [];
  const open: string[] = [];
  let current = '';
  const tag = /<span class="[^"]*">|<\/span>|\n/g;
  let last = 0;
  for (let m = tag.exec(htmlText); m; m = tag.exec(htmlText)) {
    current += htmlText.slice(last, m.index);
    last = m.index + m[0].length;
    if (m[0] === '\n') {
      lines.push(current + '</span>'.repeat(open.length));
      current = open.join('');
    } else if (m[0] === '</span>') {
      open.pop();
      current += m[0];
    } else {
      open.push(m[0]);
      current += m[0];
    }
  }
  current += htmlText.slice(last);
  lines.push(current + '</span>'.repeat(open.length));
  return lines;
}

/** Highlighted lines by blob id and language, in the process's render cache (cache/lru.ts). */
const kept = renderCache.partition<string[]>('highlight', { maxShare: 1 / 16 });

/**
 * The lines of a text as HTML (escaped; coloured when the file name has a known language).
 * `key` (a blob id) lets the result be kept; without one it is computed each time.
 */
export async function highlightLines(text: string, fileName: string, key?: string): Promise<string[]> {
  const body = text.endsWith('\n') ? text.slice(0, -1) : text;
  const language = Buffer.byteLength(body) <= HIGHLIGHT_MAX_BYTES ? await languageOf(fileName) : null;
  if (!language) return body.split('\n').map(esc);
  const cacheKey = key ? `${key}:${language}` : null;
  const hit = cacheKey ? kept.get(cacheKey) : undefined;
  if (hit) return hit;
  const api = await load();
  let lines: string[];
  try {
    lines = splitHighlighted(api.highlight(body, { language, ignoreIllegals: true }).value);
  } catch {
    lines = body.split('\n').map(esc);
  }
  if (cacheKey) kept.set(cacheKey, lines, lines.reduce((n, l) => n + l.length, 0));
  return lines;
}
