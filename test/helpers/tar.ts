// A small tar writer for test images: ustar headers, with a pax header for what ustar cannot
// hold (long names and link targets, big sizes). Entries are written exactly as given, so a
// test can make hostile layers: `../` and absolute names, links to anywhere, device nodes,
// setuid files, whiteouts, hard links to outside.

export type TarEntryType = 'file' | 'dir' | 'symlink' | 'hardlink' | 'char' | 'block' | 'fifo';

export interface TarEntry {
  name: string;
  type?: TarEntryType;
  /** Permission bits (and setuid/setgid/sticky); default 0644 for files, 0755 for directories. */
  mode?: number;
  uid?: number;
  gid?: number;
  /** Contents of a file. */
  content?: Buffer | string;
  /** Target of a symlink or hard link. */
  linkname?: string;
  devmajor?: number;
  devminor?: number;
  /** Seconds since the epoch (0: reproducible archives). */
  mtime?: number;
}

const TYPEFLAG: Record<TarEntryType, string> = { file: '0', hardlink: '1', symlink: '2', char: '3', block: '4', dir: '5', fifo: '6' };

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

function header(fields: { name: string; mode: number; uid: number; gid: number; size: number; mtime: number; typeflag: string; linkname: string; devmajor: number; devminor: number }): Buffer {
  const h = Buffer.alloc(512);
  h.write(fields.name, 0, 100, 'utf8');
  h.write(octal(fields.mode, 8), 100, 8, 'ascii');
  h.write(octal(fields.uid, 8), 108, 8, 'ascii');
  h.write(octal(fields.gid, 8), 116, 8, 'ascii');
  h.write(octal(fields.size, 12), 124, 12, 'ascii');
  h.write(octal(fields.mtime, 12), 136, 12, 'ascii');
  h.write('        ', 148, 8, 'ascii');
  h.write(fields.typeflag, 156, 1, 'ascii');
  h.write(fields.linkname, 157, 100, 'utf8');
  h.write('ustar\0', 257, 6, 'ascii');
  h.write('00', 263, 2, 'ascii');
  h.write('root', 265, 32, 'ascii');
  h.write('root', 297, 32, 'ascii');
  h.write(octal(fields.devmajor, 8), 329, 8, 'ascii');
  h.write(octal(fields.devminor, 8), 337, 8, 'ascii');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(octal(sum, 7) + ' ', 148, 8, 'ascii');
  return h;
}

function pad(n: number): Buffer {
  return Buffer.alloc((512 - (n % 512)) % 512);
}

function paxRecord(key: string, value: string): string {
  // "<len> <key>=<value>\n" where <len> counts itself.
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body) + 1;
  while (String(len).length + Buffer.byteLength(body) !== len) len = String(len).length + Buffer.byteLength(body);
  return `${len}${body}`;
}

/** One tar archive (uncompressed) of `entries`, in their order, ending with two zero blocks. */
export function tarArchive(entries: TarEntry[]): Buffer {
  const out: Buffer[] = [];
  for (const e of entries) {
    const type = e.type ?? 'file';
    const content = type === 'file' ? Buffer.from(e.content ?? '') : Buffer.alloc(0);
    const mode = e.mode ?? (type === 'dir' ? 0o755 : 0o644);
    const linkname = e.linkname ?? '';
    const pax: string[] = [];
    if (Buffer.byteLength(e.name) > 99) pax.push(paxRecord('path', e.name));
    if (Buffer.byteLength(linkname) > 99) pax.push(paxRecord('linkpath', linkname));
    if (content.length > 0o77777777777) pax.push(paxRecord('size', String(content.length)));
    const base = { mode, uid: e.uid ?? 0, gid: e.gid ?? 0, mtime: e.mtime ?? 0, devmajor: e.devmajor ?? 0, devminor: e.devminor ?? 0 };
    if (pax.length) {
      const body = Buffer.from(pax.join(''));
      out.push(header({ ...base, name: 'PaxHeader', size: body.length, typeflag: 'x', linkname: '', mode: 0o644 }), body, pad(body.length));
    }
    out.push(
      header({ ...base, name: Buffer.byteLength(e.name) > 99 ? e.name.slice(0, 99) : e.name, size: content.length, typeflag: TYPEFLAG[type], linkname: Buffer.byteLength(linkname) > 99 ? '' : linkname }),
      content,
      pad(content.length),
    );
  }
  out.push(Buffer.alloc(1024));
  return Buffer.concat(out);
}
