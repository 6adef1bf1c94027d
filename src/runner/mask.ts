// Replaces secret values in a byte stream with [MASKED], also when a value is split across
// two writes: the last (longest secret - 1) bytes are held back until more output arrives or
// the stream ends.

export const MASK = Buffer.from('[MASKED]');

export class Masker {
  private readonly secrets: Buffer[];
  private readonly hold: number;
  private pending: Buffer = Buffer.alloc(0);

  constructor(values: Iterable<string>) {
    const unique = new Set<string>();
    // GitLab only masks values of at least 8 characters; shorter ones would mask ordinary words.
    for (const v of values) if (v && v.length >= 8) unique.add(v);
    // Longest first, so a secret containing another is masked whole.
    this.secrets = [...unique].sort((a, b) => b.length - a.length).map((v) => Buffer.from(v));
    this.hold = this.secrets.length ? this.secrets[0].length - 1 : 0;
  }

  /** Takes more output; returns what may be sent now. */
  write(chunk: Buffer): Buffer {
    if (!this.secrets.length) return chunk;
    const data = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const { out, rest } = this.scan(data, false);
    this.pending = rest;
    return out;
  }

  /** The stream ended: everything held back, masked. */
  end(): Buffer {
    if (!this.secrets.length) return Buffer.alloc(0);
    const { out } = this.scan(this.pending, true);
    this.pending = Buffer.alloc(0);
    return out;
  }

  private scan(data: Buffer, final: boolean): { out: Buffer; rest: Buffer } {
    const parts: Buffer[] = [];
    let i = 0;
    let emittedTo = 0;
    // Bytes from `safeEnd` on might be the start of a secret completed by the next write.
    const safeEnd = final ? data.length : Math.max(0, data.length - this.hold);
    while (i < data.length) {
      let matched: Buffer | null = null;
      for (const s of this.secrets) {
        if (data[i] === s[0] && i + s.length <= data.length && data.compare(s, 0, s.length, i, i + s.length) === 0) {
          matched = s;
          break;
        }
      }
      if (matched) {
        parts.push(data.subarray(emittedTo, i), MASK);
        i += matched.length;
        emittedTo = i;
        continue;
      }
      if (i >= safeEnd) break;
      i++;
    }
    if (final) {
      parts.push(data.subarray(emittedTo));
      return { out: Buffer.concat(parts), rest: Buffer.alloc(0) };
    }
    const cut = Math.max(emittedTo, Math.min(i, safeEnd));
    parts.push(data.subarray(emittedTo, cut));
    return { out: Buffer.concat(parts), rest: Buffer.from(data.subarray(cut)) };
  }
}
