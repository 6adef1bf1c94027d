import dns from 'node:dns';
import net from 'node:net';
import { AddressList } from '../lib/address_list.js';

/**
 * Server-side request forgery protection for webhooks (GitLab's UrlBlocker): unless local
 * requests are allowed, a hook may not reach loopback, link-local, private or otherwise local
 * addresses. The check is made on the addresses a host name resolves to, at the moment of
 * connecting (the connection goes to the address that was checked, so a second DNS answer cannot
 * slip another in), for the hook's URL and for every redirect.
 */
export interface BlockerSettings {
  webhookAllowLocalRequests: boolean;
  webhookLocalAllowlist: string[];
}

export class BlockedUrlError extends Error {}

const LOOPBACK = new net.BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');
const LINK_LOCAL = new net.BlockList();
LINK_LOCAL.addSubnet('169.254.0.0', 16, 'ipv4');
LINK_LOCAL.addSubnet('fe80::', 10, 'ipv6');
const LOCAL_NETWORK = new net.BlockList();
for (const [a, bits] of [['10.0.0.0', 8], ['172.16.0.0', 12], ['192.168.0.0', 16], ['100.64.0.0', 10], ['0.0.0.0', 8], ['224.0.0.0', 4], ['240.0.0.0', 4]] as const) LOCAL_NETWORK.addSubnet(a, bits, 'ipv4');
LOCAL_NETWORK.addSubnet('fc00::', 7, 'ipv6');
LOCAL_NETWORK.addSubnet('ff00::', 8, 'ipv6');
LOCAL_NETWORK.addAddress('::', 'ipv6');

/** An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is checked as its IPv4 address. */
function plain(address: string): { address: string; type: 'ipv4' | 'ipv6' } {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (m) return { address: m[1], type: 'ipv4' };
  return { address, type: net.isIPv4(address) ? 'ipv4' : 'ipv6' };
}

/** Why a connection to `address` is refused, in GitLab's words; null when it is allowed. */
export function addressProblem(settings: BlockerSettings, address: string): string | null {
  if (settings.webhookAllowLocalRequests) return null;
  const p = plain(address);
  if (settings.webhookLocalAllowlist.length && new AddressList(settings.webhookLocalAllowlist, 'CAIRN_WEBHOOK_LOCAL_ALLOWLIST').includes(p.address)) return null;
  if (LOOPBACK.check(p.address, p.type)) return 'Requests to localhost are not allowed';
  if (LINK_LOCAL.check(p.address, p.type)) return 'Requests to the link local network are not allowed';
  if (LOCAL_NETWORK.check(p.address, p.type)) return 'Requests to the local network are not allowed';
  return null;
}

/** The URL's form: http(s), a host, no credentials in odd places. Returns the problem or null. */
export function urlFormProblem(raw: string): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is blocked: Only allowed schemes are http, https';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'is blocked: Only allowed schemes are http, https';
  if (!url.hostname) return 'is blocked: Host cannot be resolved or invalid';
  return null;
}

const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1');

/**
 * The check made when a hook is saved: the URL's host, if it is an address, or the addresses it
 * resolves to now. A host that does not resolve is accepted (its deliveries will fail and be
 * logged); delivery checks again whatever the answer then.
 */
export async function checkHookUrl(settings: BlockerSettings, raw: string): Promise<string | null> {
  const form = urlFormProblem(raw);
  if (form) return form;
  if (settings.webhookAllowLocalRequests) return null;
  const host = hostOf(new URL(raw));
  const addresses = net.isIP(host)
    ? [host]
    : await dns.promises.lookup(host, { all: true, verbatim: true }).then(
        (list) => list.map((a) => a.address),
        () => [] as string[],
      );
  for (const a of addresses) {
    const problem = addressProblem(settings, a);
    if (problem) return `is blocked: ${problem}`;
  }
  return null;
}

/** Refuses a URL whose host is an address literal on the block list (Node connects to those without a lookup). */
export function checkLiteralHost(settings: BlockerSettings, url: URL): void {
  const host = hostOf(url);
  if (!net.isIP(host)) return;
  const problem = addressProblem(settings, host);
  if (problem) throw new BlockedUrlError(problem);
}

/**
 * A `lookup` for http.request: resolves the host and fails the connection when an address it
 * resolves to is refused, so the socket only ever connects to an address that was checked.
 */
export function guardedLookup(settings: BlockerSettings): net.LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses) => {
      if (err) return (callback as any)(err);
      const list = addresses as unknown as dns.LookupAddress[];
      for (const a of list) {
        const problem = addressProblem(settings, a.address);
        if (problem) return (callback as any)(new BlockedUrlError(problem));
      }
      if ((options as dns.LookupOptions).all) return (callback as any)(null, list);
      return (callback as any)(null, list[0].address, list[0].family);
    });
  };
}
