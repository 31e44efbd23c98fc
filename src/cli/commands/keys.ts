import { issueKeyPair, revokeKeyPair, rotateKeyPair, type IssuedKeyPair } from '../../domain/key-pairs.js';
import { openSigningKeys } from '../../domain/signing-key-guard.js';
import { mintTestToken } from '../../domain/test-tokens.js';
import { AppError } from '../../errors.js';
import { KEY_PAIR_ID_PATTERN } from '../../domain/identifiers.js';
import { parseDuration } from '../../domain/validation.js';
import { iso, type Output } from '../output.js';
import { confirmDestructive } from '../prompts.js';
import type { Session } from '../session.js';
import { resolvePartnerArgument } from './partners.js';

async function showNewSecret(out: Output, title: string, issued: IssuedKeyPair, extra: [string, string][] = []) {
  const chalk = await out.chalk();
  out.line(title);
  out.line(
    await out.fields([
      ['partner', `${issued.partner.name} (${issued.partner.id})`],
      ['key pair id', issued.keyPairId],
      ...extra,
      ['access key', issued.accessKey],
      ['secret key', chalk.bold(issued.secretKey)],
    ]),
  );
  out.line();
  out.line(chalk.yellow('The secret key is shown once, now, and never again: store it now (only its hash is kept).'));
}

function newPairJson(issued: IssuedKeyPair) {
  return {
    partner_id: issued.partner.id,
    key_pair_id: issued.keyPairId,
    access_key: issued.accessKey,
    secret_key: issued.secretKey,
    expires_at: iso(issued.expiresAt),
  };
}

function expiryOption(value: string | undefined): { expiresInMs?: number } {
  return value === undefined ? {} : { expiresInMs: parseDuration(value, '--expires-in') };
}

export async function runIssueKeys(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  options: { expiresIn?: string } = {},
): Promise<void> {
  const expiry = expiryOption(options.expiresIn);
  const reference = await resolvePartnerArgument(session, partnerArgument);
  const db = await session.db();
  const issued = await issueKeyPair(db, session.who, reference, expiry);
  if (out.json) {
    out.emitJson(newPairJson(issued));
    return;
  }
  await showNewSecret(out, 'Issued a new key pair.', issued, issued.expiresAt ? [['expires', iso(issued.expiresAt)!]] : []);
}

export async function runRotateKeys(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  options: { revokeIssuedTokens?: boolean; expiresIn?: string },
): Promise<void> {
  const expiry = expiryOption(options.expiresIn);
  const reference = await resolvePartnerArgument(session, partnerArgument);
  if (options.revokeIssuedTokens) {
    await confirmDestructive(
      session,
      `Rotate the keys of '${reference}', revoke its active and superseded pairs and refuse every token it holds (test tokens too), at once`,
    );
  }
  const db = await session.db();
  const pauseInsideMs = session.config.testPauseInRotationMs;
  const onPaused = () => out.note('partnerctl: test hook: paused inside the rotation transaction');
  const rotated = await rotateKeyPair(db, session.who, reference, {
    revokeIssuedTokens: options.revokeIssuedTokens === true,
    ...expiry,
    pauseInsideMs,
    onPaused,
  });
  if (out.json) {
    out.emitJson({
      ...newPairJson(rotated),
      superseded_key_pair_id: rotated.supersededKeyPairId,
      revoked_issued_tokens: rotated.revokedIssuedTokens,
      revoked_key_pair_ids: rotated.revokedKeyPairIds,
      tokens_revoked_before: rotated.tokensRevokedBefore === null ? null : new Date(rotated.tokensRevokedBefore).toISOString(),
      changed: true,
    });
    return;
  }
  const fate = rotated.revokedIssuedTokens
    ? `revoked with ${rotated.revokedKeyPairIds.length - 1} superseded pair(s): they mint nothing and every token issued before now is refused (test tokens too)`
    : 'superseded: it mints nothing; tokens it already minted live out their 15 minutes';
  await showNewSecret(out, 'Rotated the key pair.', rotated, [
    ['old key pair', `${rotated.supersededKeyPairId} (${fate})`],
    ...(rotated.expiresAt ? ([['expires', iso(rotated.expiresAt)!]] as [string, string][]) : []),
  ]);
}

export async function runRevokeKeys(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  options: { keyPair?: string } = {},
): Promise<void> {
  const reference = await resolvePartnerArgument(session, partnerArgument);
  if (options.keyPair !== undefined && !KEY_PAIR_ID_PATTERN.test(options.keyPair)) {
    throw new AppError('invalid_argument', `--key-pair must be a key-pair id (kp_…), got '${options.keyPair.slice(0, 40)}'`);
  }
  await confirmDestructive(
    session,
    options.keyPair
      ? `Revoke key pair ${options.keyPair} of '${reference}' and refuse its tokens at once`
      : `Revoke every key pair of '${reference}' and refuse its tokens (test tokens too) at once`,
  );
  const db = await session.db();
  const result = await revokeKeyPair(db, session.who, reference, options.keyPair ? { keyPairId: options.keyPair } : {});
  const { partner, revokedKeyPairIds, changed } = result;
  if (out.json) {
    out.emitJson({
      partner_id: partner.id,
      revoked_key_pair_ids: revokedKeyPairIds,
      tokens_revoked_before: result.tokensRevokedBefore === null ? null : new Date(result.tokensRevokedBefore).toISOString(),
      changed,
    });
    return;
  }
  if (!changed) {
    out.line(`Nothing left to revoke for ${partner.name} (${partner.id}); nothing changed.`);
    return;
  }
  out.line(`Revoked ${revokedKeyPairIds.length} key pair(s) of ${partner.name} (${partner.id}); their tokens are refused now.`);
  if (result.tokensRevokedBefore !== null) out.line('Its outstanding test tokens are refused too.');
  if (!options.keyPair) out.line(`Partner ${partner.name} has no active key pair: 'partnerctl issue-keys ${partner.id}' issues a new one.`);
}

export async function runMintTestToken(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  options: { ttl?: string },
): Promise<void> {
  const reference = await resolvePartnerArgument(session, partnerArgument);
  // Digits only ('1e3', ' 60' and '0x10' are not seconds); the range is the domain's to check.
  const ttl = options.ttl === undefined ? undefined : /^\d+$/.test(options.ttl) ? Number(options.ttl) : Number.NaN;
  const db = await session.db();
  // Never a fresh key file where keys have already signed tokens (the database remembers their ids).
  const keys = await openSigningKeys(db, session.signingKeyFile);
  const minted = await mintTestToken(db, session.who, keys, reference, ttl);
  if (out.json) {
    out.emitJson({
      access_token: minted.accessToken,
      token_type: 'Bearer',
      expires_in: minted.expiresIn,
      partner_id: minted.claims.partnerId,
    });
    return;
  }
  out.line(minted.accessToken);
  out.note(`Test token for ${minted.claims.partnerId}, valid ${minted.expiresIn} s. Use: Authorization: Bearer <token>`);
}
