// $VAR / ${VAR} expansion as GitLab does it where it expands at pipeline creation (rules:changes,
// rules:exists, environment:name, resource_group, tags, workflow:name, trigger:project). Unknown
// variables expand to ''. No shell, no recursion beyond what expandAll prepared.

const REF = /\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))|%([A-Za-z_][A-Za-z0-9_]*)%/g;

export function expandString(text: string, vars: Record<string, string>): string {
  if (!text.includes('$') && !text.includes('%')) return text;
  return text.replace(REF, (whole, braced: string | undefined, bare: string | undefined, win: string | undefined) => {
    const name = braced ?? bare ?? win!;
    if (win !== undefined) return Object.hasOwn(vars, name) ? vars[name] : whole;
    return Object.hasOwn(vars, name) ? vars[name] : '';
  });
}

/**
 * Expands references between variables (`B: "$A/x"`), as GitLab's variables_hash_expanded:
 * values that reference other variables are resolved; cycles are left as written.
 * `raw` names are not expanded.
 */
export function expandAll(vars: Record<string, string>, raw: ReadonlySet<string> = new Set()): Record<string, string> {
  const out: Record<string, string> = {};
  const state = new Map<string, 0 | 1 | 2>();
  const resolve = (name: string): string => {
    if (state.get(name) === 2) return out[name];
    if (state.get(name) === 1) return vars[name]; // cycle: keep as written
    const value = vars[name];
    if (raw.has(name) || (!value.includes('$'))) {
      state.set(name, 2);
      return (out[name] = value);
    }
    state.set(name, 1);
    const expanded = value.replace(REF, (whole, braced: string | undefined, bare: string | undefined, win: string | undefined) => {
      const ref = braced ?? bare ?? win!;
      if (win !== undefined) return whole;
      if (!Object.hasOwn(vars, ref)) return whole; // unknown: left for the runner
      return resolve(ref);
    });
    state.set(name, 2);
    return (out[name] = expanded);
  };
  for (const name of Object.keys(vars)) resolve(name);
  return out;
}
