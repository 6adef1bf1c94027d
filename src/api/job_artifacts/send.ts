import type { FastifyReply } from 'fastify';
import type { Cairn } from '../../context.js';
import type { CiJobArtifact } from '../../db/schema/ci.js';
import { notFound } from '../../plugins/errors.js';
import { artifactStore } from '../../storage/index.js';

/** RFC 6266: an ASCII fallback and the UTF-8 name. */
export function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/**
 * Streams a job's archive from the object store as a download (never rendered by a browser):
 * the Jobs API and the runner protocol (a job fetching its dependencies' artifacts) both send it
 * this way. 404 when there is none, or its object is gone.
 */
export async function sendArchive(cairn: Pick<Cairn, 'config'>, reply: FastifyReply, artifact: CiJobArtifact | null | undefined) {
  if (!artifact) throw notFound();
  const stream = await artifactStore(cairn.config).get(artifact.store_key);
  if (!stream) throw notFound();
  return reply
    .code(200)
    .type('application/zip')
    .header('Content-Length', String(artifact.size))
    .header('Content-Disposition', contentDisposition(artifact.file_name))
    .header('X-Content-Type-Options', 'nosniff')
    .send(stream);
}
