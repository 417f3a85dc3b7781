// HTTP error answers: a thrown CodedError becomes `{ error: code, message, ...details }` with the
// status the protocol's error table gives its code; framework errors get the nearest code. Shared
// by the API and the agents, so both answer errors in one shape.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { CodedError, statusOf, type ErrorBody, type ErrorCode } from '../protocol/errors';

/** The API's and agents' name for a coded error. */
export { CodedError as ApiError };

export interface ErrorHandling {
  /** logs what nothing else explained (answered 500) */
  onUnexpected(error: Error): void;
  /** turns an error of a dependency (database, Temporal) into the coded error to answer with */
  classify?(error: Error): CodedError | null;
}

/**
 * The methods each registered path pattern takes, collected as routes are added (install before
 * the routes), so a known path asked with another method is a 405 naming them, not a 404.
 */
function routeMethods(app: FastifyInstance): (url: string) => string[] {
  const patterns: { pattern: RegExp; methods: Set<string> }[] = [];
  app.addHook('onRoute', (route) => {
    // `/v1/tiers/:tier` matches one non-empty segment per parameter, as the router does
    const source = route.url.split('/').map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/');
    const pattern = new RegExp(`^${source}$`);
    let entry = patterns.find((p) => p.pattern.source === pattern.source);
    if (!entry) patterns.push(entry = { pattern, methods: new Set() });
    for (const method of [route.method].flat()) entry.methods.add(method);
  });
  return (url) => {
    const path = url.split('?')[0];
    const methods = new Set<string>();
    for (const { pattern, methods: of } of patterns) if (pattern.test(path)) of.forEach((m) => methods.add(m));
    return [...methods].sort();
  };
}

const errorBody = (code: ErrorCode, message: string): ErrorBody => ({ error: code, message });

/** Installs the one error mapping, the 404 for unknown paths and the 405 for unknown methods on a Fastify app. */
export function installErrorHandling(app: FastifyInstance, handling: ErrorHandling): void {
  const methodsAt = routeMethods(app);
  const noRoute = (request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?')[0];
    const allowed = methodsAt(request.url);
    if (allowed.length) {
      return reply.status(405).header('allow', allowed.join(', ')).send(errorBody('method-not-allowed', `${path} takes ${allowed.join(', ')}, not ${request.method}`));
    }
    return reply.status(404).send(errorBody('not-found', `no route ${request.method} ${path}`));
  };
  app.setErrorHandler((error: FastifyError | CodedError, request, reply) => {
    // No route matched, and Fastify refused the request before the not-found handler ran (a QUERY
    // without a content type): the path or the method is what is wrong.
    if (request.is404) return noRoute(request, reply);
    if (error instanceof CodedError) return reply.status(error.status).send(error.toBody());
    const body = frameworkErrorBody(error);
    if (body) return reply.status(body.status).send(body.body);
    const classified = handling.classify?.(error);
    if (classified) return reply.status(classified.status).send(classified.toBody());
    handling.onUnexpected(error);
    return reply.status(500).send({ error: 'internal', message: 'internal error; see the log' } satisfies ErrorBody);
  });
  app.setNotFoundHandler(noRoute);
}

/**
 * The longest path segment the router takes, as sent (percent-encoded): above every valid path
 * parameter's (a workflow id: 300 characters, each up to 12 once percent-encoded), so a request the
 * document accepts is never refused 414; a longer one is.
 */
export const MAX_PARAM_LENGTH = 4096;

/**
 * What a Fastify app answers before any route runs, in the one error shape (Fastify's own bodies
 * are `{error: "Bad Request", code, statusCode}`): spread into `Fastify({...})`.
 *   routerOptions       path segments up to MAX_PARAM_LENGTH
 *   frameworkErrors     a path parameter longer than that (414), a URL that does not decode (400)
 *   clientErrorHandler  headers larger than Node reads (431), a request that arrived too slowly (408),
 *                       bytes that are not HTTP (400); written on the socket, which is then closed
 */
export const frameworkErrorOptions = {
  routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
  frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
    const path = request.url.split('?')[0];
    const body = error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? errorBody('uri-too-long', `a path segment of ${path.slice(0, 200)} is longer than any name the API takes`)
      : errorBody('bad-request', `the URL does not decode: ${error.message}`);
    return reply.status(statusOf(body.error as ErrorCode)).send(body);
  },
  clientErrorHandler(error: Error & { code?: string }, socket: Duplex) {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const body = error.code === 'HPE_HEADER_OVERFLOW' ? errorBody('headers-too-large', 'the request headers are larger than the server reads (16 KiB in all)')
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? errorBody('request-timeout', 'the request did not arrive in time')
        : errorBody('bad-request', `not an HTTP request this server reads: ${error.message}`);
    const status = statusOf(body.error as ErrorCode);
    const text = JSON.stringify(body);
    if (socket.writable) {
      socket.write(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
    }
    socket.destroy(error);
  },
};

/** Fastify's own 4xx errors (bad JSON, wrong media type, body too large) as protocol answers. */
function frameworkErrorBody(error: FastifyError): { status: number; body: ErrorBody } | null {
  if (error.code === 'FST_ERR_CTP_INVALID_JSON' || error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || (error instanceof SyntaxError && error.statusCode === 400)) {
    return { status: 400, body: { error: 'invalid-json', message: `malformed JSON body: ${error.message}` } };
  }
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return { status: 415, body: { error: 'unsupported-media-type', message: 'send JSON with content-type: application/json' } };
  }
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return { status: 413, body: { error: 'body-too-large', message: error.message } };
  }
  if (error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
    return { status: 400, body: { error: 'bad-request', message: 'the JSON body is empty' } };
  }
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return { status: error.statusCode, body: { error: 'bad-request', message: error.message } };
  }
  return null;
}
