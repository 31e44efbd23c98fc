import type { Database } from '../../db/client.js';
import { recordSigningKeys } from '../../db/repositories/signing-keys.js';
import { AppError } from '../../errors.js';
import { findPartner } from './partners.js';
import type { SigningKeys } from './signing-keys.js';
import { TOKEN_TTL_SECONDS } from '../rules/key-pair-state.js';
import { mintToken, type MintedToken } from './tokens.js';
import { runUnit, type Actor } from './transactions.js';

/** An operator's token for trying the API as a partner; it names no key pair, so rotations do not touch it. */
export async function mintTestToken(
  db: Database,
  who: Actor,
  keys: SigningKeys,
  reference: string,
  ttlSeconds: number = TOKEN_TTL_SECONDS,
): Promise<MintedToken> {
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > TOKEN_TTL_SECONDS) {
    throw new AppError('invalid_argument', `ttl must be a whole number of seconds from 1 to ${TOKEN_TTL_SECONDS}, got '${ttlSeconds}'`, { field: 'ttl' });
  }
  return runUnit(db, who, async (unit) => {
    const partner = await findPartner(unit.tx, reference);
    if (partner.status !== 'active') {
      throw new AppError('partner_disabled', `partner '${partner.name}' is disabled`);
    }
    const minted = await mintToken(keys, { partnerId: partner.id, keyPairId: null }, ttlSeconds, unit.clock);
    // The database remembers which keys have signed tokens, so a lost key file is never silently replaced.
    await recordSigningKeys(unit.tx, keys.kids(), new Date(unit.clock.now()));
    unit.audit({ action: 'token.test_minted', partnerId: partner.id, details: { jti: minted.claims.jti, ttl: ttlSeconds } });
    return minted;
  });
}
