/**
 * GitLab's default issue closing pattern: "Closes #1", "fixes group/project#2", "Resolves
 * https://host/group/project/-/issues/3", lists ("Closes #1, #2 and #3", "Fixes issue #4"), with
 * the keywords close/closes/closed/closing, fix/fixes/fixed/fixing, resolve/resolves/resolved/
 * resolving, implement/implements/implemented/implementing (first letter in either case, the
 * rest lower case, as GitLab's pattern has it) and an optional colon.
 * Every issue reference inside a matching phrase is closed; references elsewhere are not.
 */

/** One issue a text would close: `projectPath` null means the project the text belongs to. */
export interface ClosingReference {
  projectPath: string | null;
  iid: number;
}

const PATH = String.raw`[A-Za-z0-9_][A-Za-z0-9_.\-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*`;
const LINK = String.raw`https?://[^\s/]+(?:/[^\s/]+)*?/(?:-/)?issues/\d+`;
const REF = String.raw`(?:${LINK}|(?:${PATH})?#\d+)`;
const KEYWORD = String.raw`(?:[Cc]los(?:e[sd]?|ing)|[Ff]ix(?:e[sd]|ing)?|[Rr]esolv(?:e[sd]?|ing)|[Ii]mplement(?:s|ed|ing)?)`;
const PHRASE = new RegExp(String.raw`\b${KEYWORD}:? +(?:(?:issues? +)?${REF}(?: *,? +and +| *,? *)?)+`, 'g');
const ONE_REF = new RegExp(String.raw`(${LINK})|(?:(${PATH}))?#(\d+)`, 'g');
const LINK_PARTS = /^(https?:\/\/.+?)\/(.+?)\/(?:-\/)?issues\/(\d+)$/;

/**
 * The issues `text` would close. `baseUrl` is this server's external URL: links elsewhere are
 * not issues of this server and are ignored. Duplicates are left out; order is first mention.
 */
export function closingReferences(text: string | null | undefined, baseUrl: string): ClosingReference[] {
  if (!text) return [];
  const out: ClosingReference[] = [];
  const seen = new Set<string>();
  const base = baseUrl.replace(/\/+$/, '').toLowerCase();
  for (const phrase of text.matchAll(PHRASE)) {
    for (const m of phrase[0].matchAll(ONE_REF)) {
      let ref: ClosingReference | null = null;
      if (m[1]) {
        const link = LINK_PARTS.exec(m[1]);
        if (!link) continue;
        // The link's path may include the server's own path prefix (a relative URL root).
        const full = `${link[1]}/${link[2]}`.toLowerCase();
        if (!full.startsWith(base + '/')) continue;
        ref = { projectPath: `${link[1]}/${link[2]}`.slice(base.length + 1), iid: Number(link[3]) };
      } else {
        ref = { projectPath: m[2] ?? null, iid: Number(m[3]) };
      }
      if (!Number.isSafeInteger(ref.iid) || ref.iid <= 0 || ref.iid > 2147483647) continue;
      const key = `${ref.projectPath?.toLowerCase() ?? ''}#${ref.iid}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(ref);
    }
  }
  return out;
}
