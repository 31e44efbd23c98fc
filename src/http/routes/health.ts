import type { FastifyInstance } from 'fastify';
import { currentRevision } from '../../db/repositories/revision.js';
import { AppError } from '../../errors.js';
import type { AppDeps } from '../context.js';
import { sendError } from '../errors.js';
import { methodNotAllowed } from './method-not-allowed.js';

const READINESS_TIMEOUT_MS = 2_000;

/** Undefined when the database answers within the bound; otherwise why not (for the log, never the client). */
async function databaseFailure(deps: AppDeps): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<unknown>((resolve) => {
    timer = setTimeout(() => resolve(new Error(`no answer within ${READINESS_TIMEOUT_MS} ms`)), READINESS_TIMEOUT_MS);
  });
  try {
    // What the gate needs, through the same plain-SQL connection the gate and the token exchange read
    // through: the SQLite file at its path still the one open and a database, and the revision row readable.
    const probe = (async () => {
      await deps.db.sql.verify();
      if ((await currentRevision(deps.db.sql)) === null) throw new Error('the revision row is missing');
    })().then(
      () => undefined,
      (error: unknown) => error ?? new Error('the probe failed'),
    );
    return await Promise.race([probe, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function registerHealthRoutes(app: FastifyInstance, deps: AppDeps): void {
  const provider = deps.db.provider;
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (request, reply) => {
    const failure = await databaseFailure(deps);
    // A Redis outage is reported but does not fail readiness: limits then hold per instance (fail open).
    if (failure === undefined) return { status: 'ok', database: provider, ...(deps.redis ? { redis: deps.redis.available ? 'ok' : 'unavailable' } : {}) };
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
