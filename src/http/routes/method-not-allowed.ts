import type { FastifyInstance, HTTPMethods } from 'fastify';
import { AppError } from '../../errors.js';

/** Every other method fastify knows, on a path that answers only `allowed`: 405 with Allow. */
export function methodNotAllowed(app: FastifyInstance, url: string, allowed: readonly string[]): void {
  const others = app.supportedMethods.filter((method) => !allowed.includes(method));
  const allow = allowed.join(', ');
  const refuse = async (): Promise<never> => {
    throw new AppError('method_not_allowed', `only ${allow} is allowed on this path`);
  };
  app.route({
    method: others as HTTPMethods[],
    url,
    // Refused before any body is read, so a large or odd body does not turn the 405 into a 413 or 415.
    onRequest: async (_request, reply) => {
      reply.header('allow', allow);
      await refuse();
    },
    handler: refuse,
  });
}
