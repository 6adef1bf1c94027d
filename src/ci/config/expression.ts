// GitLab's CI/CD expression language (rules:if, workflow:rules:if, only/except:variables).
//
//   statement  := or
//   or         := and ('||' and)*
//   and        := compare ('&&' compare)*            (&& binds tighter than ||)
//   compare    := operand (('==' | '!=' | '=~' | '!~') operand)?
//   operand    := $VARIABLE | "string" | 'string' | /pattern/flags | null | '(' or ')'
//
// Semantics follow GitLab's (lib/gitlab/ci/pipeline/expression): an undefined variable is null;
// `==`/`!=` compare strings and null strictly; `=~`/`!~` match a string against a pattern
// literal or a variable/string holding "/pattern/flags" (null never matches); `&&`/`||` return
// one of their operands with Ruby truthiness (only null and false are false); the statement as a
// whole is true when its value is "present" (not null, not false, not a blank string).

import { RE2JS } from 're2js';

export type Value = string | null | boolean | Pattern;

/**
 * A "/pattern/flags" literal. Patterns come from users' files and are matched against values
 * they control (commit messages, branch names), so they run on RE2 (re2js: linear time, no
 * backtracking) as GitLab runs them (Gitlab::UntrustedRegexp), never on JS RegExp.
 */
export class Pattern {
  constructor(
    readonly source: string,
    private readonly re: RE2JS,
  ) {}

  test(text: string): boolean {
    return this.re.test(text);
  }
}

type Node =
  | { t: 'var'; name: string }
  | { t: 'str'; value: string }
  | { t: 'pat'; pattern: Pattern }
  | { t: 'null' }
  | { t: 'cmp'; op: '==' | '!=' | '=~' | '!~'; left: Node; right: Node }
  | { t: 'and'; left: Node; right: Node }
  | { t: 'or'; left: Node; right: Node };

type Token =
  | { k: 'var'; v: string }
  | { k: 'str'; v: string }
  | { k: 'pat'; v: Pattern }
  | { k: 'null' }
  | { k: 'op'; v: '==' | '!=' | '=~' | '!~' | '&&' | '||' | '(' | ')' };

export class ExpressionError extends Error {}

/** Converts "/re/flags" (GitLab's Ruby-style syntax, evaluated with RE2) into a JS RegExp, or null. */
export function fabricatePattern(text: string): Pattern | null {
  const m = /^\/(.*)\/([ismU]*)$/s.exec(text);
  if (!m || m[1] === '') return null;
  let flags = 0;
  if (m[2].includes('i')) flags |= RE2JS.CASE_INSENSITIVE;
  // Ruby's /m is "dot matches newline"
  if (m[2].includes('m') || m[2].includes('s')) flags |= RE2JS.DOTALL;
  try {
    return new Pattern(text, RE2JS.compile(m[1].replace(/\\\//g, '/'), flags));
  } catch {
    return null;
  }
}

function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
      continue;
    }
    const two = src.slice(i, i + 2);
    if (two === '==' || two === '!=' || two === '=~' || two === '!~' || two === '&&' || two === '||') {
      tokens.push({ k: 'op', v: two });
      i += 2;
      continue;
    }
    if (c === '(' || c === ')') {
      tokens.push({ k: 'op', v: c });
      i++;
      continue;
    }
    if (c === '$') {
      const m = /^\$([A-Za-z0-9_]+)/.exec(src.slice(i));
      if (!m) throw new ExpressionError('invalid expression syntax');
      tokens.push({ k: 'var', v: m[1] });
      i += m[0].length;
      continue;
    }
    if (c === '"' || c === "'") {
      const end = src.indexOf(c, i + 1);
      if (end === -1) throw new ExpressionError('invalid expression syntax');
      tokens.push({ k: 'str', v: src.slice(i + 1, end) });
      i = end + 1;
      continue;
    }
    if (c === '/') {
      // a pattern ends at the first unescaped slash followed by flags
      let j = i + 1;
      while (j < src.length && !(src[j] === '/' && src[j - 1] !== '\\')) j++;
      if (j >= src.length || j === i + 1) throw new ExpressionError('invalid expression syntax');
      let k = j + 1;
      while (k < src.length && /[ismU]/.test(src[k])) k++;
      const pattern = fabricatePattern(src.slice(i, k));
      if (!pattern) throw new ExpressionError('invalid expression syntax');
      tokens.push({ k: 'pat', v: pattern });
      i = k;
      continue;
    }
    if (src.startsWith('null', i) && !/[A-Za-z0-9_]/.test(src[i + 4] ?? '')) {
      tokens.push({ k: 'null' });
      i += 4;
      continue;
    }
    throw new ExpressionError('invalid expression syntax');
  }
  return tokens;
}

class Parser {
  private pos = 0;
  constructor(private readonly tokens: Token[]) {}

  parse(): Node {
    if (this.tokens.length === 0) throw new ExpressionError('invalid expression syntax');
    const node = this.or();
    if (this.pos !== this.tokens.length) throw new ExpressionError('invalid expression syntax');
    return node;
  }

  private peekOp(...ops: string[]): string | null {
    const t = this.tokens[this.pos];
    return t && t.k === 'op' && ops.includes(t.v) ? t.v : null;
  }

  private or(): Node {
    let left = this.and();
    while (this.peekOp('||')) {
      this.pos++;
      left = { t: 'or', left, right: this.and() };
    }
    return left;
  }

  private and(): Node {
    let left = this.compare();
    while (this.peekOp('&&')) {
      this.pos++;
      left = { t: 'and', left, right: this.compare() };
    }
    return left;
  }

  private compare(): Node {
    const left = this.operand();
    const op = this.peekOp('==', '!=', '=~', '!~') as '==' | '!=' | '=~' | '!~' | null;
    if (!op) return left;
    this.pos++;
    return { t: 'cmp', op, left, right: this.operand() };
  }

  private operand(): Node {
    const t = this.tokens[this.pos++];
    if (!t) throw new ExpressionError('invalid expression syntax');
    switch (t.k) {
      case 'var':
        return { t: 'var', name: t.v };
      case 'str':
        return { t: 'str', value: t.v };
      case 'pat':
        return { t: 'pat', pattern: t.v };
      case 'null':
        return { t: 'null' };
      case 'op':
        if (t.v === '(') {
          const inner = this.or();
          if (!this.peekOp(')')) throw new ExpressionError('invalid expression syntax');
          this.pos++;
          return inner;
        }
        throw new ExpressionError('invalid expression syntax');
    }
  }
}

export class Expression {
  private constructor(
    readonly source: string,
    private readonly root: Node,
  ) {}

  /** Throws ExpressionError('invalid expression syntax') on bad input. */
  static parse(source: string): Expression {
    return new Expression(source, new Parser(tokenize(source)).parse());
  }

  static isValid(source: unknown): boolean {
    if (typeof source !== 'string') return false;
    try {
      Expression.parse(source);
      return true;
    } catch {
      return false;
    }
  }

  evaluate(variables: Record<string, string>): Value {
    return evaluate(this.root, variables);
  }

  /** The statement's truth, as rules:if uses it. */
  truthful(variables: Record<string, string>): boolean {
    return present(this.evaluate(variables));
  }
}

function rubyTruthy(v: Value): boolean {
  return v !== null && v !== false;
}

function present(v: Value): boolean {
  if (v === null || v === false) return false;
  if (typeof v === 'string') return v.trim() !== '';
  return true;
}

function evaluate(node: Node, vars: Record<string, string>): Value {
  switch (node.t) {
    case 'var':
      return Object.hasOwn(vars, node.name) ? vars[node.name] : null;
    case 'str':
      return node.value;
    case 'pat':
      return node.pattern;
    case 'null':
      return null;
    case 'and': {
      const left = evaluate(node.left, vars);
      return rubyTruthy(left) ? evaluate(node.right, vars) : left;
    }
    case 'or': {
      const left = evaluate(node.left, vars);
      return rubyTruthy(left) ? left : evaluate(node.right, vars);
    }
    case 'cmp': {
      const left = evaluate(node.left, vars);
      const right = evaluate(node.right, vars);
      switch (node.op) {
        case '==':
          return equals(left, right);
        case '!=':
          return !equals(left, right);
        case '=~':
          return matches(left, right);
        case '!~':
          return !matches(left, right);
      }
    }
  }
}

function equals(a: Value, b: Value): boolean {
  if (a instanceof Pattern || b instanceof Pattern) {
    return a instanceof Pattern && b instanceof Pattern && a.source === b.source;
  }
  return a === b;
}

function matches(text: Value, pattern: Value): boolean {
  if (typeof text !== 'string') return false;
  let p: Pattern | null = null;
  if (pattern instanceof Pattern) p = pattern;
  else if (typeof pattern === 'string') p = fabricatePattern(pattern);
  if (!p) return false;
  return p.test(text);
}
