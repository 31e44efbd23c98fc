import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import type { EngineResponse } from '../data-path/forwarder.js';
import { DataRequest, type DataPath } from '../data-path/pipeline.js';
import { BASE_PATH } from '../protocol/paths.js';
import { methodNotAllowed } from './method-not-allowed.js';

const DATA_METHODS: HTTPMethods[] = ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH'];

/**
 * Every path under the base path other than the token and document routes: Fastify's intake (routing, CORS,
 * the JSON body), around the data path's steps. The gate runs before the body is read, the company check
 * after it.
 */
export function registerDataRoutes(app: FastifyInstance, pipeline: DataPath): void {
  const options = {
    onRequest: async (request: FastifyRequest, reply: FastifyReply) => {
      const data = new DataRequest(request.id, performance.now(), request.client);
      request.dataRequest = data;
      try {
        await pipeline.admit(request.raw, data);
      } finally {
        reply.headers(data.headers);
      }
    },
    preHandler: async (request: FastifyRequest) => {
      const body = request.bodyBytes === null ? null : { value: request.body, text: request.rawBody!, bytes: request.bodyBytes };
      await pipeline.authorize(request.raw, request.dataRequest!, body);
    },
  };
  const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const data = request.dataRequest!;
    let engine: EngineResponse;
    try {
      engine = await pipeline.forward(request.raw, data, request.bodyBytes);
    } catch (error) {
      throw pipeline.engineFailed(data, error);
    }
    const answer = pipeline.answer(engine, data);
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  };
  app.route({ method: DATA_METHODS, url: BASE_PATH, ...options, handler });
  app.route({ method: DATA_METHODS, url: `${BASE_PATH}/*`, ...options, handler });
  methodNotAllowed(app, BASE_PATH, DATA_METHODS);
  methodNotAllowed(app, `${BASE_PATH}/*`, DATA_METHODS);
}
