import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';
import { freePort } from './serve.js';

/** A real S3-speaking server (s3rver) on a free loopback port, with one bucket. */
export async function startS3(bucket = 'artifacts'): Promise<{ url: string; dir: string; close: () => Promise<void> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-s3-'));
  const port = await freePort();
  const server = new S3rver({ port, address: '127.0.0.1', silent: true, directory: dir, configureBuckets: [{ name: bucket }] });
  await server.run();
  return {
    // s3rver accepts any key pair it is given (S3RVER/S3RVER by default).
    url: `s3://S3RVER:S3RVER@127.0.0.1:${port}/${bucket}?region=us-east-1&path_style=true&tls=false`,
    dir,
    close: async () => {
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
