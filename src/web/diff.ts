import crypto from 'node:crypto';
import type { DiffFile } from '../git/commits.js';
import { highlightLines } from './highlight.js';
import { html, trusted, type SafeHtml } from './html.js';
import { renderCache } from '../cache/lru.js';

/**
 * Diffs as pages show them, rendered from git's own unified diff (`DiffFile.diff`, the text the
 * API returns): inline (one column) or side by side ("parallel", GitLab's name), each line with
 * its old and new numbers and GitLab's line code, syntax highlighted per side (the new side's
 * lines are highlighted together, then the old side's, so a construct spanning lines colours
 * right). Callers add what goes with a line (a comment link, the notes on it) through options.
 */
export type DiffView = 'inline' | 'parallel';

export interface DiffRow {
  kind: 'hunk' | 'context' | 'add' | 'del' | 'meta';
  oldLine: number | null;
  newLine: number | null;
  /** The line without its +/-/space prefix (the hunk header for 'hunk', git's note for 'meta'). */
  text: string;
}

/** Parses a unified diff body (from "@@") into rows with their line numbers. */
export function parseDiff(diff: string): DiffRow[] {
  const rows: DiffRow[] = [];
  let oldLine = 0;
  let newLine = 0;
  const lines = diff.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  for (const line of lines) {
    const h = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (h) {
      oldLine = Number(h[1]);
      newLine = Number(h[2]);
      rows.push({ kind: 'hunk', oldLine: null, newLine: null, text: line });
    } else if (line.startsWith('+')) rows.push({ kind: 'add', oldLine: null, newLine: newLine++, text: line.slice(1) });
    else if (line.startsWith('-')) rows.push({ kind: 'del', oldLine: oldLine++, newLine: null, text: line.slice(1) });
    else if (line.startsWith(' ')) rows.push({ kind: 'context', oldLine: oldLine++, newLine: newLine++, text: line.slice(1) });
    else if (line.startsWith('\\')) rows.push({ kind: 'meta', oldLine: null, newLine: null, text: line.slice(1).trim() });
    else if (line) rows.push({ kind: 'meta', oldLine: null, newLine: null, text: line });
  }
  return rows;
}

const sha1 = (text: string) => crypto.createHash('sha1').update(text, 'utf8').digest('hex');

/** GitLab's id of a file in a diff (the SHA1 of its path), used in anchors and line codes. */
export function fileHash(path: string): string {
  return sha1(path);
}

/** GitLab's line code: `<sha1 of path>_<old line>_<new line>` (0 where the side has no line). */
export function lineCode(path: string, oldLine: number | null, newLine: number | null): string {
  return `${sha1(path)}_${oldLine ?? 0}_${newLine ?? 0}`;
}

/** lineCode with the path's hash already computed (once per file, not per line). */
const codeOf = (pathHash: string, oldLine: number | null, newLine: number | null) => `${pathHash}_${oldLine ?? 0}_${newLine ?? 0}`;

export interface DiffLineRef {
  file: DiffFile;
  row: DiffRow;
  lineCode: string;
}

export interface DiffRenderOptions {
  view: DiffView;
  /** Shown in the line's number cell (e.g. a link to comment on the line); null for nothing. */
  lineAction?: (line: DiffLineRef) => SafeHtml | null;
  /** Shown in a full-width row under the line (e.g. its discussions); null for nothing. */
  lineExtras?: (line: DiffLineRef) => SafeHtml | null;
  /** Extra links in a file's header (view file @ sha...). */
  fileLinks?: (file: DiffFile) => SafeHtml | null;
}

export function diffStats(file: DiffFile): { additions: number; deletions: number } {
  let additions = 0;
  let deletions = 0;
  for (const line of file.diff.split('\n')) {
    if (line.startsWith('+')) additions++;
    else if (line.startsWith('-')) deletions++;
  }
  return { additions, deletions };
}

/** Highlighted HTML of each row's text, by row index ('' for hunk and meta rows). */
async function highlightRows(file: DiffFile, rows: DiffRow[], key: string): Promise<string[]> {
  const out: string[] = new Array(rows.length).fill('');
  for (const side of ['new', 'old'] as const) {
    const idx: number[] = [];
    rows.forEach((r, i) => {
      if (r.kind === 'context' ? side === 'new' : r.kind === (side === 'new' ? 'add' : 'del')) idx.push(i);
    });
    if (!idx.length) continue;
    const name = side === 'new' ? file.newPath : file.oldPath;
    const lines = await highlightLines(idx.map((i) => rows[i].text).join('\n') + '\n', name, `diff:${side}:${key}`);
    idx.forEach((rowIndex, k) => (out[rowIndex] = lines[k] ?? ''));
  }
  return out;
}

function title(file: DiffFile): string {
  if (file.renamedFile) return `${file.oldPath} → ${file.newPath}`;
  return file.newPath;
}

function status(file: DiffFile): SafeHtml {
  if (file.newFile) return html`<span class="badge success">added</span>`;
  if (file.deletedFile) return html`<span class="badge failed">deleted</span>`;
  if (file.renamedFile) return html`<span class="badge">renamed</span>`;
  return html``;
}

function numberCell(n: number | null, cls: string, anchor: string, action: SafeHtml | null): SafeHtml {
  return html`<td class="ln ${cls}">${action ?? ''}${n === null ? '' : html`<a href="#${anchor}">${n}</a>`}</td>`;
}

/** Rendered tables of diffs shown without line actions (a commit's page, compare), least recently used out first. */
const keptTables = renderCache.partition<SafeHtml>('diff-table', { maxShare: 1 / 16 });

/** One file of a diff: its header (path, status, +/-) and its table (or why it is not shown). */
export async function renderDiffFile(file: DiffFile, opts: DiffRenderOptions): Promise<SafeHtml> {
  const hash = fileHash(file.newPath);
  const { additions, deletions } = diffStats(file);
  const header = html`<header><div class="row"><strong class="mono">${title(file)}</strong>${status(file)}${
    file.aMode !== file.bMode && !file.newFile && !file.deletedFile ? html`<span class="muted small">mode ${file.aMode} → ${file.bMode}</span>` : ''
  }</div><div class="row"><span class="small"><span class="added">+${additions}</span> <span class="removed">−${deletions}</span></span>${opts.fileLinks?.(file) ?? ''}</div></header>`;
  let body: SafeHtml;
  if (file.tooLarge) body = html`<p class="empty">This diff is too large to be shown.</p>`;
  else if (file.collapsed) body = html`<p class="empty">This diff is collapsed: the change is too large to show with the others. View the file instead.</p>`;
  else if (/^(Binary files |GIT binary patch)/.test(file.diff)) body = html`<p class="empty">Binary file not shown.</p>`;
  else if (!file.diff) body = html`<p class="empty">${file.renamedFile ? 'File moved without changes.' : 'No changes to show (binary file or mode change only).'}</p>`;
  else {
    // A table without per-line additions depends on its text, paths and view alone: kept.
    const key = sha1(file.diff);
    const plain = !opts.lineAction && !opts.lineExtras;
    const cacheKey = plain ? `${opts.view}\0${hash}\0${file.oldPath}\0${key}` : null;
    const kept = cacheKey ? keptTables.get(cacheKey) : undefined;
    if (kept) {
      body = kept;
    } else {
      const rows = parseDiff(file.diff);
      const code = await highlightRows(file, rows, key);
      body = opts.view === 'parallel' ? parallelTable(file, rows, code, opts, hash) : inlineTable(file, rows, code, opts, hash);
      if (cacheKey) keptTables.set(cacheKey, body, body.value.length);
    }
  }
  return html`<section class="card flush diff-file" id="${hash}" aria-label="${title(file)}">${header}<div class="code">${body}</div></section>`;
}

function inlineTable(file: DiffFile, rows: DiffRow[], code: string[], opts: DiffRenderOptions, pathHash: string): SafeHtml {
  const out: SafeHtml[] = [];
  rows.forEach((row, i) => {
    if (row.kind === 'hunk' || row.kind === 'meta') {
      out.push(html`<tr class="hunk"><td class="ln"></td><td class="ln"></td><td>${row.text}</td></tr>`);
      return;
    }
    const code_ = codeOf(pathHash, row.oldLine, row.newLine);
    const ref = { file, row, lineCode: code_ };
    const cls = row.kind === 'add' ? 'add' : row.kind === 'del' ? 'del' : '';
    const sign = row.kind === 'add' ? '+' : row.kind === 'del' ? '-' : ' ';
    out.push(html`<tr class="${cls}" id="${code_}">${numberCell(row.oldLine, 'old', code_, opts.lineAction?.(ref) ?? null)}${numberCell(row.newLine, 'new', code_, null)}<td><span class="sr-only">${sign}</span>${trusted(code[i])}</td></tr>`);
    const extras = opts.lineExtras?.(ref);
    if (extras) out.push(html`<tr class="notes"><td colspan="3">${extras}</td></tr>`);
  });
  return html`<table class="diff inline"><colgroup><col class="ln"><col class="ln"><col></colgroup><tbody>${out}</tbody></table>`;
}

function parallelTable(file: DiffFile, rows: DiffRow[], code: string[], opts: DiffRenderOptions, pathHash: string): SafeHtml {
  const out: SafeHtml[] = [];
  const side = (i: number | null, which: 'old' | 'new') => {
    if (i === null) return html`<td class="ln empty"></td><td class="empty"></td>`;
    const row = rows[i];
    const cls = row.kind === 'add' ? 'add' : row.kind === 'del' ? 'del' : '';
    const n = which === 'old' ? row.oldLine : row.newLine;
    const code_ = codeOf(pathHash, row.oldLine, row.newLine);
    const action = opts.lineAction?.({ file, row, lineCode: code_ }) ?? null;
    return html`<td class="ln ${cls}" id="${code_}-${which}">${action ?? ''}${n === null ? '' : html`<a href="#${code_}-${which}">${n}</a>`}</td><td class="${cls}">${trusted(code[i])}</td>`;
  };
  const extrasOf = (...indexes: (number | null)[]) => {
    const parts = indexes
      .filter((i): i is number => i !== null)
      .map((i) => opts.lineExtras?.({ file, row: rows[i], lineCode: codeOf(pathHash, rows[i].oldLine, rows[i].newLine) }))
      .filter((x): x is SafeHtml => !!x);
    if (parts.length) out.push(html`<tr class="notes"><td colspan="4">${parts}</td></tr>`);
  };
  let i = 0;
  while (i < rows.length) {
    const row = rows[i];
    if (row.kind === 'hunk' || row.kind === 'meta') {
      out.push(html`<tr class="hunk"><td class="ln"></td><td colspan="3">${row.text}</td></tr>`);
      i++;
    } else if (row.kind === 'context') {
      out.push(html`<tr>${side(i, 'old')}${side(i, 'new')}</tr>`);
      extrasOf(i);
      i++;
    } else {
      // A change block: its deletions on the left, its additions on the right, paired in order.
      const dels: number[] = [];
      const adds: number[] = [];
      while (i < rows.length && rows[i].kind === 'del') dels.push(i++);
      while (i < rows.length && rows[i].kind === 'add') adds.push(i++);
      for (let k = 0; k < Math.max(dels.length, adds.length); k++) {
        const l = dels[k] ?? null;
        const r = adds[k] ?? null;
        out.push(html`<tr>${side(l, 'old')}${side(r, 'new')}</tr>`);
        extrasOf(l, r);
      }
    }
  }
  return html`<table class="diff parallel"><colgroup><col class="ln"><col><col class="ln"><col></colgroup><tbody>${out}</tbody></table>`;
}

/** The summary line and every file of a diff. */
export async function renderDiff(files: DiffFile[], opts: DiffRenderOptions): Promise<SafeHtml> {
  let additions = 0;
  let deletions = 0;
  for (const f of files) {
    const s = diffStats(f);
    additions += s.additions;
    deletions += s.deletions;
  }
  const rendered = await Promise.all(files.map((f) => renderDiffFile(f, opts)));
  return html`<p class="muted">Showing <strong>${files.length} changed file${files.length === 1 ? '' : 's'}</strong> with <span class="added">${additions} addition${additions === 1 ? '' : 's'}</span> and <span class="removed">${deletions} deletion${deletions === 1 ? '' : 's'}</span></p>${rendered}`;
}

/** Links to switch between the two views (a query parameter, `view=inline|parallel`, as GitLab). */
export function viewSwitch(current: DiffView, href: (view: DiffView) => string): SafeHtml {
  return html`<div class="row small" role="group" aria-label="Diff view"><a href="${href('inline')}"${current === 'inline' ? trusted(' aria-current="true"') : ''}>Inline</a> · <a href="${href('parallel')}"${current === 'parallel' ? trusted(' aria-current="true"') : ''}>Side-by-side</a></div>`;
}

export function diffViewOf(query: Record<string, string>): DiffView {
  return query.view === 'parallel' ? 'parallel' : 'inline';
}
