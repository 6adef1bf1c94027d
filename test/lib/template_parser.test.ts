import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseTemplate, renderTemplate, TemplateError } from '../../src/lib/template_parser.js';
import { strftime } from '../../src/lib/strftime.js';

const render = (src: string, data: unknown, opts?: { maxOutput?: number }) => renderTemplate(parseTemplate(src), data, opts);

describe("GitLab's changelog template language", () => {
  it('prints values by path, `it`, and indexes; missing values print nothing', () => {
    const data = { a: { b: [{ c: 'deep' }] }, n: 0, t: true, list: ['x', 'y'] };
    assert.equal(render('{{ a.b.0.c }}|{{it.n}}|{{ t }}|{{ list.1 }}|{{ list.5 }}|{{ nope.x }}', data), 'deep|0|true|y||');
    // Only the data's own fields are readable.
    assert.equal(render('{{ constructor }}{{ toString }}{{ list.length }}', data), '');
    // Collections print as Ruby shows them.
    assert.equal(render('{{ a }}', { a: { k: ['v', null, 1] } }), '{"k"=>["v", nil, 1]}');
    // Extra braces belong to the tag; lone braces are text.
    assert.equal(render('{{{ x }}} { y } {x}', { x: 1 }), '1 { y } {x}');
  });

  it('if/else/end with Ruby truthiness: empty strings and collections are false, zero is true', () => {
    const tpl = '{% if v %}yes{% else %}no{% end %}';
    const cases: [unknown, string][] = [[0, 'yes'], ['', 'no'], ['a', 'yes'], [[], 'no'], [[1], 'yes'], [{}, 'no'], [{ a: 1 }, 'yes'], [null, 'no'], [false, 'no']];
    for (const [v, out] of cases) assert.equal(render(tpl, { v }), out, JSON.stringify(v));
    assert.equal(render('{% if v %}only{% end %}', {}), '');
  });

  it('each over arrays and over hashes as [key, value] pairs; nothing for other values', () => {
    assert.equal(render('{% each xs %}<{{ it }}>{% end %}', { xs: [1, 2] }), '<1><2>');
    assert.equal(render('{% each h %}{{ 0 }}={{ 1 }};{% end %}', { h: { a: 1, b: 2 } }), 'a=1;b=2;');
    assert.equal(render('{% each s %}x{% end %}', { s: 'string' }), '');
  });

  it('statement tags swallow one newline, a trailing backslash joins lines, other backslashes are text', () => {
    assert.equal(render('{% if a %}\nA\n{% end %}\nB\n', { a: 1 }), 'A\nB\n');
    assert.equal(render('{% if a %}\n\nA{% end %}', { a: 1 }), '\nA');
    assert.equal(render('one \\\ntwo', {}), 'one two');
    assert.equal(render('a\\b', {}), 'a\\b');
    assert.equal(render('{%   each xs\n  %}{{\n it \n}}{%end%}', { xs: [1] }), '1');
  });

  it('refuses what GitLab refuses, with the position', () => {
    for (const bad of ['{% if a %}open', '{{ }}', '{{ a. }}', '{% else %}', '{% end %}', 'a\\\\b', 'x\\', '{% iff a %}{% end %}', '{% if a %}{% endx %}', '{{ 12345678901 }}']) {
      assert.throws(() => parseTemplate(bad), TemplateError, bad);
    }
    assert.throws(() => parseTemplate('ok\n  {% each %}'), /Don't know what to do with "\{% each %}" at line 2 char 3\./);
  });

  it('bounds nesting and output', () => {
    const nest = (n: number) => '{% each it %}'.repeat(n) + 'x' + '{% end %}'.repeat(n);
    assert.equal(render(nest(4), [[[[1]]]]), 'x');
    assert.throws(() => render(nest(5), [[[[[1]]]]]), /You can only nest up to 4 loops/);
    assert.throws(() => render('{% each it %}0123456789{% end %}', Array(100).fill(1), { maxOutput: 500 }), /more than 500 characters/);
  });
});

describe('strftime (Ruby)', () => {
  const at = { epochMs: Date.UTC(2021, 0, 5, 13, 4, 9, 7), offsetMinutes: 120 };
  it('formats in the given offset with flags and widths', () => {
    assert.equal(strftime('%Y-%m-%d', at), '2021-01-05');
    assert.equal(strftime('%B %-d, %Y %H:%M:%S.%L %z %:z', at), 'January 5, 2021 15:04:09.007 +0200 +02:00');
    assert.equal(strftime('%^a %e %j %I%p %P %%  %F %T %y %b', at), 'TUE  5 005 03PM pm %  2021-01-05 15:04:09 21 Jan');
    assert.equal(strftime('%10A|%-m|%_m|%q', at), '   Tuesday|1| 1|%q');
    assert.equal(strftime('%Y-%m-%d', { epochMs: Date.UTC(2021, 0, 6, 4, 30), offsetMinutes: -300 }), '2021-01-05');
  });
});
