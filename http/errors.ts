// HTTP error answers: a thrown CodedError becomes `{ error: code, message, ...details }` with the
// status the protocol's error table gives its code; framework errors get the nearest code. Shared
// by the API and the agents, so both answer errors in one shape.
import type { FastifyError, FastifyInstance } from 'fastify';
import { CodedError, type ErrorBody } from '../protocol/errors';

/** The API's and agents' name for a coded error. */
export { CodedError as ApiError };

export interface ErrorHandling {
  /** logs what nothing else explained (answered 500) */
  onUnexpected(error: Error): void;
  /** turns an error of a dependency (database, Temporal) into the coded error to answer with */
  classify?(error: Error): CodedError | null;
}

/** Installs the one error mapping and the 404 for unknown routes on a Fastify app. */
export function installErrorHandling(app: FastifyInstance, handling: ErrorHandling): void {
  app.setErrorHandler((error: FastifyError | CodedError, _request, reply) => {
    if (error instanceof CodedError) return reply.status(error.status).send(error.toBody());
    const body = frameworkErrorBody(error);
    if (body) return reply.status(body.status).send(body.body);
    const classified = handling.classify?.(error);
    if (classified) return reply.status(classified.status).send(classified.toBody());
    handling.onUnexpected(error);
    return reply.status(500).send({ error: 'internal', message: 'internal error; see the log' } satisfies ErrorBody);
  });
  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send({ error: 'not-found', message: `no route ${request.method} ${request.url.split('?')[0]}` } satisfies ErrorBody),
  );
}

/** Fastify's own 4xx errors (bad JSON, wrong media type, body too large) as protocol answers. */
function frameworkErrorBody(error: FastifyError): { status: number; body: ErrorBody } | null {
  if (error.code === 'FST_ERR_CTP_INVALID_JSON' || error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || (error instanceof SyntaxError && error.statusCode === 400)) {
    return { status: 400, body: { error: 'invalid-json', message: `malformed JSON body: ${error.message}` } };
  }
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return { status: 415, body: { error: 'unsupported-media-type', message: 'send JSON with content-type: application/json' } };
  }
  if (error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
    return { status: 400, body: { error: 'bad-request', message: 'the JSON body is empty' } };
  }
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return { status: error.statusCode, body: { error: 'bad-request', message: error.message } };
  }
  return null;
}
