import net from 'node:net';

/**
 * A list of IP addresses and CIDR ranges (`127.0.0.0/8`, `::1`, `10.1.2.3`), as
 * CAIRN_MONITORING_ALLOWLIST gives it. IPv4 clients seen as IPv4-mapped IPv6 addresses
 * (`::ffff:127.0.0.1`) match IPv4 entries.
 */
export class AddressList {
  private readonly list = new net.BlockList();

  constructor(readonly entries: readonly string[], name = 'address list') {
    for (const entry of entries) {
      const [address, bits, extra] = entry.split('/');
      const family = net.isIP(address);
      if (!family || extra !== undefined) throw new Error(`${name}: "${entry}" is not an IP address or CIDR range`);
      const type = family === 4 ? 'ipv4' : 'ipv6';
      if (bits === undefined) {
        this.list.addAddress(address, type);
        continue;
      }
      const prefix = Number(bits);
      if (!/^\d{1,3}$/.test(bits) || prefix > (family === 4 ? 32 : 128)) throw new Error(`${name}: "${entry}" has an invalid prefix length`);
      this.list.addSubnet(address, prefix, type);
    }
  }

  /** Is `address` (a client address as Node reports it) on the list? */
  includes(address: string | undefined): boolean {
    if (!address) return false;
    const plain = address.replace(/%.*$/, '');
    const family = net.isIP(plain);
    if (!family) return false;
    return this.list.check(plain, family === 4 ? 'ipv4' : 'ipv6');
  }
}
