// Issue 38.2: request ids carry their time (UUIDv7), so `explain` of an id with nothing on record says which
// it is: not written yet, older than what is kept, answered in a minute where the caps held records back
// (with the count), or a success.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { addUnrecorded, insertDecisions } from '../../src/db/repositories/decisions.js';
import { explainRequest } from '../../src/domain/operations/refusals.js';
import { newRequestId, timeOfRequestId } from '../../src/request-id.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const MINUTE_MS = 60_000;

describe('38.2: request ids are UUIDv7', () => {
  it('carry the instant they were made at, in order, and are unique', () => {
    const at = Date.UTC(2026, 10, 28, 4, 30, 12, 345);
    const ids = Array.from({ length: 50_000 }, () => newRequestId(at));
    for (const id of ids.slice(0, 100)) expect(id).toMatch(UUID_V7);
    expect(new Set(ids).size).toBe(ids.length);
    expect(timeOfRequestId(ids[0]!)).toBe(at);
    expect(timeOfRequestId(newRequestId(0))).toBe(0);
    expect(timeOfRequestId(newRequestId(2 ** 48 - 1))).toBe(2 ** 48 - 1);
    expect(newRequestId(at) < newRequestId(at + 1)).toBe(true);
    // A v4 id (an older server's) carries no time.
    expect(timeOfRequestId('3f0c1f7e-0d3b-4d53-9a55-8f4f0e2f6a10')).toBeNull();
  });
});

describe.each(BACKENDS)('38.2: explain of an id with nothing on record says why (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
    });
    afterAll(async () => {
      await db?.close();
      await backend?.dispose();
    });

    const why = async (id: string) => {
      const error = await explainRequest(db, id).then(
        () => null,
        (thrown: unknown) => thrown as { code: string; message: string },
      );
      expect(error?.code).toBe('not_found');
      return error!.message;
    };

    it('not written yet, older than what is kept, in a minute the caps held back, or a success', async () => {
      const now = db.clock.now();
      expect(await why(newRequestId(now - 1_000))).toMatch(/nothing is on record for request \S+ yet: .*servers write within 10 s; try again$/);
      // Nothing kept at all: older than any record kept.
      expect(await why(newRequestId(now - 3_600_000))).toMatch(/before any record kept; records are pruned past the retention/);

      const oldest = new Date(Math.floor((now - 3_600_000) / MINUTE_MS) * MINUTE_MS);
      const heldMinute = oldest.getTime() + 10 * MINUTE_MS;
      await db.sql.transaction(
        async (tx) => {
          await insertDecisions(tx, [
            {
              requestId: newRequestId(oldest.getTime()), at: oldest, instanceId: 'srv_a', route: 'data', partnerId: null, keyPairId: null, tokenId: null,
              companyId: null, clientAddress: '192.0.2.1', status: 401, reason: 'token_missing', method: 'GET', path: '/public/v1/prices', engineStatus: null, engineMs: null, traceId: null, bytes: null,
            },
          ]);
          await addUnrecorded(tx, [
            { minute: new Date(heldMinute), instanceId: 'srv_a', keyKind: 'address', keyValue: '192.0.2.9', heldBy: 'address', refusals: 40 },
            { minute: new Date(heldMinute), instanceId: 'srv_b', keyKind: 'partner', keyValue: 'p_x', heldBy: 'token', refusals: 2 },
          ]);
        },
        { timeoutMs: 5_000 },
      );
      expect(await why(newRequestId(oldest.getTime() - 1))).toMatch(new RegExp(`before the oldest record kept \\(${oldest.toISOString()}\\)`));
      expect(await why(newRequestId(heldMinute + 30_000))).toMatch(/in a minute where the caps held back 42 records \((40 over a cap per address, 2 over a cap per token|2 over a cap per token, 40 over a cap per address)\); it may be one of them$/);
      expect(await why(newRequestId(heldMinute + MINUTE_MS + 1))).toMatch(/no cap held anything back that minute, so it was a success \(successes are on record only inside a recording window\)$/);
      expect(await why('3f0c1f7e-0d3b-4d53-9a55-8f4f0e2f6a10')).toMatch(/its id carries no time/);
    });
  });
});
