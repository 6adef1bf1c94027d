import MarkdownIt from 'markdown-it';

/**
 * GitLab Flavored Markdown as far as Cairn renders it: CommonMark with GFM tables, strikethrough,
 * autolinks and task lists. Raw HTML in the source is escaped, never passed through, and
 * markdown-it refuses `javascript:`, `vbscript:`, `file:` and non-image `data:` links, so what
 * comes out carries no script, no event handler and no script URL. `description_html`, note
 * bodies and the web pages all render through here.
 */
const md = new MarkdownIt({ html: false, linkify: true, typographer: false });

const TASK = /^\[([ xX])\]\s/;

// Task list items: "- [ ] todo" and "- [x] done" become disabled checkboxes, as GitLab shows them.
md.core.ruler.after('inline', 'task_lists', (state) => {
  const tokens = state.tokens;
  for (let i = 2; i < tokens.length; i++) {
    const inline = tokens[i];
    if (inline.type !== 'inline' || tokens[i - 1].type !== 'paragraph_open' || tokens[i - 2].type !== 'list_item_open') continue;
    const first = inline.children?.[0];
    const m = first && first.type === 'text' ? TASK.exec(first.content) : null;
    if (!m || !first) continue;
    first.content = first.content.slice(m[0].length);
    const box = new state.Token('html_inline', '', 0);
    box.content = `<input type="checkbox" class="task-list-item-checkbox" disabled${m[1] === ' ' ? '' : ' checked'}> `;
    inline.children!.unshift(box);
    tokens[i - 2].attrJoin('class', 'task-list-item');
  }
});

// Links leave the site without a referrer and are not endorsed.
const defaultLinkOpen = md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  tokens[idx].attrSet('rel', 'nofollow noreferrer noopener');
  return defaultLinkOpen(tokens, idx, options, env, self);
};

/** HTML of a Markdown text (descriptions, notes); '' for null. */
export function renderMarkdown(text: string | null | undefined): string {
  if (!text) return '';
  return md.render(text).trimEnd();
}

/** One line (a title) as GitLab's single-line pipeline renders it: inline Markdown, no paragraph. */
export function renderMarkdownLine(text: string | null | undefined): string {
  if (!text) return '';
  return md.renderInline(text);
}

/**
 * GitLab's task_completion_status: the task list items of a description ("- [ ]", "* [x]",
 * "1. [ ]", nested ones too), counted outside code blocks.
 */
export function taskCompletionStatus(text: string | null | undefined): { count: number; completed_count: number } {
  let count = 0;
  let completed = 0;
  if (!text) return { count, completed_count: completed };
  let fence: string | null = null;
  for (const line of text.split(/\r?\n/)) {
    const f = /^\s*(```|~~~)/.exec(line);
    if (f) {
      if (!fence) fence = f[1];
      else if (f[1] === fence) fence = null;
      continue;
    }
    if (fence) continue;
    const m = /^\s*(?:[-*+]|\d+[.)])\s+\[([ xX])\](?:\s|$)/.exec(line);
    if (!m) continue;
    count++;
    if (m[1] !== ' ') completed++;
  }
  return { count, completed_count: completed };
}
