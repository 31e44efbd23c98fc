import type { FastifyInstance } from 'fastify';
import { openApiDocument } from '../openapi/document.js';
import { OPENAPI_PATH } from '../protocol/paths.js';
import { methodNotAllowed } from './method-not-allowed.js';


export function registerOpenApiRoute(app: FastifyInstance): void {
  const body = JSON.stringify(openApiDocument());
  app.get(OPENAPI_PATH, async (_request, reply) => reply.type('application/json; charset=utf-8').send(body));
  methodNotAllowed(app, OPENAPI_PATH, ['GET', 'HEAD']);
}
