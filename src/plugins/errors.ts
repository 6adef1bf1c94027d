import type { FastifyError, FastifyInstance } from 'fastify';

/**
 * An expected failure: a status and the GitLab-shaped body to send. Services return or
 * throw these; the one error handler below renders them. Anything else is a bug (500).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof body.message === 'string' ? body.message : typeof body.error === 'string' ? body.error : `HTTP ${status}`);
  }
}

export const unauthorized = () => new ApiError(401, { message: '401 Unauthorized' });
export const forbidden = (why?: string) => new ApiError(403, { message: why ? `403 Forbidden - ${why}` : '403 Forbidden' });
/** `notFound('Project')` -> 404 {"message":"404 Project Not Found"}. */
export const notFound = (what?: string) => new ApiError(404, { message: what ? `404 ${what} Not Found` : '404 Not found' });
/** Grape's bad_request!: {"message":"400 Bad request - <reason>"}. */
export const badRequest = (reason: string) => new ApiError(400, { message: `400 Bad request - ${reason}` });
/** A required parameter is absent: {"error":"<name> is missing"}. */
export const missingParam = (name: string) => new ApiError(400, { error: `${name} is missing` });
export const invalidParam = (name: string, why = 'is invalid') => new ApiError(400, { error: `${name} ${why}` });
/** render_api_error!: the message as given. */
export const apiError = (status: number, message: unknown) => new ApiError(status, { message });
/** Model validation errors: {"message":{"field":["is too short"]}}. */
export const validationFailed = (errors: Record<string, string[]>, status = 400) => new ApiError(status, { message: errors });
export const conflict = (message: string) => new ApiError(409, { message });
export const methodNotAllowed = () => new ApiError(405, { message: '405 Method Not Allowed' });

/** Maps ajv errors (from TypeBox schemas) to Grape's wording. */
function validationMessage(err: FastifyError): string {
  const parts = (err.validation ?? []).map((v) => {
    const base = v.instancePath.replace(/^\//, '').replace(/\//g, '.');
    const params = v.params as Record<string, any>;
    if (v.keyword === 'required') return `${base ? base + '.' : ''}${params.missingProperty} is missing`;
    if (v.keyword === 'enum' || v.keyword === 'anyOf' || v.keyword === 'const') return `${base} does not have a valid value`;
    return `${base || err.validationContext || 'params'} is invalid`;
  });
  return [...new Set(parts)].join(', ');
}

/**
 * PostgreSQL's class 22 errors (data exception: 22003 out of range, 22008 timestamp out of range,
 * 22P02 bad syntax, 22021 NUL...) and 54000 (a value too large for an index entry).
 */
function isDataException(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && (/^22[0-9A-Z]{3}$/.test(code) || code === '54000');
}

export function registerErrorHandling(app: FastifyInstance) {
  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    if (error instanceof ApiError) {
      return reply.code(error.status).headers(error.headers).send(error.body);
    }
    if ((error as FastifyError).validation) {
      return reply.code(400).send({ error: validationMessage(error as FastifyError) });
    }
    const status = (error as FastifyError).statusCode;
    if (status && status >= 400 && status < 500) {
      const code = (error as FastifyError).code;
      if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return reply.code(413).send({ message: '413 Request Entity Too Large' });
      if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return reply.code(415).send({ message: '415 Unsupported Media Type' });
      return reply.code(status).send({ message: `${status} ${error.message}` });
    }
    if (isDataException(error)) {
      // A value PostgreSQL refuses (out of range, malformed): the input was bad, though a handler missed it.
      request.log.warn({ err: error }, 'database refused a parameter value');
      return reply.code(400).send({ message: '400 Bad request - A parameter value is out of range or malformed' });
    }
    request.log.error({ err: error }, 'unhandled error');
    return reply.code(500).send({ message: '500 Internal Server Error' });
  });
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ error: '404 Not Found' }));
}
