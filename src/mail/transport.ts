import type { Transporter } from 'nodemailer';
import type { Config } from '../config.js';

/**
 * Outgoing e-mail over SMTP (nodemailer), from CAIRN_SMTP_URL. Sending happens only in queue
 * jobs (services/notifications.ts), never in a request. One pooled transport per URL in this
 * process: it holds connections, not state another process could disagree with. nodemailer
 * (about 15 MB of memory) is loaded with the first message sent, not at start.
 */

export interface OutgoingMail {
  to: string;
  subject: string;
  text: string;
  html?: string;
  messageId: string;
  inReplyTo?: string;
  references?: string[];
  headers?: Record<string, string>;
}

const transports = new Map<string, Transporter>();

async function transportFor(url: string): Promise<Transporter> {
  let t = transports.get(url);
  if (!t) {
    const { default: nodemailer } = await import('nodemailer');
    t = transports.get(url) ?? nodemailer.createTransport(url);
    transports.set(url, t);
  }
  return t;
}

/** Is outgoing mail configured? When not, nothing is enqueued or sent. */
export function mailEnabled(config: Pick<Config, 'smtpUrl'>): boolean {
  return !!config.smtpUrl;
}

/** Sends one message; throws when the server refuses it (the queue retries the job). */
export async function sendMail(config: Pick<Config, 'smtpUrl' | 'mailFrom'>, mail: OutgoingMail): Promise<void> {
  if (!config.smtpUrl) return;
  await (await transportFor(config.smtpUrl)).sendMail({
    from: config.mailFrom,
    to: mail.to,
    subject: mail.subject,
    text: mail.text,
    html: mail.html,
    messageId: mail.messageId,
    inReplyTo: mail.inReplyTo,
    references: mail.references,
    headers: mail.headers,
  });
}

/** Closes pooled connections (app shutdown, tests). */
export function closeTransports(): void {
  for (const t of transports.values()) t.close();
  transports.clear();
}
