import type { FastifyInstance } from 'fastify';
import { BASE_PATH } from '../config.js';
import { openApiDocument } from '../openapi.js';
import { methodNotAllowed } from './method-not-allowed.js';

export const OPENAPI_PATH = `${BASE_PATH}/openapi.json`;

export function registerOpenApiRoute(app: FastifyInstance): void {
  const body = JSON.stringify(openApiDocument());
  app.get(OPENAPI_PATH, async (_request, reply) => reply.type('application/json; charset=utf-8').send(body));
  methodNotAllowed(app, OPENAPI_PATH, ['GET', 'HEAD']);
}
