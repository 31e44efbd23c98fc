import type { Dialect } from './dialect.js';

/** Plain SQL inside one transaction. Parameters are $1, $2, … in order, each used once. */
export interface SqlTx {
  readonly dialect: Dialect;
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** A statement that returns no rows; resolves to the number of rows it changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
}

/** Reads work on a transaction as well as on the plain reader. */
export type Queryable = Pick<SqlTx, 'dialect' | 'query'>;

export interface TransactionOptions {
  /** The transaction fails (and rolls back) once it has run longer than this. */
  timeoutMs: number;
  /**
   * How long to wait for a lock another process holds before failing (SQLITE_BUSY, or PostgreSQL's
   * lock_timeout); by default SQLite waits up to its busy timeout and PostgreSQL up to `timeoutMs`. On
   * SQLite the wait sleeps the whole thread, so a server's own writes use 0 and retry later.
   */
  lockWaitMs?: number;
}

export class TransactionTimeout extends Error {
  override readonly name = 'TransactionTimeout';
  constructor(timeoutMs: number) {
    super(`the transaction ran longer than ${timeoutMs} ms`);
  }
}

/**
 * The COMMIT was sent and no answer came back (the connection broke or timed out): the transaction may or
 * may not have committed, and only reading the database tells. Never retried.
 */
export class CommitOutcomeUnknown extends Error {
  override readonly name = 'CommitOutcomeUnknown';
  constructor(cause: unknown) {
    super(`the connection failed while committing (${(cause as Error)?.message ?? String(cause)})`, { cause });
  }
}

/** Wraps a transaction's statements so that none starts after the deadline. */
export function withDeadline(tx: SqlTx, timeoutMs: number): SqlTx {
  const deadline = Date.now() + timeoutMs;
  const check = () => {
    if (Date.now() > deadline) throw new TransactionTimeout(timeoutMs);
  };
  return {
    dialect: tx.dialect,
    query: async (sql, params) => {
      check();
      return tx.query(sql, params);
    },
    run: async (sql, params) => {
      check();
      return tx.run(sql, params);
    },
  };
}

/**
 * Rows for a multi-row INSERT: `(…), (…)` with numbered parameters, in batches that stay under both
 * engines' parameter limits (SQLite 32,766; PostgreSQL 65,535).
 */
export function valuesBatches<Row extends readonly unknown[]>(
  rows: readonly Row[],
  maxParameters = 30_000,
): { placeholders: string; params: unknown[] }[] {
  const width = rows[0]?.length ?? 1;
  const perBatch = Math.max(1, Math.floor(maxParameters / width));
  const batches: { placeholders: string; params: unknown[] }[] = [];
  for (let start = 0; start < rows.length; start += perBatch) {
    const params: unknown[] = [];
    const tuples = rows.slice(start, start + perBatch).map((row) => `(${row.map((value) => `$${params.push(value)}`).join(', ')})`);
    batches.push({ placeholders: tuples.join(', '), params });
  }
  return batches;
}
