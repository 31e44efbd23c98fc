import { setTimeout as sleep } from 'node:timers/promises';
import type { Database, Tx } from '../db/client.js';
import { AppError } from '../errors.js';

export interface Actor {
  /** Who did it, for the audit trail: --actor, PARTNERCTL_ACTOR, or the OS user. */
  readonly actor: string;
}

export interface AuditEntry {
  action: string;
  partnerId?: string | null;
  details?: Record<string, unknown>;
}

/**
 * Runs one mutation. The first statement bumps the revision row: it takes the write lock up front (SQLite
 * queues writers on its busy timeout instead of failing them at lock upgrade; PostgreSQL serialises on the
 * row lock), and it tells running servers that their caches are stale. The audit event is written in the
 * same transaction, so a change and its record land or vanish together.
 */
export async function mutate<T>(
  db: Database,
  who: Actor,
  /** Returns the result, and the audit entry of the change, or null when nothing changed. */
  work: (tx: Tx) => Promise<{ result: T; audit: AuditEntry | null }>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.prisma.$transaction(
        async (tx) => {
          await tx.$executeRawUnsafe('UPDATE revision SET value = value + 1 WHERE id = 1');
          const { result, audit } = await work(tx);
          // Nothing changed (a runbook's re-run): roll back, so running servers keep their caches.
          if (!audit) throw new Unchanged(result);
          await tx.auditEvent.create({
            data: {
              actor: who.actor,
              action: audit.action,
              partnerId: audit.partnerId ?? null,
              details: JSON.stringify(audit.details ?? {}),
            },
          });
          return result;
        },
        { maxWait: 30_000, timeout: 60_000 },
      );
    } catch (error) {
      if (error instanceof Unchanged) return error.result as T;
      if (error instanceof AppError) throw error;
      if (isTransient(error) && attempt < 8) {
        await sleep(20 * attempt + Math.random() * 50);
        continue;
      }
      throw translateDatabaseError(error);
    }
  }
}

class Unchanged {
  constructor(readonly result: unknown) {}
}

function isTransient(error: unknown): boolean {
  const text = `${(error as { code?: string }).code ?? ''} ${(error as Error).message ?? ''}`;
  return /SQLITE_BUSY|database is locked|P2034|40001|40P01|serializ|deadlock|write conflict|Transaction API error|Unable to start a transaction/i.test(
    text,
  );
}

export function translateDatabaseError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  const message = (error as Error)?.message ?? String(error);
  if (/unique constraint|P2002/i.test(message) || (error as { code?: string }).code === 'P2002') {
    return new AppError('concurrent_update', 'another change to the same record happened at the same time', {
      hint: 'run the command again',
      cause: error,
    });
  }
  if (/SQLITE_BUSY|database is locked|timed out|timeout/i.test(message)) {
    return new AppError('database_unavailable', 'the database stayed busy for too long', {
      hint: 'another partnerctl may be holding a long write; try again',
      cause: error,
    });
  }
  return new AppError('database_unavailable', 'the database failed the request', {
    hint: 'run again with --debug to see the database error',
    cause: error,
  });
}
