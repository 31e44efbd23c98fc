// A rotation of the built product that stops inside its transaction, after the old pair is superseded (or
// revoked) and before the new pair is inserted, and says so on stderr: the crash tests kill it there. The
// pause is the test's own: it wraps the database handle's transaction, the product has no hook for it.
// Usage: node paused-rotation.mjs <partner> [--revoke-issued-tokens]
import { resolveDatabase } from '../../dist/config.js';
import { openDatabase } from '../../dist/db/client.js';
import { rotateKeyPair } from '../../dist/domain/operations/key-pairs.js';

// rotation.test.ts waits for this line.
const PAUSED_LINE = 'paused inside the rotation transaction';
const PAUSE_MS = 120_000;

/** `target` with `name` replaced, every other member read from (and bound to) the target itself. */
function replacing(target, name, replacement) {
  return new Proxy(target, {
    get(object, property) {
      if (property === name) return replacement;
      const value = Reflect.get(object, property, object);
      return typeof value === 'function' ? value.bind(object) : value;
    },
  });
}

const pausingBeforeNewPair = (tx) =>
  replacing(tx, 'run', async (text, params) => {
    if (/^\s*INSERT INTO key_pairs\b/i.test(text)) {
      process.stderr.write(`${PAUSED_LINE}\n`);
      await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
    }
    return tx.run(text, params);
  });

const [partner, ...flags] = process.argv.slice(2);
const db = await openDatabase(resolveDatabase(undefined, process.env, 2));
const sql = replacing(db.sql, 'transaction', (work, options) => db.sql.transaction((tx) => work(pausingBeforeNewPair(tx)), options));
const rotated = await rotateKeyPair({ ...db, sql }, { actor: 'paused-rotation' }, partner, {
  revokeIssuedTokens: flags.includes('--revoke-issued-tokens'),
});
process.stdout.write(`${JSON.stringify({ key_pair_id: rotated.keyPairId })}\n`);
await db.close();
