import type { FastifyInstance } from 'fastify';
import { AppError } from '../../errors.js';
import type { AppDeps } from '../context.js';
import { sendError } from '../errors.js';
import { methodNotAllowed } from './method-not-allowed.js';

const READINESS_TIMEOUT_MS = 2_000;

async function databaseAnswers(deps: AppDeps): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), READINESS_TIMEOUT_MS);
  });
  try {
    // The same plain-SQL connection the gate and the token exchange read through.
    const probe = deps.db.sql.query('SELECT 1').then(
      () => true,
      () => false,
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
    if (await databaseAnswers(deps)) return { status: 'ok', database: provider };
    return sendError(
      reply,
      request,
      new AppError('database_unavailable', 'readiness probe failed'),
      `the ${provider} database does not answer`,
    );
  });
  methodNotAllowed(app, '/healthz', ['GET', 'HEAD']);
  methodNotAllowed(app, '/readyz', ['GET', 'HEAD']);
}
