import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DiffFile } from '../../src/git/commits.js';
import { html } from '../../src/web/html.js';
import { lineCode, parseDiff, renderDiffFile } from '../../src/web/diff.js';
import { splitHighlighted } from '../../src/web/highlight.js';

const file = (diff: string, extra: Partial<DiffFile> = {}): DiffFile => ({
  oldPath: 'src/a.ts', newPath: 'src/a.ts', aMode: '100644', bMode: '100644', newFile: false, renamedFile: false, deletedFile: false,
  diff, tooLarge: false, collapsed: false, ...extra,
});

const DIFF = '@@ -1,3 +1,3 @@\n const a = 1;\n-const b = "<old>";\n+const b = "<new>";\n const c = 3;\n\\ No newline at end of file\n';

describe('web diff rendering', () => {
  it('numbers lines as git does', () => {
    const rows = parseDiff(DIFF);
    assert.deepEqual(rows.map((r) => [r.kind, r.oldLine, r.newLine]), [
      ['hunk', null, null], ['context', 1, 1], ['del', 2, null], ['add', null, 2], ['context', 3, 3], ['meta', null, null],
    ]);
  });

  it('renders inline and side by side, escaped and highlighted, with line codes and extras', async () => {
    const f = file(DIFF);
    const code = lineCode('src/a.ts', null, 2);
    for (const view of ['inline', 'parallel'] as const) {
      const out = (await renderDiffFile(f, {
        view,
        lineExtras: (l) => (l.lineCode === code ? html`<p class="x">note</p>` : null),
        lineAction: (l) => html`<a class="comment-here" href="?line_code=${l.lineCode}">+</a>`,
      })).value;
      assert.ok(out.includes('&quot;&lt;new&gt;&quot;'), 'escaped');
      assert.ok(!out.includes('"<new>"'));
      assert.match(out, /hljs-keyword/);
      assert.ok(out.includes(code), view);
      assert.equal(out.match(/<p class="x">note<\/p>/g)?.length, 1, view);
    }
  });

  it('says why a file is not shown', async () => {
    assert.match((await renderDiffFile(file('', { tooLarge: true }), { view: 'inline' })).value, /too large/);
    assert.match((await renderDiffFile(file('', { collapsed: true }), { view: 'inline' })).value, /collapsed/);
  });

  it('cuts highlighted HTML into lines with balanced spans', () => {
    assert.deepEqual(splitHighlighted('<span class="c">/* a\nb */</span> x'), ['<span class="c">/* a</span>', '<span class="c">b */</span> x']);
  });
});
