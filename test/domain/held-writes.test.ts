import { describe, expect, it } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import { openDatabase } from '../../src/db/client.js';
import { Bookkeeping } from '../../src/domain/runtime/bookkeeping.js';
import { MAX_USAGE_CELLS, UsageCounter } from '../../src/domain/runtime/usage.js';
import { useMigratedDatabase } from './fixtures.js';

// What the server writes off the request path is held in memory while the database does not answer (an
// outage), up to a cap, and says so once, loudly, when the cap is reached.
describe('writes held while the database does not answer', () => {
  const ctx = useMigratedDatabase('sqlite');

  it('the bookkeeping keeps what it cannot write up to its cap, tells onFull once, and keeps the newest value of each row', async () => {
    const db = await openDatabase(resolveDatabase(ctx.backend.url, {}));
    const full: number[] = [];
    const bookkeeping = new Bookkeeping(db, { maxPending: 2, onFull: (cap) => full.push(cap) });
    await db.close();
    const at = new Date();
    bookkeeping.keyPairUsed('kp_a', at);
    bookkeeping.keyPairUsed('kp_b', at);
    expect(await bookkeeping.flush()).toBe(false);
    bookkeeping.keyPairUsed('kp_c', at);
    bookkeeping.keyPairUsed('kp_d', at);
    // A row already held takes its newer value; a new one past the cap is dropped.
    bookkeeping.keyPairUsed('kp_a', new Date(at.getTime() + 1_000));
    expect(full).toEqual([2]);
    expect(bookkeeping.pending).toBe(2);
    expect(await bookkeeping.stop(100)).toBe(false);
  });

  it('usage counts stop at MAX_USAGE_CELLS cells, counting what they drop, and tell onFull once', async () => {
    const db = await openDatabase(resolveDatabase(ctx.backend.url, {}));
    const full: number[] = [];
    const usage = new UsageCounter(db, { now: () => Date.now() }, { onFull: (cap) => full.push(cap) });
    await db.close();
    for (let i = 0; i < MAX_USAGE_CELLS; i++) usage.record('ptn_a', `company-${i}`, 200, 0);
    expect(full).toEqual([]);
    usage.record('ptn_a', 'company-one-more', 200, 0);
    usage.record('ptn_a', 'company-two-more', 200, 0);
    // A cell already held still counts.
    usage.record('ptn_a', 'company-0', 200, 0);
    expect(full).toEqual([MAX_USAGE_CELLS]);
    expect(usage.dropped).toBe(2);
    expect(usage.totals()).toMatchObject({ cells: MAX_USAGE_CELLS, accepted: MAX_USAGE_CELLS + 1 });
    expect(await usage.stop(100)).toBe(false);
  });
});
