import type { SqlDatabase } from './sql.js';
import { withDeadline, type SqlTx, type TransactionOptions } from './unit.js';

/** A pool of `poolSize` connections to the PostgreSQL database at `url` (one pool per process). */
export async function openPostgresql(url: string, poolSize: number): Promise<SqlDatabase> {
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: url, max: poolSize, connectionTimeoutMillis: 5_000 });
  // An idle connection the server closed (restart, failover) is dropped from the pool; the next query
  // opens a new one. Without a listener the error would crash the process.
  pool.on('error', () => {});
  return {
    provider: 'postgresql',
    epoch: 0,
    verify: async () => {},
    query: async <Row>(sql: string, params: readonly unknown[] = []) =>
      (await pool.query(sql, params as unknown[]).catch(withStatement(sql))).rows as Row[],
    transaction: async <T>(work: (tx: SqlTx) => Promise<T>, options: TransactionOptions) => {
      const client = await pool.connect();
      let broken = false;
      try {
        await client.query('BEGIN');
        // The server enforces the deadline too, so a statement waiting on a lock does not outlive it.
        await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(options.timeoutMs))}`);
        if (options.lockWaitMs !== undefined) {
          await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(options.lockWaitMs))}`);
        }
        const tx: SqlTx = {
          provider: 'postgresql',
          query: async <Row>(sql: string, params: readonly unknown[] = []) =>
            (await client.query(sql, params as unknown[]).catch(withStatement(sql))).rows as Row[],
          run: async (sql, params = []) => (await client.query(sql, params as unknown[]).catch(withStatement(sql))).rowCount ?? 0,
        };
        const result = await work(withDeadline(tx, options.timeoutMs));
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
        throw error;
      } finally {
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
