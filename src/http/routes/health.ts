import type { FastifyInstance } from 'fastify';
import { databaseFailure } from '../../domain/health.js';
import { AppError } from '../../errors.js';
import { sendError } from '../protocol/errors.js';
import type { AppDeps } from './deps.js';
import { methodNotAllowed } from './method-not-allowed.js';

const READINESS_TIMEOUT_MS = 2_000;

export function registerHealthRoutes(app: FastifyInstance, deps: AppDeps): void {
  const provider = deps.db.provider;
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (request, reply) => {
    const failure = await databaseFailure(deps.db, READINESS_TIMEOUT_MS);
    // A Redis outage is reported but does not fail readiness: limits then hold per instance (fail open).
    if (failure === undefined) {
      return {
        status: 'ok',
        database: provider,
        // The access revision this instance's caches reflect (what `partnerctl instances` lists).
        applied_revision: deps.access.appliedRevision,
        ...(deps.redis ? { redis: deps.redis.available ? 'ok' : 'unavailable' } : {}),
        // PostgreSQL: this host's clock against the database server's; `skewed` refuses to mint (503 clock_skewed).
        ...(deps.clockSync ? { clock: { offset_ms: deps.clockSync.offsetMs, status: deps.clockSync.skewed ? 'skewed' : 'ok' } } : {}),
      };
    }
    return sendError(
      reply,
      request,
      new AppError('database_unavailable', 'readiness probe failed', { cause: failure }),
      `the ${provider} database does not answer`,
    );
  });
  methodNotAllowed(app, '/healthz', ['GET', 'HEAD']);
  methodNotAllowed(app, '/readyz', ['GET', 'HEAD']);
}
