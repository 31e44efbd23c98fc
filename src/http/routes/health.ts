import type { FastifyInstance } from 'fastify';
import { databaseFailure } from '../../domain/runtime/health.js';
import { AppError } from '../../errors.js';
import { sendError } from '../protocol/errors.js';
import type { AppDeps } from './deps.js';
import { methodNotAllowed } from './method-not-allowed.js';

/** The staleness bound: a database slower than this to answer is not one the gate would wait for either. */
const READINESS_TIMEOUT_MS = 1_000;

export function registerHealthRoutes(app: FastifyInstance, deps: AppDeps): void {
  const provider = deps.db.provider;
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (request, reply) => {
    const { access } = deps;
    // A database known not to answer is not probed again here: the revision poll says when it is back.
    const failure = access.held !== null ? new Error('the database does not answer') : await databaseFailure(deps.db, READINESS_TIMEOUT_MS);
    // A Redis outage is reported but does not fail readiness: limits then hold per instance (fail open).
    const redis = deps.redis ? { redis: deps.redis.available ? 'ok' : 'unavailable' } : {};
    // PostgreSQL: this host's clock against the database server's; `skewed` refuses to mint (503 clock_skewed).
    const clock = deps.clockSync ? { clock: { offset_ms: deps.clockSync.offsetMs, status: deps.clockSync.skewed ? 'skewed' : 'ok' } } : {};
    if (failure === undefined) {
      return {
        status: 'ok',
        database: provider,
        // The access revision this instance's caches reflect (what `partnerctl instances` lists).
        applied_revision: access.appliedRevision,
        ...redis,
        ...clock,
      };
    }
    // Within the staleness budget the instance still decides data requests from its last confirmed state:
    // ready, so that the balancer keeps somewhere to send them (every instance loses the database at once).
    const held = access.held;
    if (access.staleBudgetMs > 0 && held?.serving) {
      return {
        status: 'degraded',
        database: 'unreachable',
        serving_from_revision: access.appliedRevision,
        state_age_s: Math.round(access.stateAgeMs / 100) / 10,
        serving_until: new Date(held.servingUntil).toISOString(),
        ...redis,
        ...clock,
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
