/**
 * GitLab's small template language (Gitlab::TemplateParser), used for changelog sections:
 *
 *   {% each categories %}
 *   ### {{ title }}
 *   {% each entries %}
 *   - {{ title }}{% if author.credit %} by {{ author.reference }}{% end %}
 *   {% end %}
 *   {% end %}
 *
 * Print tags `{{ a.b.0 }}` read a value by a path of names and indexes (`it` is the current
 * value); statement tags are `if`/`else`/`end` and `each`/`end`. A statement tag swallows one
 * newline right after it, and a backslash at the end of a line joins it to the next one.
 *
 * The grammar is the same PEG as GitLab's (greedy repetition, ordered choice), so a template
 * GitLab refuses is refused here too. Evaluation is a walk over the tree: no code is run, data is
 * only read through own properties, loops may nest four deep and the output has a ceiling.
 */

export class TemplateError extends Error {}

type Step = { name: string } | { index: number };

export type TemplateNode =
  | { kind: 'text'; text: string }
  | { kind: 'print'; selector: Step[] }
  | { kind: 'if'; selector: Step[]; then: TemplateNode[]; otherwise: TemplateNode[] | null }
  | { kind: 'each'; selector: Step[]; body: TemplateNode[] };

/** Loops nested deeper than this are refused while rendering (GitLab's MAX_LOOPS). */
export const MAX_NESTED_LOOPS = 4;

/** Rendering stops with an error beyond this many characters. */
export const DEFAULT_MAX_OUTPUT = 8 * 1024 * 1024;

/** Ruby's \s: ASCII whitespace only. */
const WS = /[ \t\r\n\f\v]/;

class Parser {
  private pos = 0;
  constructor(private readonly src: string) {}

  parse(): TemplateNode[] {
    const nodes = this.exprs();
    if (this.pos < this.src.length) {
      const { line, column } = this.lineAndColumn(this.pos);
      throw new TemplateError(
        `Failed to parse the template: Don't know what to do with ${JSON.stringify(this.src.slice(this.pos, this.pos + 10))} at line ${line} char ${column}.`,
      );
    }
    return nodes;
  }

  private lineAndColumn(pos: number) {
    const before = this.src.slice(0, pos).split('\n');
    return { line: before.length, column: before[before.length - 1].length + 1 };
  }

  /** Each alternative either consumes input and returns nodes, or leaves `pos` where it was. */
  private exprs(): TemplateNode[] {
    const nodes: TemplateNode[] = [];
    for (;;) {
      const start = this.pos;
      const found = this.variable() ?? this.ifExpr() ?? this.eachExpr() ?? this.escaped() ?? this.text() ?? this.newline();
      if (found === null) {
        this.pos = start;
        return nodes;
      }
      nodes.push(...found);
    }
  }

  private attempt<T>(fn: () => T | null): T | null {
    const start = this.pos;
    const result = fn();
    if (result === null) this.pos = start;
    return result;
  }

  private peek(offset = 0): string {
    return this.src.charAt(this.pos + offset);
  }

  private literal(s: string): boolean {
    if (this.src.startsWith(s, this.pos)) {
      this.pos += s.length;
      return true;
    }
    return false;
  }

  private skipWhitespace() {
    while (this.pos < this.src.length && WS.test(this.src[this.pos])) this.pos++;
  }

  private repeatChar(ch: string, min: number): boolean {
    let n = 0;
    while (this.peek() === ch) {
      this.pos++;
      n++;
    }
    return n >= min;
  }

  /** `ident` or `integer` steps joined by dots, with optional whitespace around. */
  private selector(): Step[] | null {
    return this.attempt(() => {
      this.skipWhitespace();
      const steps: Step[] = [];
      for (;;) {
        const step = this.step();
        if (!step) {
          if (!steps.length) return null;
          // A dot that is not followed by a step ends the selector before the dot.
          this.pos--;
          break;
        }
        steps.push(step);
        if (this.peek() !== '.') break;
        this.pos++;
      }
      this.skipWhitespace();
      return steps;
    });
  }

  private step(): Step | null {
    let end = this.pos;
    while (end < this.src.length && /[a-zA-Z_]/.test(this.src[end])) end++;
    if (end > this.pos) {
      const name = this.src.slice(this.pos, end);
      this.pos = end;
      return { name };
    }
    let digits = 0;
    while (digits < 10 && /\d/.test(this.peek(digits))) digits++;
    if (!digits) return null;
    const index = Number(this.src.slice(this.pos, this.pos + digits));
    this.pos += digits;
    return { index };
  }

  private variable(): TemplateNode[] | null {
    return this.attempt(() => {
      if (!this.repeatChar('{', 2)) return null;
      const selector = this.selector();
      if (!selector) return null;
      if (!this.repeatChar('}', 2)) return null;
      return [{ kind: 'print', selector }];
    });
  }

  private exprOpen(): boolean {
    if (!this.literal('{%')) return false;
    this.skipWhitespace();
    return true;
  }

  /** `%}`, and the one newline after it, which is dropped. */
  private exprClose(): boolean {
    this.skipWhitespace();
    if (!this.literal('%}')) return false;
    this.literal('\n');
    return true;
  }

  private keywordTag(word: string): boolean {
    return this.attempt(() => (this.exprOpen() && this.literal(word) && this.exprClose() ? true : null)) ?? false;
  }

  /** `{% keyword selector %}`: at least one space or tab after the keyword. */
  private openingTag(word: string): Step[] | null {
    return this.attempt(() => {
      if (!this.exprOpen() || !this.literal(word)) return null;
      if (this.peek() !== ' ' && this.peek() !== '\t') return null;
      while (this.peek() === ' ' || this.peek() === '\t') this.pos++;
      const selector = this.selector();
      if (!selector || !this.exprClose()) return null;
      return selector;
    });
  }

  private ifExpr(): TemplateNode[] | null {
    return this.attempt(() => {
      const selector = this.openingTag('if');
      if (!selector) return null;
      const then = this.exprs();
      const otherwise = this.keywordTag('else') ? this.exprs() : null;
      if (!this.keywordTag('end')) return null;
      return [{ kind: 'if', selector, then, otherwise }];
    });
  }

  private eachExpr(): TemplateNode[] | null {
    return this.attempt(() => {
      const selector = this.openingTag('each');
      if (!selector) return null;
      const body = this.exprs();
      if (!this.keywordTag('end')) return null;
      return [{ kind: 'each', selector, body }];
    });
  }

  /** A backslash before a newline removes both; before other text it is literal text. */
  private escaped(): TemplateNode[] | null {
    return this.attempt(() => {
      if (this.peek() !== '\\') return null;
      this.pos++;
      if (this.literal('\n')) return [];
      const chars = this.chars();
      return chars === null ? null : [{ kind: 'text', text: '\\' + chars }];
    });
  }

  /** Characters other than `{`, `\` and newline; a `{` that opens no tag is text too. */
  private chars(): string | null {
    const start = this.pos;
    while (this.pos < this.src.length) {
      const c = this.src[this.pos];
      if (c === '\\' || c === '\n') break;
      if (c === '{') {
        const next = this.peek(1);
        if (next === '{' || next === '%') break;
      }
      this.pos++;
    }
    return this.pos > start ? this.src.slice(start, this.pos) : null;
  }

  private text(): TemplateNode[] | null {
    const chars = this.chars();
    return chars === null ? null : [{ kind: 'text', text: chars }];
  }

  private newline(): TemplateNode[] | null {
    return this.literal('\n') ? [{ kind: 'text', text: '\n' }] : null;
  }
}

/** Parses a template; a TemplateError says why it cannot be. */
export function parseTemplate(source: string): TemplateNode[] {
  return new Parser(source).parse();
}

// ---------------------------------------------------------------------------------------------
// Rendering

type Value = unknown;

function isRecord(v: Value): v is Record<string, Value> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function select(data: Value, steps: Step[]): Value {
  let current: Value = data;
  for (const step of steps) {
    if (current === null || current === undefined) return null;
    if ('name' in step) {
      if (step.name === 'it') continue;
      current = isRecord(current) && Object.hasOwn(current, step.name) ? current[step.name] : null;
    } else {
      current = Array.isArray(current) && step.index < current.length ? current[step.index] : null;
    }
  }
  return current ?? null;
}

/** Empty strings and collections are false, as are nil and false; everything else (0 too) is true. */
function truthy(v: Value): boolean {
  if (v === null || v === undefined || v === false) return false;
  if (typeof v === 'string' || Array.isArray(v)) return v.length > 0;
  if (isRecord(v)) return Object.keys(v).length > 0;
  return true;
}

/** Ruby's inspect of a value inside a collection. */
function inspect(v: Value): string {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'string') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(inspect).join(', ')}]`;
  if (isRecord(v)) return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}=>${inspect(x)}`).join(', ')}}`;
  return String(v);
}

/** Ruby's to_s. */
function display(v: Value): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (Array.isArray(v) || isRecord(v)) return inspect(v);
  return String(v);
}

interface RenderState {
  loops: number;
  length: number;
  maxOutput: number;
}

function renderNodes(nodes: TemplateNode[], data: Value, state: RenderState, out: string[]) {
  for (const node of nodes) {
    switch (node.kind) {
      case 'text':
        emit(node.text, state, out);
        break;
      case 'print':
        emit(display(select(data, node.selector)), state, out);
        break;
      case 'if': {
        const branch = truthy(select(data, node.selector)) ? node.then : node.otherwise;
        if (branch) renderNodes(branch, data, state, out);
        break;
      }
      case 'each': {
        const values = select(data, node.selector);
        // Ruby iterates arrays by element and hashes by [key, value] pair; nothing else.
        const items = Array.isArray(values) ? values : isRecord(values) ? Object.entries(values) : null;
        if (!items) break;
        if (state.loops === MAX_NESTED_LOOPS) throw new TemplateError(`You can only nest up to ${MAX_NESTED_LOOPS} loops`);
        state.loops++;
        for (const item of items) renderNodes(node.body, item, state, out);
        state.loops--;
        break;
      }
    }
  }
}

function emit(text: string, state: RenderState, out: string[]) {
  state.length += text.length;
  if (state.length > state.maxOutput) throw new TemplateError(`The template produced more than ${state.maxOutput} characters`);
  out.push(text);
}

/** Renders a parsed template over `data`; a TemplateError when loops nest too deep or the output is too long. */
export function renderTemplate(nodes: TemplateNode[], data: Value, opts: { maxOutput?: number } = {}): string {
  const out: string[] = [];
  renderNodes(nodes, data, { loops: 0, length: 0, maxOutput: opts.maxOutput ?? DEFAULT_MAX_OUTPUT }, out);
  return out.join('');
}
