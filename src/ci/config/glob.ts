// File globs as GitLab matches rules:changes, rules:exists and only:changes: Ruby's File.fnmatch?
// with FNM_PATHNAME | FNM_DOTMATCH | FNM_EXTGLOB. So `*` and `?` stop at `/`, `**/` spans zero or
// more directories, `{a,b}` alternates, `[a-z]` is a class, and dot files are matched like others.

import { RE2JS } from 're2js';

// Compiled with RE2 (linear time): globs and paths both come from users, and a glob such as
// `*a*a*a*a*a*b` would backtrack without end on a JS RegExp.
const cache = new Map<string, RE2JS>();

function compileGlob(glob: string): RE2JS {
  const hit = cache.get(glob);
  if (hit) return hit;
  let re = '';
  let braces = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '*') {
      if (glob[i + 1] === '*' && (i === 0 || glob[i - 1] === '/') && glob[i + 2] === '/') {
        re += '(?:[^/]*/)*';
        i += 2;
      } else if (glob[i + 1] === '*' && (i === 0 || glob[i - 1] === '/') && i + 2 === glob.length) {
        // a trailing ** behaves like * under FNM_PATHNAME
        re += '[^/]*';
        i += 1;
      } else {
        re += '[^/]*';
      }
    } else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = glob.indexOf(']', i + 2);
      if (end === -1) re += '\\[';
      else {
        let body = glob.slice(i + 1, end);
        if (body.startsWith('!')) body = '^' + body.slice(1);
        re += '[' + body.replace(/\\/g, '\\\\') + ']';
        i = end;
      }
    } else if (c === '{') {
      braces++;
      re += '(?:';
    } else if (c === '}' && braces > 0) {
      braces--;
      re += ')';
    } else if (c === ',' && braces > 0) re += '|';
    else if (c === '\\' && i + 1 < glob.length) {
      re += escapeRe(glob[i + 1]);
      i++;
    } else re += escapeRe(c);
  }
  while (braces-- > 0) re += ')';
  let compiled: RE2JS;
  try {
    compiled = RE2JS.compile('^' + re + '$');
  } catch {
    compiled = RE2JS.compile('^' + escapeAll(glob) + '$');
  }
  if (cache.size > 5000) cache.clear();
  cache.set(glob, compiled);
  return compiled;
}

function escapeAll(text: string): string {
  return [...text].map(escapeRe).join('');
}

function escapeRe(c: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(c) ? '\\' + c : c;
}

export function matchGlob(glob: string, path: string): boolean {
  return compileGlob(glob.replace(/^\/+/, '')).testExact(path.replace(/^\/+/, ''));
}

export function matchAnyGlob(globs: string[], paths: string[]): boolean {
  return globs.some((g) => paths.some((p) => matchGlob(g, p)));
}
