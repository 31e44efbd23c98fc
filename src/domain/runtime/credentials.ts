import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Database } from '../../db/client.js';
import { keyPairForExchange, noteAssertionJti, touchLastUsed, type ExchangeRow } from '../../db/repositories/key-pairs.js';
import { AppError, isAppError } from '../../errors.js';
import { Bookkeeping } from './bookkeeping.js';
import { CLOCK_TOLERANCE_MS, type ClockSync } from './clock-sync.js';
import { ACCESS_KEY_PATTERN, newKeyMaterial } from '../rules/identifiers.js';
import { exchanged } from '../rules/key-pair-lifecycle.js';
import { overlapEnded } from '../rules/key-pair-state.js';
import { matcherOf } from '../operations/networks.js';
import { hashSecret, verifySecret } from '../rules/secrets.js';
import type { SigningKeys } from '../operations/signing-keys.js';
import { mintToken, type MintedToken } from '../operations/tokens.js';
import { TOKEN_TTL_SECONDS } from '../rules/key-pair-state.js';
import { exchangeRefusal, refusalError, type Proof } from '../rules/verdict.js';
import { AssertionVerifier, decodeAssertion, type ProvenAssertion } from './assertions.js';

/** A refused pair's last_refused_at (and unlisted_refused_at, from the same address) is noted at most this often. */
const REFUSAL_WRITE_INTERVAL_MS = 60_000;
const MAX_KEY_LENGTH = 256;
/**
 * How long the first exchange after a brake (revoke-tokens) waits for its mint to be on record before it is
 * answered 503: the write never waits on another process's lock, it is tried again with a growing pause.
 */
const BRAKE_NOTE_WAIT_MS = 2_000;

/**
 * Exchanges a key pair for a token. Every refusal looks the same and costs the same: an unknown access key
 * still pays for one argon2 verification (against a hash of a random secret), and the pair's and
 * partner's status are checked only after the secret, on every exchange.
 *
 * Everything the verdict and the transitions read is the pair's row, read for each exchange: nothing in
 * this process's memory overlays it, so every instance decides alike. What an exchange changes (the switch,
 * last_used_at, last_refused_at) is decided by the lifecycle and written to the row.
 *
 * After a pair's first successful argon2 verification, an HMAC of its secret under a per-process random key
 * is remembered; later exchanges compare against it in constant time instead of paying argon2 again. A
 * presented secret that does not match it still goes through argon2, so a wrong secret costs the same as
 * an unknown key.
 */
export class CredentialExchange {
  private readonly digestKey = randomBytes(32);
  private readonly digests = new Map<string, Buffer>();
  /** Compared against when a key has no digest, so that costs what a comparison does. */
  private readonly noDigest = randomBytes(32);
  /** Access key -> pair id, for the pairs in `digests`: filled with them, on a successful argon2 verification. */
  private readonly pairsByAccessKey = new Map<string, string>();
  private dummyHash: Promise<string> | undefined;

  constructor(
    private readonly db: Database,
    private readonly keys: SigningKeys,
    private readonly maxCached = 100_000,
    /** Where last_used_at, last_refused_at and the switch go: written off the request path, never awaited by an answer. */
    readonly bookkeeping: Bookkeeping = new Bookkeeping(db),
    /** This host's clock against the database server's (PostgreSQL): beyond the tolerance nothing is minted. */
    private readonly clockSync: Pick<ClockSync, 'skewed' | 'offsetMs'> | null = null,
    /** Client assertions: the audiences they must name (PUBLIC_API_TOKEN_URL and its issuer URL). */
    readonly assertions: AssertionVerifier = new AssertionVerifier([]),
  ) {}

  /** Computes the decoy hash ahead of the first request. */
  warmUp(): Promise<string> {
    this.dummyHash ??= hashSecret(newKeyMaterial().secretKey);
    return this.dummyHash;
  }

  /**
   * `client` is the client's address (the server's determination, protocol/client-address.ts): a partner
   * with network rules is refused from anywhere else with `address_not_allowed`, whatever the secret (the
   * answer tells nothing of it), and a genuine secret refused so is recorded on its pair. `onPair` is told
   * the pair an access key named and its partner (accepted or refused), for the request log and the records: never the secret, never the token.
   */
  async exchange(
    accessKey: string,
    secretKey: string,
    client = '',
    onPair?: (keyPairId: string, partnerId: string) => void,
  ): Promise<MintedToken & { keyPairId: string }> {
    const wellFormed =
      ACCESS_KEY_PATTERN.test(accessKey) && secretKey.length > 0 && secretKey.length <= MAX_KEY_LENGTH;
    const pair = wellFormed ? await this.pairOf(accessKey) : null;
    // A public_key pair has no secret: a secret for it costs what a wrong one does, and is one.
    if (!pair || pair.secretHash === null) await verifySecret(await this.warmUp(), secretKey.slice(0, MAX_KEY_LENGTH));
    if (!pair) throw refusalError('pair_unknown', 'exchange');
    onPair?.(pair.id, pair.partnerId);
    const genuine = pair.secretHash !== null && (await this.secretMatches(pair.id, accessKey, pair.secretHash, secretKey));
    return this.conclude(pair, genuine, client, null);
  }

  /**
   * Exchanges a client assertion (private_key_jwt) for a token: the pair its `iss` names, checked by the
   * AssertionVerifier, then the same verdict and the same bookkeeping as a secret's exchange. Its jti is
   * noted in the database once everything else holds: the same assertion presented again, to this or any
   * instance, is refused (`assertion_replayed`) until it expires.
   */
  async exchangeAssertion(
    jwt: string,
    client = '',
    onPair?: (keyPairId: string, partnerId: string) => void,
    /** OAuth's client_id, when the client sends one: it must be the assertion's issuer. */
    clientId?: string,
  ): Promise<MintedToken & { keyPairId: string }> {
    const decoded = decodeAssertion(jwt);
    if (!decoded || (clientId !== undefined && clientId !== decoded.issuer)) throw refusalError('assertion_invalid', 'exchange');
    const pair = ACCESS_KEY_PATTERN.test(decoded.issuer) ? await this.pairOf(decoded.issuer) : null;
    if (!pair) throw refusalError('pair_unknown', 'exchange');
    onPair?.(pair.id, pair.partnerId);
    const checked = await this.assertions.check(pair, decoded, decoded.issuer, this.db.clock.now());
    return this.conclude(pair, typeof checked === 'string' ? checked : true, client, typeof checked === 'string' ? null : checked);
  }

  /** The verdict on a presented pair, what it records, and (accepted) the token: one sequence for both kinds. */
  private async conclude(pair: ExchangeRow, proof: Proof, client: string, assertion: ProvenAssertion | null): Promise<MintedToken & { keyPairId: string }> {
    const now = this.db.clock.now();
    const genuine = proof === true;
    const partner = {
      status: pair.partnerStatus,
      tokensRevokedBefore: pair.tokensRevokedBefore,
      allows: matcherOf(pair.allowFrom),
      credentialsPolicy: pair.credentialsPolicy,
    };
    let reason = exchangeRefusal(pair, partner, proof, client, now);
    if (reason === null && assertion !== null && !(await this.fresh(pair.id, assertion, now))) reason = 'assertion_replayed';
    if (reason === 'address_not_allowed' && genuine) this.recordUnlisted(pair, client, now);
    else if (reason !== null && reason !== 'partner_disabled') {
      // A retiring pair exchanges until its overlap ends; then it is refused like any superseded pair.
      if (genuine && overlapEnded(pair, now)) this.bookkeeping.overlapEnded(pair.id);
      this.recordRefusal(pair, now);
    }
    if (reason !== null) throw refusalError(reason, 'exchange');
    if (this.clockSync?.skewed) {
      throw new AppError('clock_skewed', `this instance's clock is ${this.clockSync.offsetMs} ms off the database server's (tolerance ${CLOCK_TOLERANCE_MS} ms): it mints no token`);
    }
    const { lastUsed, switched } = exchanged(pair, now);
    if (lastUsed === 'after_answer') this.bookkeeping.keyPairUsed(pair.id, new Date(now));
    const minted = await mintToken(this.keys, { partnerId: pair.partnerId, keyPairId: pair.id }, TOKEN_TTL_SECONDS, this.db.clock);
    // `revoke-tokens` re-run tells whether a token may be live since its previous cut-off from last_used_at:
    // the first token after a brake is on record before it is handed out (its iat taken before the write),
    // so a re-run either sees it (and its cut-off, taken under the write lock, is later) or ran before it.
    if (lastUsed === 'before_answer') await this.noteFirstAfterBrake(pair.id, new Date(minted.claims.issuedAtMs));
    if (switched) this.bookkeeping.keyPairSwitched(switched.pairId, switched.at, switched.retiresAt);
    return { ...minted, keyPairId: pair.id };
  }

  /** Notes an accepted assertion's jti (every instance shares the table); false when it was noted before and has not expired. */
  private async fresh(pairId: string, assertion: ProvenAssertion, now: number): Promise<boolean> {
    try {
      return await noteAssertionJti(this.db.sql, pairId, assertion.jti, new Date(assertion.expiresAtMs), new Date(now));
    } catch (error) {
      throw new AppError('database_unavailable', 'the service cannot check credentials right now', { cause: error });
    }
  }

  /**
   * Whether this secret is the one already verified (by argon2, in this process) for this access key: an
   * HMAC and a constant-time comparison, no database and no argon2. Says nothing about the pair's or the
   * partner's status; it lets the token endpoint's per-key throttle spare the real partner while someone
   * else guesses at its (public) access key.
   */
  isKnownGood(accessKey: string, secretKey: string): boolean {
    if (secretKey.length === 0 || secretKey.length > MAX_KEY_LENGTH) return false;
    const pairId = this.pairsByAccessKey.get(accessKey);
    const known = pairId === undefined ? undefined : this.digests.get(pairId);
    // The same work whether or not the key has a digest: an HMAC and one comparison.
    const matches = timingSafeEqual(known ?? this.noDigest, this.digestOf(secretKey));
    return known !== undefined && matches;
  }

  private digestOf(secret: string): Buffer {
    return createHmac('sha256', this.digestKey).update(secret).digest();
  }

  private async secretMatches(pairId: string, accessKey: string, hash: string, secret: string): Promise<boolean> {
    const presented = this.digestOf(secret);
    const known = this.digests.get(pairId);
    if (known && timingSafeEqual(known, presented)) return true;
    if (!(await verifySecret(hash, secret))) return false;
    if (this.digests.size >= this.maxCached) {
      this.digests.clear();
      this.pairsByAccessKey.clear();
    }
    this.digests.set(pairId, presented);
    this.pairsByAccessKey.set(accessKey, pairId);
    return true;
  }

  /** The database failing is the service being unavailable (503), never a 500 or a refusal. */
  private async pairOf(accessKey: string) {
    try {
      return await keyPairForExchange(this.db.sql, accessKey);
    } catch (error) {
      if (isAppError(error)) throw error;
      throw new AppError('database_unavailable', 'the service cannot check credentials right now', { cause: error });
    }
  }

  /**
   * last_refused_at: a refusal is noted (through the bookkeeping, off the answer's path) unless the row has
   * one from the last minute.
   */
  private recordRefusal(pair: ExchangeRow, now: number): void {
    if (pair.lastRefusedAt !== null && now - pair.lastRefusedAt.getTime() < REFUSAL_WRITE_INTERVAL_MS) return;
    this.bookkeeping.keyPairRefused(pair.id, new Date(now));
  }

  /**
   * unlisted_refused_at and its address: noted (off the answer's path) unless the row has one from the same
   * address within the last minute.
   */
  private recordUnlisted(pair: ExchangeRow, address: string, now: number): void {
    const last = pair.unlistedRefusedAt;
    if (last !== null && pair.unlistedRefusedAddress === address && now - last.getTime() < REFUSAL_WRITE_INTERVAL_MS) return;
    this.bookkeeping.keyPairRefusedFromUnlisted(pair.id, new Date(now), address);
  }

  /**
   * last_used_at of the first token after a brake, written before the token is handed out: never waiting on
   * another process's lock, tried again for up to BRAKE_NOTE_WAIT_MS, then 503 (the token is not handed out).
   */
  private async noteFirstAfterBrake(pairId: string, at: Date): Promise<void> {
    // Real time waited, not the domain's clock: a monotonic reading.
    const deadline = performance.now() + BRAKE_NOTE_WAIT_MS;
    for (let pause = 25; ; pause = Math.min(pause * 2, 400)) {
      try {
        await this.db.sql.transaction((tx) => touchLastUsed(tx, pairId, at), { timeoutMs: BRAKE_NOTE_WAIT_MS, lockWaitMs: 0 });
        return;
      } catch (error) {
        // The last try is at the deadline itself: the whole bound is waited, never a pause short of it.
        const left = deadline - performance.now();
        if (left <= 0) throw new AppError('database_unavailable', 'the service cannot issue a token right now', { cause: error });
        await new Promise((resolve) => setTimeout(resolve, Math.min(pause, left)));
      }
    }
  }
}
