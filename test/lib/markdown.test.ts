import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderMarkdown, taskCompletionStatus } from '../../src/lib/markdown.js';

describe('markdown', () => {
  it('renders CommonMark and GFM', () => {
    assert.equal(renderMarkdown('# Title\n\nSome *text*.'), '<h1>Title</h1>\n<p>Some <em>text</em>.</p>');
    assert.match(renderMarkdown('| a | b |\n|---|---|\n| 1 | 2 |'), /<table>/);
    assert.match(renderMarkdown('~~gone~~'), /<s>gone<\/s>/);
    assert.match(renderMarkdown('see https://example.com'), /<a href="https:\/\/example.com" rel="nofollow noreferrer noopener">/);
    assert.equal(renderMarkdown(null), '');
  });

  it('never passes script, event handlers or script URLs through', () => {
    const hostile = [
      '<script>alert(1)</script>',
      '<img src=x onerror=alert(1)>',
      '[x](javascript:alert(1))',
      '[x](JAVASCRIPT:alert(1))',
      '[x](vbscript:msgbox)',
      '[x](data:text/html;base64,PHNjcmlwdD4=)',
      '![x](javascript:alert(1))',
      '<a href="javascript:alert(1)">x</a>',
      '<svg onload=alert(1)>',
    ];
    for (const h of hostile) {
      const html = renderMarkdown(h);
      assert.doesNotMatch(html, /<script|<img[^>]*onerror|<svg|href="javascript:|src="javascript:|href="vbscript:|href="data:text/i, `${h} -> ${html}`);
    }
  });

  it('renders task lists and counts them', () => {
    const text = '- [ ] one\n- [x] two\n* [X] three\n1. [ ] four\n\n```\n- [ ] not a task\n```\n';
    assert.deepEqual(taskCompletionStatus(text), { count: 4, completed_count: 2 });
    const html = renderMarkdown('- [ ] one\n- [x] two');
    assert.match(html, /<li class="task-list-item"><input type="checkbox" class="task-list-item-checkbox" disabled> one<\/li>/);
    assert.match(html, /disabled checked> two/);
    assert.deepEqual(taskCompletionStatus(null), { count: 0, completed_count: 0 });
  });
});
