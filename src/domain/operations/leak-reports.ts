// GitHub secret scanning's alerts (src/http/routes/secret-scanning.ts receives and verifies them): each
// token is looked up as `partnerctl lookup` does, a genuine live credential is contained per policy, and
// each alert is recorded once (leak.reported, in the audit chain and the webhook outbox).
import { createHash } from 'node:crypto';
import type { Database } from '../../db/client.js';
import { insertLeakReport, insertLeakReports, leakReports, markPairLeaked, type LeakReportRow } from '../../db/repositories/webhooks.js';
import { isAppError } from '../../errors.js';
import { revokeKeyPairIn, revokeTokensIn } from './key-pairs.js';
import { lookup, type Containment, type LookupResult } from './lookup.js';
import type { SigningKeys } from './signing-keys.js';
import { runTransaction, runUnit, type UnitPolicy } from './transactions.js';

/** Who the audit trail names for what the receiver does. */
export const SECRET_SCANNING_ACTOR = 'github-secret-scanning';

export interface LeakAlert {
  token: string;
  type: string;
  url: string;
  source: string;
}

export type LeakLabel = 'true_positive' | 'false_positive';

export interface LeakVerdict {
  token_raw: string;
  token_type: string;
  label: LeakLabel;
}

export type LeakPolicy = 'contain' | 'report';

/** Lookups at once: argon2 runs on libuv's thread pool (4 threads by default). */
const CONCURRENCY = 32;

/**
 * The receiver's writes never wait for a lock another process holds (on SQLite the wait would sleep the
 * event loop, and every request with it; on PostgreSQL it would hold a connection of the pool): a busy
 * database is tried again after pauses off the event loop for up to 3 s, then the batch is answered 503
 * and GitHub sends it again.
 */
const WRITE_POLICY: UnitPolicy = { timeoutMs: 5_000, lockWaitMs: 0, retryForMs: 3_000 };

function fingerprintOf(alert: LeakAlert): string {
  return createHash('sha256').update(alert.token).update('\n').update(alert.url).digest('hex');
}

/** A genuine credential of ours, live or not: an access key we issued, a secret matching its hash, a token our keys signed. */
function genuineCredential(result: LookupResult): boolean {
  if (result.kind === 'access_key') return true;
  if (result.kind === 'secret_key' || result.kind === 'token') return result.genuine === true;
  return false;
}

/** What the receiver does, typed: the pair's brake, or the partner's tokens refused. */
export type LeakAction = { kind: 'revoke_key_pair'; partnerId: string; keyPairId: string } | { kind: 'revoke_tokens'; partnerId: string };

/**
 * What `contain` does for a genuine credential, from `lookup`'s typed containment: for a secret (lookup
 * rotates an active pair, revokes any other live one), the brake for its pair (revoke-keys --key-pair: it
 * mints nothing more and its tokens are refused at once; a new pair minted here would be seen by no one, so
 * the operator issues it); for a token, revoke-tokens; nothing when lookup contains nothing (an access key
 * alone, public by design, or a pair with nothing live).
 */
export function leakAction(kind: LookupResult['kind'], contain: Containment | null): LeakAction | null {
  if (contain === null) return null;
  if (kind === 'secret_key' && contain.action !== 'revoke_tokens') return { kind: 'revoke_key_pair', partnerId: contain.partnerId, keyPairId: contain.keyPairId };
  if (kind === 'token' && contain.action === 'revoke_tokens') return { kind: 'revoke_tokens', partnerId: contain.partnerId };
  return null;
}

/** A containment as the audit trail records it (data, not a command line). */
function containmentDetails(contain: Containment): Record<string, unknown> {
  return {
    action: contain.action,
    partner_id: contain.partnerId,
    ...(contain.action === 'revoke_tokens' ? {} : { key_pair_id: contain.keyPairId }),
    ...(contain.action === 'rotate_keys' ? { revoke_issued_tokens: contain.revokeIssuedTokens } : {}),
  };
}

/**
 * Handles one batch: the answer in GitHub's feedback format, one verdict per alert in order. An alert
 * already handled (the same token at the same URL) is answered from its record, and nothing is done again.
 */
export async function handleLeakAlerts(db: Database, keys: SigningKeys, alerts: readonly LeakAlert[], policy: LeakPolicy): Promise<LeakVerdict[]> {
  const fingerprints = alerts.map(fingerprintOf);
  const known = await leakReports(db.sql, [...new Set(fingerprints)]);
  const labels = new Map<string, Promise<LeakLabel>>();
  // The same token at several URLs is looked up (argon2 and all) once.
  const looked = new Map<string, Promise<LookupResult>>();
  const lookupOnce = (token: string) => {
    let result = looked.get(token);
    if (!result) {
      result = lookup(db, token, async () => keys);
      looked.set(token, result);
    }
    return result;
  };
  const queue: Array<() => Promise<void>> = [];
  // A database that fails midway fails the whole answer (5xx): GitHub sends the batch again, and what was
  // already handled is answered from its record then.
  let failure: { error: unknown } | undefined;
  // False positives are recorded too (without an audit event: nothing happened), so that a replayed batch
  // is answered from its records instead of an argon2 verification per item each time.
  const falsePositives: LeakReportRow[] = [];
  // The lookups (argon2 and all) run side by side, the containments one at a time: side by side they would
  // only queue on the revision row. After a failure none is tried: the answer is a 503 anyway.
  let writes: Promise<unknown> = Promise.resolve();
  const write = (work: () => Promise<void>): Promise<void> => {
    const turn = writes.then(() => {
      if (failure) throw failure.error;
      return work();
    });
    writes = turn.catch(() => {});
    return turn;
  };
  for (const [index, alert] of alerts.entries()) {
    const fingerprint = fingerprints[index]!;
    if (labels.has(fingerprint)) continue;
    const recorded = known.get(fingerprint);
    if (recorded) {
      labels.set(fingerprint, Promise.resolve(recorded.label as LeakLabel));
      continue;
    }
    let settle!: (label: LeakLabel) => void;
    labels.set(fingerprint, new Promise<LeakLabel>((resolve) => (settle = resolve)));
    queue.push(async () => {
      try {
        const handled = await handleOne(db, lookupOnce, write, alert, fingerprint, policy);
        // A token's signature is judged with this instance's key file, which may lag a rotation: its verdict
        // is not kept (checking it again costs a signature, not an argon2 hash).
        if (handled.label === 'false_positive' && handled.kind !== 'token') {
          falsePositives.push({ fingerprint, label: 'false_positive', kind: handled.kind, partnerId: null, keyPairId: null, action: 'none', reportedAt: new Date(db.clock.now()) });
        }
        settle(handled.label);
      } catch (error) {
        failure ??= { error };
        settle('false_positive');
      }
    });
  }
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, queue.length) }, async () => {
      // After a failure the answer is a 503 whatever the rest gives: the rest is not looked up.
      for (let job = queue.shift(); job && !failure; job = queue.shift()) await job();
    }),
  );
  if (failure) throw failure.error;
  if (falsePositives.length > 0) await runTransaction(db, (tx) => insertLeakReports(tx, falsePositives), WRITE_POLICY);
  return Promise.all(
    alerts.map(async (alert, index) => ({ token_raw: alert.token, token_type: alert.type, label: await labels.get(fingerprints[index]!)! })),
  );
}

async function handleOne(
  db: Database,
  lookupOnce: (token: string) => Promise<LookupResult>,
  write: (work: () => Promise<void>) => Promise<void>,
  alert: LeakAlert,
  fingerprint: string,
  policy: LeakPolicy,
): Promise<{ label: LeakLabel; kind: string }> {
  let result: LookupResult;
  try {
    result = await lookupOnce(alert.token);
  } catch (error) {
    // Malformed (a wrong checksum: never reaches argon2) or matching nothing of ours.
    if (isAppError(error) && (error.code === 'invalid_argument' || error.code === 'not_found')) return { label: 'false_positive', kind: 'unknown' };
    throw error;
  }
  if (!genuineCredential(result)) return { label: 'false_positive', kind: result.kind };
  const contain = policy === 'contain' ? leakAction(result.kind, result.contain) : null;
  const partnerId = result.partner?.id ?? null;
  const pairId = result.pair?.id ?? null;
  await write(() => runUnit(db, { actor: SECRET_SCANNING_ACTOR }, async (unit) => {
    const now = new Date(unit.clock.now());
    const fresh = await insertLeakReport(unit.tx, {
      fingerprint,
      label: 'true_positive',
      kind: result.kind,
      partnerId,
      keyPairId: pairId,
      action: contain?.kind ?? 'none',
      reportedAt: now,
    });
    // The same alert handled meanwhile (GitHub's duplicates can arrive together): nothing audited, rolled back.
    if (!fresh) return;
    let changed = false;
    if (contain?.kind === 'revoke_key_pair') changed = (await revokeKeyPairIn(unit, contain.partnerId, { keyPairId: contain.keyPairId })).changed;
    else if (contain?.kind === 'revoke_tokens') changed = (await revokeTokensIn(unit, contain.partnerId)).changed;
    if (pairId) await markPairLeaked(unit.tx, pairId, now, alert.url);
    unit.audit({
      action: 'leak.reported',
      partnerId,
      details: {
        kind: result.kind,
        key_pair_id: pairId,
        token_type: alert.type,
        url: alert.url,
        source: alert.source,
        status: result.status,
        policy,
        action: contain ? contain.kind : 'none',
        ...(contain ? { changed } : { advice: result.contain && containmentDetails(result.contain) }),
      },
    });
  }, WRITE_POLICY));
  return { label: 'true_positive', kind: result.kind };
}
