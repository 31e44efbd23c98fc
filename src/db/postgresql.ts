import type { QueryConfig, QueryResult } from 'pg';
import { postgresqlDialect } from './dialect.js';
import type { SqlDatabase } from './sql.js';
import { CommitOutcomeUnknown, withDeadline, type SqlTx, type TransactionOptions } from './unit.js';

export interface PostgresqlTimeouts {
  /** How long opening a connection (or waiting for a free one) may take (default 5 s). */
  connectTimeoutMs?: number;
  /**
   * How long a query outside a transaction may go unanswered before its connection is dropped (default:
   * no limit). A server that accepts and never answers (a partition) would otherwise hold it forever.
   */
  queryTimeoutMs?: number;
}

/** A pool of `poolSize` connections to the PostgreSQL database at `url` (one pool per process). */
export async function openPostgresql(url: string, poolSize: number, timeouts: PostgresqlTimeouts = {}): Promise<SqlDatabase> {
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: timeouts.connectTimeoutMs ?? 5_000,
    keepAlive: true,
    ...(timeouts.queryTimeoutMs !== undefined ? { query_timeout: timeouts.queryTimeoutMs } : {}),
  });
  // An idle connection the server closed (restart, failover) is dropped from the pool; the next query
  // opens a new one. Without a listener the error would crash the process.
  pool.on('error', () => {});
  return {
    dialect: postgresqlDialect,
    epoch: 0,
    verify: async () => {},
    query: async <Row>(sql: string, params: readonly unknown[] = []) =>
      (await pool.query(sql, params as unknown[]).catch(withStatement(sql))).rows as Row[],
    transaction: async <T>(work: (tx: SqlTx) => Promise<T>, options: TransactionOptions) => {
      const client = await pool.connect();
      let broken = false;
      // A checked-out connection has no pool listener: a reset between two statements would otherwise be an
      // unhandled 'error' event (the process would exit). Its statements fail on their own.
      const lost = () => {
        broken = true;
      };
      client.on('error', lost);
      // statement_timeout below bounds the server; this bounds a connection that stopped answering at all.
      // (pg reads query_timeout from a query's config too; its types do not name it.)
      const query = (sql: string, params: readonly unknown[] = []): Promise<QueryResult> =>
        client.query({ text: sql, values: params as unknown[], query_timeout: options.timeoutMs + 1_000 } as QueryConfig);
      try {
        await query('BEGIN');
        // The server enforces the deadline too, so a statement waiting on a lock does not outlive it.
        await query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(options.timeoutMs))}`);
        if (options.lockWaitMs !== undefined) {
          await query(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(options.lockWaitMs))}`);
        }
        const tx: SqlTx = {
          dialect: postgresqlDialect,
          query: async <Row>(sql: string, params: readonly unknown[] = []) =>
            (await query(sql, params).catch(withStatement(sql))).rows as Row[],
          run: async (sql, params = []) => (await query(sql, params).catch(withStatement(sql))).rowCount ?? 0,
        };
        const result = await work(withDeadline(tx, options.timeoutMs));
        await query('COMMIT').catch((error: unknown) => {
          // The server's own answer (an SQLSTATE: a serialization failure at commit, say) is a rollback; no
          // answer at all leaves the outcome unknown.
          if (/^[0-9A-Z]{5}$/.test(String((error as { code?: unknown }).code ?? ''))) throw error;
          broken = true;
          throw new CommitOutcomeUnknown(error);
        });
        return result;
      } catch (error) {
        if (error instanceof CommitOutcomeUnknown) throw error;
        await query('ROLLBACK').catch(() => {
          broken = true;
        });
        throw error;
      } finally {
        client.removeListener('error', lost);
        client.release(broken);
      }
    },
    close: () => pool.end(),
  };
}

/** Keeps the statement on a PostgreSQL error, so that a refused privilege can be named (src/db/roles.ts). */
function withStatement(sql: string): (error: unknown) => never {
  return (error) => {
    if (error && typeof error === 'object' && !('statement' in error)) Object.assign(error, { statement: sql });
    throw error;
  };
}
