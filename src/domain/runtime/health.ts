import type { Database } from '../../db/client.js';
import { currentRevision } from '../../db/repositories/revision.js';

/**
 * Whether the database can serve the gate, within `timeoutMs`: the SQLite file at its path still the one
 * open and a database (or the PostgreSQL server answering), and the revision row readable. Undefined when
 * it can; otherwise why not (for the log, never a client).
 */
export async function databaseFailure(db: Database, timeoutMs: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<unknown>((resolve) => {
    timer = setTimeout(() => resolve(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    const probe = (async () => {
      await db.sql.verify();
      if ((await currentRevision(db.sql)) === null) throw new Error('the revision row is missing');
    })().then(
      () => undefined,
      (error: unknown) => error ?? new Error('the probe failed'),
    );
    return await Promise.race([probe, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
