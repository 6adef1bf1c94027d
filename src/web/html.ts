/**
 * HTML built from templates that escape every value: `html\`<p>${name}</p>\`` escapes `name`;
 * a value that is already HTML (another `html` template, a `SafeHtml` from `trusted()`, the
 * sanitised output of the Markdown renderer or the highlighter) goes in as it is. Arrays are
 * joined; null, undefined and false render nothing. Pages never concatenate strings of HTML
 * by hand, so nothing a user wrote reaches a page unescaped.
 */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text escaped for element content and quoted attributes. */
export function esc(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

function render(value: unknown): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  return esc(value);
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return new SafeHtml(out);
}

/** HTML that is already safe: the Markdown renderer's output, the highlighter's, a constant. */
export function trusted(value: string): SafeHtml {
  return new SafeHtml(value);
}

/** A URL built from path segments, each percent-encoded (slashes inside a segment kept only where `keepSlashes`). */
export function pathUrl(...parts: (string | number)[]): string {
  return parts.map((p) => encodeURIComponent(String(p)).replace(/%2F/g, '/')).join('/');
}

/** `2 days ago`-style text for a date, with the exact time in a `<time>` element. */
export function timeAgo(value: Date | string | null | undefined, now = Date.now()): SafeHtml {
  if (!value) return html``;
  const date = typeof value === 'string' ? new Date(value) : value;
  if (Number.isNaN(date.getTime())) return html``;
  const seconds = Math.round((now - date.getTime()) / 1000);
  const units: [number, string][] = [[31536000, 'year'], [2592000, 'month'], [604800, 'week'], [86400, 'day'], [3600, 'hour'], [60, 'minute']];
  let text = 'just now';
  const abs = Math.abs(seconds);
  for (const [size, unit] of units) {
    if (abs >= size) {
      const n = Math.floor(abs / size);
      text = seconds >= 0 ? `${n} ${unit}${n === 1 ? '' : 's'} ago` : `in ${n} ${unit}${n === 1 ? '' : 's'}`;
      break;
    }
  }
  const iso = date.toISOString();
  return html`<time datetime="${iso}" title="${iso.replace('T', ' ').slice(0, 16)} UTC">${text}</time>`;
}
