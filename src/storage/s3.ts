import { PassThrough, Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { checkKey } from './keys.js';
import type { ByteRange, ObjectStore } from './index.js';
import { countingStream, type PutOptions } from './counting.js';

export interface S3Settings {
  /** http(s)://host:port of an S3-compatible server; null = AWS's own endpoint for the region. */
  endpoint: string | null;
  region: string;
  bucket: string;
  /** Key prefix inside the bucket ("" or ending with /). */
  prefix: string;
  /** null: the SDK's default credential chain (AWS_ACCESS_KEY_ID, instance roles...). */
  credentials: { accessKeyId: string; secretAccessKey: string } | null;
  /** Path-style addressing (http://host/bucket/key): MinIO, Ceph, s3rver. */
  forcePathStyle: boolean;
}

const truthy = (v: string | null, fallback: boolean) => (v === null || v === '' ? fallback : /^(1|true|yes|on)$/i.test(v));

/**
 * Reads CAIRN_OBJECT_STORE_URL:
 * `s3://ACCESS_KEY:SECRET@host:port/bucket/optional/prefix?region=us-east-1&path_style=true&tls=false`.
 * Without a host, AWS itself (s3:///bucket); without user info, the SDK's credential chain.
 * Access key and secret are URL-encoded when they contain reserved characters.
 */
export function parseObjectStoreUrl(raw: string): S3Settings {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error('CAIRN_OBJECT_STORE_URL is not a URL (s3://KEY:SECRET@host:port/bucket?region=...)');
  }
  if (url.protocol !== 's3:') throw new Error(`CAIRN_OBJECT_STORE_URL must start with s3://, got "${url.protocol}"`);
  const parts = decodeURIComponent(url.pathname).split('/').filter(Boolean);
  const bucket = parts.shift();
  if (!bucket) throw new Error('CAIRN_OBJECT_STORE_URL names no bucket (s3://host/bucket)');
  const tls = truthy(url.searchParams.get('tls'), true);
  return {
    endpoint: url.hostname ? `${tls ? 'https' : 'http'}://${url.host}` : null,
    region: url.searchParams.get('region') || 'us-east-1',
    bucket,
    prefix: parts.length ? `${parts.join('/')}/` : '',
    credentials: url.username ? { accessKeyId: decodeURIComponent(url.username), secretAccessKey: decodeURIComponent(url.password) } : null,
    forcePathStyle: truthy(url.searchParams.get('path_style'), !!url.hostname),
  };
}

/**
 * The AWS SDK (about 45 MB of memory once loaded), loaded on the first object-store call: a
 * server storing artifacts on local disk never loads it.
 */
let sdk: Promise<{ s3: typeof import('@aws-sdk/client-s3'); storage: typeof import('@aws-sdk/lib-storage') }> | null = null;
function loadSdk() {
  sdk ??= Promise.all([import('@aws-sdk/client-s3'), import('@aws-sdk/lib-storage')]).then(([s3, storage]) => ({ s3, storage }));
  return sdk;
}

const missing = (err: any) => err?.name === 'NoSuchKey' || err?.name === 'NotFound' || err?.$metadata?.httpStatusCode === 404;

/**
 * Objects in an S3-compatible bucket. A put is a (multipart) upload that the server makes
 * visible only when it completes, so readers never see a part of it; a failed put is aborted
 * (its parts dropped). Reads are streamed from the response body, ranges with `Range:`.
 */
export class S3ObjectStore implements ObjectStore {
  private client: S3Client | null = null;

  constructor(readonly settings: S3Settings) {}

  /** The SDK and this store's client, both made on first use. */
  private async sdk() {
    const { s3, storage } = await loadSdk();
    this.client ??= new s3.S3Client({
      region: this.settings.region,
      ...(this.settings.endpoint ? { endpoint: this.settings.endpoint } : {}),
      ...(this.settings.credentials ? { credentials: this.settings.credentials } : {}),
      forcePathStyle: this.settings.forcePathStyle,
      // Checksums only where S3 requires them: S3-compatible servers often lack the newer CRC headers.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    return { client: this.client, s3, storage };
  }

  /** Closes the client's connections (shutdown, tests); a later call makes a new client. */
  destroy(): void {
    this.client?.destroy();
    this.client = null;
  }

  static fromUrl(url: string): S3ObjectStore {
    return new S3ObjectStore(parseObjectStoreUrl(url));
  }

  private key(key: string) {
    checkKey(key);
    return this.settings.prefix + key;
  }

  async put(key: string, stream: Readable, opts: PutOptions = {}): Promise<{ size: number; sha256: string }> {
    const { stream: counted, result } = countingStream(opts.expect);
    // An error of the source must reach the upload (which then aborts), not vanish.
    stream.on('error', (err) => counted.destroy(err));
    stream.pipe(counted);
    // At most queueSize * partSize bytes are in memory at once (2 x 8 MiB).
    const { client, storage } = await this.sdk().catch((err) => {
      counted.destroy(err);
      throw err;
    });
    const upload = new storage.Upload({
      client,
      params: { Bucket: this.settings.bucket, Key: this.key(key), Body: counted, ContentType: 'application/octet-stream' },
      queueSize: 2,
      partSize: 8 * 1024 * 1024,
      leavePartsOnError: false,
    });
    const failed = new Promise<never>((_, reject) => counted.once('error', reject));
    try {
      await Promise.race([upload.done(), failed]);
    } catch (err) {
      await upload.abort().catch(() => {});
      throw err;
    }
    return result();
  }

  async get(key: string, range?: ByteRange): Promise<Readable | null> {
    if (range && range.end <= range.start) return (await this.size(key)) === null ? null : Readable.from([]);
    const { client, s3 } = await this.sdk();
    try {
      const res = await client.send(
        new s3.GetObjectCommand({ Bucket: this.settings.bucket, Key: this.key(key), ...(range ? { Range: `bytes=${range.start}-${range.end - 1}` } : {}) }),
      );
      const body = res.Body as Readable | undefined;
      if (!body) return Readable.from([]);
      // The SDK's body is the HTTP response; a PassThrough hands it on without its SDK mixins.
      const out = new PassThrough();
      body.on('error', (err) => out.destroy(err));
      out.on('close', () => {
        if (!body.readableEnded) body.destroy();
      });
      return body.pipe(out);
    } catch (err) {
      if (missing(err)) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    const { client, s3 } = await this.sdk();
    await client.send(new s3.DeleteObjectCommand({ Bucket: this.settings.bucket, Key: this.key(key) }));
  }

  async size(key: string): Promise<number | null> {
    const { client, s3 } = await this.sdk();
    try {
      const res = await client.send(new s3.HeadObjectCommand({ Bucket: this.settings.bucket, Key: this.key(key) }));
      return Number(res.ContentLength ?? 0);
    } catch (err) {
      if (missing(err)) return null;
      throw err;
    }
  }

  async *keys(): AsyncGenerator<string> {
    const { client, s3 } = await this.sdk();
    let token: string | undefined;
    do {
      const page = await client.send(new s3.ListObjectsV2Command({ Bucket: this.settings.bucket, Prefix: this.settings.prefix || undefined, ContinuationToken: token }));
      for (const o of page.Contents ?? []) if (o.Key && o.Key.startsWith(this.settings.prefix)) yield o.Key.slice(this.settings.prefix.length);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /**
   * Aborts multipart uploads under this store's prefix begun before `before`: a put cut off by a
   * crash leaves its parts stored (and billed) until aborted. Called by the leftover sweep
   * (services/leftovers.ts); returns how many were aborted.
   */
  async abandonUploads(before: Date): Promise<number> {
    const { client, s3 } = await this.sdk();
    let n = 0;
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    for (;;) {
      const page = await client.send(new s3.ListMultipartUploadsCommand({ Bucket: this.settings.bucket, Prefix: this.settings.prefix || undefined, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker }));
      for (const u of page.Uploads ?? []) {
        if (!u.Key || !u.UploadId || !u.Initiated || u.Initiated >= before) continue;
        await client.send(new s3.AbortMultipartUploadCommand({ Bucket: this.settings.bucket, Key: u.Key, UploadId: u.UploadId })).catch(() => {});
        n++;
      }
      if (!page.IsTruncated) return n;
      keyMarker = page.NextKeyMarker;
      uploadIdMarker = page.NextUploadIdMarker;
    }
  }
}
