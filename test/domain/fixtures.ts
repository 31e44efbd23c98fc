import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect } from 'vitest';
import type { Provider } from '../../src/config.js';
import type { Database } from '../../src/db/client.js';
import { AppError, type ErrorCode } from '../../src/errors.js';
import type { Actor } from '../../src/domain/operations/transactions.js';
import { createBackend, openMigrated, type TestBackend } from '../support/backends.js';

export const ALICE: Actor = { actor: 'alice@ops' };

export interface MigratedDatabase {
  readonly backend: TestBackend;
  readonly db: Database;
}

/** A fresh, migrated database for the enclosing describe block, closed and dropped after it. */
export function useMigratedDatabase(provider: Provider): MigratedDatabase {
  let backend: TestBackend | undefined;
  let db: Database | undefined;
  beforeAll(async () => {
    backend = await createBackend(provider);
    db = await openMigrated(backend);
  });
  afterAll(async () => {
    await db?.close();
    await backend?.dispose();
  });
  return {
    get backend() {
      if (!backend) throw new Error('the backend is only there inside tests');
      return backend;
    },
    get db() {
      if (!db) throw new Error('the database is only there inside tests');
      return db;
    },
  };
}

/** A partner name no other test in the same database uses. */
export function uniqueName(label = 'partner'): string {
  return `${label}-${randomBytes(5).toString('hex')}`;
}

/** Runs `action` and returns the AppError it must throw with `code`. */
/** `action` (a promise, a function, or a check's answer: undefined when it accepts at once) must fail with `code`. */
export async function expectAppError(action: unknown, code: ErrorCode): Promise<AppError> {
  let outcome: unknown;
  try {
    await (typeof action === 'function' ? (action as () => unknown)() : action);
  } catch (error) {
    outcome = error;
  }
  expect(outcome, `expected AppError '${code}'`).toBeInstanceOf(AppError);
  expect((outcome as AppError).code).toBe(code);
  return outcome as AppError;
}

export async function revisionOf(db: Database): Promise<number> {
  const [row] = await db.sql.query<{ value: number | string }>('SELECT value FROM revision WHERE id = 1');
  return Number(row!.value);
}

export async function partnerCount(db: Database): Promise<number> {
  const [row] = await db.sql.query<{ n: number | string }>('SELECT COUNT(*) AS n FROM partners');
  return Number(row!.n);
}

export async function auditCount(db: Database, partnerId?: string): Promise<number> {
  const [row] = partnerId
    ? await db.sql.query<{ n: number | string }>('SELECT COUNT(*) AS n FROM audit_events WHERE partner_id = $1', [partnerId])
    : await db.sql.query<{ n: number | string }>('SELECT COUNT(*) AS n FROM audit_events');
  return Number(row!.n);
}
