/**
 * Notification e-mail as GitLab words it: the subject names the project (or group) and the
 * thing ("Re: project | Issue title (#iid)"), every mail about one thing threads under one
 * root Message-ID (<issue_ID@host>), the body is plain text with a link to web_url (and a
 * simple HTML part). Pure functions: the caller loaded everything.
 */

export interface Thread {
  /** GitLab's model key: issue, merge_request, epic, commit, pipeline, project. */
  kind: string;
  /** Row id (or commit SHA). */
  id: string | number;
}

export interface RenderedMessage {
  subject: string;
  text: string;
  html: string;
  messageId: string;
  inReplyTo?: string;
  references?: string[];
  headers: Record<string, string>;
}

export function threadRoot(thread: Thread, host: string): string {
  return `<${thread.kind}_${thread.id}@${host}>`;
}

function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

/** One line of a subject may not carry line breaks (header injection) and is kept short. */
function oneLine(s: string, max = 200): string {
  const flat = s.replace(/[\r\n\t]+/g, ' ').trim();
  return [...flat].length > max ? `${[...flat].slice(0, max - 1).join('')}…` : flat;
}

export interface MessageInput {
  /** Subject parts after the project or group name ("Title (#1)"). */
  subjectParts: string[];
  /** The project's or group's name, first in the subject. */
  context: string | null;
  /** A reply in the thread ("Re: "): every mail but the one that starts the thread. */
  reply: boolean;
  thread: Thread;
  /** This message's own id when it is not the thread root (a note's: note_ID). */
  ownId?: string;
  /** Body paragraphs, plain text. */
  paragraphs: string[];
  /** Where to look at it. */
  webUrl: string;
  host: string;
  headers?: Record<string, string>;
}

export function renderMessage(input: MessageInput): RenderedMessage {
  const root = threadRoot(input.thread, input.host);
  const subject = oneLine([...(input.context ? [input.context] : []), ...input.subjectParts].join(' | '), 250);
  const text = [...input.paragraphs, '', `View it on Cairn: ${input.webUrl}`, ''].join('\n');
  const html = [
    '<!DOCTYPE html><html><body>',
    ...input.paragraphs.map((p) => `<p>${escapeHtml(p).replace(/\n/g, '<br>')}</p>`),
    `<p><a href="${escapeHtml(input.webUrl)}">View it on Cairn</a></p>`,
    '</body></html>',
  ].join('\n');
  const messageId = input.reply ? `<${input.ownId ?? `${input.thread.kind}_${input.thread.id}_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`}@${input.host}>` : root;
  return {
    subject: input.reply ? `Re: ${subject}` : subject,
    text,
    html,
    messageId,
    ...(input.reply ? { inReplyTo: root, references: [root] } : {}),
    headers: { 'Auto-Submitted': 'auto-generated', 'X-Auto-Response-Suppress': 'All', ...(input.headers ?? {}) },
  };
}
