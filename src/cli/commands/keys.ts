import type { IssuedKeyPair } from '../../domain/operations/key-pairs.js';
import { formatDuration, parseDuration } from '../../domain/rules/validation.js';
import { AppError, isAppError } from '../../errors.js';
import { readInput } from '../inputs.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { type Field, iso, type Output } from '../output.js';
import { confirmDestructive } from '../prompts.js';
import { parseWaitOption, receiptJson, reportReceipt, WAIT_OPTIONS, withReceipt } from '../receipt.js';
import { SecretFile, withSecretFile } from '../secret-file.js';
import type { Session } from '../session.js';
import { checkKeyPairOption, DURATION_HELP, PARTNER_ARGUMENT, resolvePartnerArgument } from './common.js';
import { say, type Said } from '../say.js';

async function showNewSecret(out: Output, title: Said, issued: IssuedKeyPair, secretTo: SecretFile | null, extra: [string, string][] = []) {
  const style = out.style;
  out.line(title);
  // A public_key pair has no secret: its access key (the assertions' iss and sub) and kid are all there is to show.
  const credential: Field[] =
    issued.secretKey === null
      ? [['kid', issued.kid ?? '']]
      : [['secret key', secretTo ? say`in ${secretTo.path} (mode 0600), with the access key; shown nowhere else` : style.bold(issued.secretKey)]];
  out.line(
    await out.fields([
      ['partner', `${issued.partner.name} (${issued.partner.id})`],
      ['key pair id', issued.keyPairId],
      ...extra,
      ['access key', issued.accessKey],
      ...credential,
    ]),
  );
  out.line();
  if (issued.secretKey === null) {
    out.line(say`The partner signs its client assertions with the private key (iss and sub: the access key); nothing secret is kept here.`);
    return;
  }
  out.line(
    style.yellow(
      secretTo
        ? say`Hand ${secretTo.path} to the partner by a channel you trust, then delete it (only the secret's hash is kept here).`
        : say`The secret key is shown once, now, and never again: store it now (only its hash is kept).`,
    ),
  );
}

/** The new pair in JSON: its secret, or where it went (`--secret-to`) and no secret; a public_key pair's kid. */
function newPairJson(issued: IssuedKeyPair, secretTo: SecretFile | null) {
  const credential =
    issued.secretKey === null
      ? { kind: 'public_key', kid: issued.kid }
      : { kind: 'secret', ...(secretTo ? { secret_to: secretTo.path } : { secret_key: issued.secretKey }) };
  return {
    partner_id: issued.partner.id,
    key_pair_id: issued.keyPairId,
    access_key: issued.accessKey,
    ...credential,
    expires_at: iso(issued.expiresAt),
  };
}

const SECRET_TO_OPTION = {
  flags: '--secret-to <file>',
  description: 'write the new credentials to this new file (JSON, mode 0600; refused, exit 2, if it exists), never to stdout',
} as const;

/** The file `--secret-to` names, and the hand-over that writes the new pair into it inside the change. */
function secretFileOf(path: string | undefined): { file: SecretFile | null; handOver: ((issued: IssuedKeyPair) => Promise<void>) | undefined } {
  if (path === undefined) return { file: null, handOver: undefined };
  const file = new SecretFile(path, '--secret-to');
  return { file, handOver: (issued) => file.write([issued]) };
}

function expiryOption(value: string | undefined): { expiresInMs?: number } {
  return value === undefined ? {} : { expiresInMs: parseDuration(value, '--expires-in') };
}

const PUBLIC_KEY_OPTION = {
  flags: '--public-key <file>',
  description:
    "register the partner's public key instead of issuing a secret (PEM SPKI or JWK; Ed25519, EC P-256 or RSA >= 2048 bits; '-' reads stdin): the partner signs client assertions with its private key",
} as const;

/** `--public-key FILE|-`: the key read and checked before anything is asked or written; with --secret-to refused (no secret). */
async function publicKeyOption(session: Session, path: string | undefined, secretTo: string | undefined) {
  if (path === undefined) return {};
  if (secretTo !== undefined) throw new AppError('invalid_argument', '--public-key cannot be combined with --secret-to: a public_key pair has no secret');
  const [{ parsePublicKey }, text] = await Promise.all([import('../../domain/rules/public-keys.js'), readInput(session, path, '--public-key')]);
  try {
    return { publicKey: await parsePublicKey(text) };
  } catch (error) {
    if (isAppError(error) && error.field === 'public_key') throw new AppError('invalid_argument', `--public-key ${path}: ${error.message}`);
    throw error;
  }
}

const ISSUE_KEYS_OPTIONS = defineOptions([
  { flags: '--expires-in <duration>', description: `the pair mints nothing after this long (${DURATION_HELP})` },
  {
    flags: '--if-none-active',
    description: 'a partner with an active pair is left as it is: exit 0, changed: false, no secret (re-runnable provisioning)',
  },
  SECRET_TO_OPTION,
  PUBLIC_KEY_OPTION,
]);

export const issueKeysCommand = defineCommand({
  name: 'issue-keys',
  changes: true,
  group: 'Keys and leaks',
  summary: "issue a partner's first key pair (the secret shown once)",
  description: 'issue the first key pair of a partner; the secret is shown once (refused when one is active: use rotate-keys)',
  arguments: [PARTNER_ARGUMENT],
  options: ISSUE_KEYS_OPTIONS,
  examples: [
    {
      caption: 're-runnable provisioning: the secret goes to a file for the partner, never to stdout',
      lines: ['partnerctl issue-keys ptn_… --if-none-active --secret-to acme-keys.json --json'],
    },
  ],
  run: (session, out, { args, options }) => runIssueKeys(session, out, args[0], options),
});

async function runIssueKeys(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  options: OptionsOf<typeof ISSUE_KEYS_OPTIONS>,
): Promise<void> {
  const expiry = { ...expiryOption(options.expiresIn), ...(await publicKeyOption(session, options.publicKey, options.secretTo)) };
  const reference = await resolvePartnerArgument(session, partnerArgument);
  const [{ issueKeyPair, issueKeyPairIfNoneActive }, db] = await Promise.all([import('../../domain/operations/key-pairs.js'), session.db()]);
  const { file, handOver } = secretFileOf(options.secretTo);
  const outcome = await withSecretFile(file, async () =>
    options.ifNoneActive
      ? issueKeyPairIfNoneActive(db, session.who, reference, expiry, handOver)
      : { changed: true as const, issued: await issueKeyPair(db, session.who, reference, expiry, handOver) },
  );
  if (!outcome.changed) {
    const { partner, activeKeyPairId } = outcome;
    if (out.json) out.emitJson({ partner_id: partner.id, key_pair_id: activeKeyPairId, changed: false });
    else out.line(say`${partner.name} (${partner.id}) already has an active key pair (${activeKeyPairId}); nothing changed.`);
    return;
  }
  const { issued } = outcome;
  if (out.json) {
    out.emitJson({ ...newPairJson(issued, file), changed: true });
    return;
  }
  await showNewSecret(out, say`Issued a new key pair.`, issued, file, issued.expiresAt ? [['expires', iso(issued.expiresAt)!]] : []);
}

const ROTATE_KEYS_OPTIONS = defineOptions([
  {
    flags: '--revoke-issued-tokens',
    description:
      'leaked key: also revoke the old and every retiring or superseded pair and refuse every token the partner holds (test tokens too), at once (asks to confirm)',
  },
  {
    flags: '--overlap <duration>',
    description:
      'planned rotation: the old pair is retiring and still exchanges until this long from now (at most 30d), or --after-switch after the new pair first exchanges, or --finish',
  },
  {
    flags: '--after-switch <duration>',
    description: 'with --overlap: the old pair retires this long after the new pair first exchanges (default 15m, or the overlap if shorter; 0s allowed)',
  },
  { flags: '--finish', description: 'end the overlap now: the retiring pair is superseded (nothing retiring: changed: false)' },
  {
    flags: '--key-pair <kp_id>',
    description:
      "rotate only while this pair is the active one ('lookup' names the leaked pair): once it is revoked (with --revoke-issued-tokens) or replaced, a re-run changes nothing and issues no secret",
  },
  { flags: '--expires-in <duration>', description: `the new pair mints nothing after this long (${DURATION_HELP})` },
  SECRET_TO_OPTION,
  PUBLIC_KEY_OPTION,
  ...WAIT_OPTIONS.map((option) => ({ ...option, description: `with --revoke-issued-tokens: ${option.description}` })),
]);

type RotateKeysOptions = OptionsOf<typeof ROTATE_KEYS_OPTIONS>;

export const rotateKeysCommand = defineCommand({
  name: 'rotate-keys',
  changes: true,
  group: 'Keys and leaks',
  summary: 'replace the active key pair (--overlap for a planned one)',
  description:
    'replace the active key pair in one transaction: the old pair mints nothing more (or, with --overlap, until its overlap ends), its tokens live out their 15 minutes',
  arguments: [PARTNER_ARGUMENT],
  options: ROTATE_KEYS_OPTIONS,
  examples: [
    {
      caption: "leaked secret, at 3 a.m.; 'partnerctl lookup' (it asks for the secret, masked) prints this line",
      lines: ['partnerctl rotate-keys ptn_… --revoke-issued-tokens --yes --json'],
    },
    {
      caption: 'routine rotation: hand the new secret over, watch switched_at, then finish',
      lines: ['partnerctl rotate-keys ptn_… --overlap 7d --json', 'partnerctl show-partner ptn_…', 'partnerctl rotate-keys ptn_… --finish'],
    },
  ],
  run: (session, out, { args, options }) => runRotateKeys(session, out, args[0], options),
});

async function runRotateKeys(session: Session, out: Output, partnerArgument: string | undefined, options: RotateKeysOptions): Promise<number | undefined> {
  if (options.finish) {
    const other = options.overlap !== undefined ? '--overlap' : options.afterSwitch !== undefined ? '--after-switch' : options.revokeIssuedTokens ? '--revoke-issued-tokens' : options.expiresIn !== undefined ? '--expires-in' : options.publicKey !== undefined ? '--public-key' : options.keyPair !== undefined ? '--key-pair' : null;
    if (other) throw new AppError('invalid_argument', `--finish cannot be combined with ${other}: it only ends the overlap`);
    await runFinishOverlap(session, out, partnerArgument);
    return undefined;
  }
  const expiry = { ...expiryOption(options.expiresIn), ...(await publicKeyOption(session, options.publicKey, options.secretTo)) };
  const overlap = {
    ...(options.overlap !== undefined ? { overlapMs: parseDuration(options.overlap, '--overlap') } : {}),
    ...(options.afterSwitch !== undefined ? { afterSwitchMs: parseDuration(options.afterSwitch, '--after-switch', { allowZero: true }) } : {}),
  };
  // Only the emergency rotation refuses credentials: the routine one has nothing for the servers to confirm.
  const waitMs = options.revokeIssuedTokens ? await parseWaitOption(options) : null;
  const { checkRotationOptions, rotateKeyPairIfActive } = await import('../../domain/operations/key-pairs.js');
  checkRotationOptions({ ...overlap, revokeIssuedTokens: options.revokeIssuedTokens === true });
  await checkKeyPairOption(options.keyPair);
  const reference = await resolvePartnerArgument(session, partnerArgument);
  if (options.revokeIssuedTokens) {
    await confirmDestructive(
      session,
      `Rotate the keys of '${reference}', revoke its active, retiring and superseded pairs and refuse every token it holds (test tokens too), at once`,
    );
  } else if (overlap.overlapMs === undefined && session.interactive) {
    // A routine rotation without an overlap breaks the partner's exchanges until it installs the new pair:
    // a person is asked; scripts (no terminal) rotate as they always did.
    await confirmDestructive(
      session,
      `Rotate the keys of '${reference}': its current pair stops minting tokens now (--overlap 7d keeps it working until the partner switches)`,
    );
  }
  const db = await session.db();
  const { file, handOver } = secretFileOf(options.secretTo);
  const change = () =>
    withSecretFile(file, () =>
      rotateKeyPairIfActive(
        db,
        session.who,
        reference,
        { revokeIssuedTokens: options.revokeIssuedTokens === true, ...expiry, ...overlap, keyPairId: options.keyPair },
        handOver,
      ),
    );
  const { result: rotated, receipt } = await withReceipt(db, waitMs, change, out, session.options.debug);
  if (!rotated.changed) {
    const { partner, keyPairId, state } = rotated;
    if (out.json) out.emitJson({ partner_id: partner.id, key_pair_id: keyPairId, key_pair_status: state, changed: false, ...receiptJson(receipt) });
    else out.line(say`Key pair ${keyPairId} of ${partner.name} (${partner.id}) is ${state}: rotated already; nothing changed, no secret issued.`);
    return reportReceipt(out, receipt, options.wait || '3s');
  }
  if (out.json) {
    out.emitJson({
      ...newPairJson(rotated, file),
      superseded_key_pair_id: rotated.supersededKeyPairId,
      revoked_issued_tokens: rotated.revokedIssuedTokens,
      revoked_key_pair_ids: rotated.revokedKeyPairIds,
      tokens_revoked_before: rotated.tokensRevokedBefore === null ? null : new Date(rotated.tokensRevokedBefore).toISOString(),
      retiring_key_pair_id: rotated.retiringKeyPairId,
      retires_at: iso(rotated.retiresAt),
      after_switch: rotated.afterSwitchMs === null ? null : formatDuration(rotated.afterSwitchMs),
      ended_retiring_key_pair_id: rotated.endedRetiringKeyPairId,
      changed: true,
      ...receiptJson(receipt),
    });
    return reportReceipt(out, receipt, options.wait || '3s');
  }
  const old = rotated.retiringKeyPairId
    ? `${rotated.retiringKeyPairId} (retiring: it still exchanges until ${iso(rotated.retiresAt)}, or ${formatDuration(rotated.afterSwitchMs ?? 0)} after the new pair's first exchange, or --finish)`
    : `${rotated.supersededKeyPairId} (${
        rotated.revokedIssuedTokens
          ? `revoked with ${rotated.revokedKeyPairIds.length - 1} retiring or superseded pair(s): they mint nothing and every token issued before now is refused (test tokens too)`
          : 'superseded: it mints nothing; tokens it already minted live out their 15 minutes'
      })`;
  await showNewSecret(out, say`Rotated the key pair.`, rotated, file, [
    ['old key pair', old],
    ...(rotated.endedRetiringKeyPairId
      ? ([['ended overlap', `${rotated.endedRetiringKeyPairId} (was retiring from an earlier rotation: superseded now)`]] as [string, string][])
      : []),
    ...(rotated.expiresAt ? ([['expires', iso(rotated.expiresAt)!]] as [string, string][]) : []),
  ]);
  return reportReceipt(out, receipt, options.wait || '3s');
}

async function runFinishOverlap(session: Session, out: Output, partnerArgument: string | undefined): Promise<void> {
  const reference = await resolvePartnerArgument(session, partnerArgument);
  const [{ finishOverlap }, db] = await Promise.all([import('../../domain/operations/key-pairs.js'), session.db()]);
  const finished = await finishOverlap(db, session.who, reference);
  const { partner } = finished;
  if (out.json) {
    out.emitJson({
      partner_id: partner.id,
      retired_key_pair_id: finished.retiredKeyPairId,
      ended_by: finished.changed ? 'finish' : null,
      superseded_at: iso(finished.endedAt),
      changed: finished.changed,
    });
    return;
  }
  if (!finished.changed) {
    out.line(say`No key pair of ${partner.name} (${partner.id}) is retiring; nothing changed.`);
    return;
  }
  out.line(say`Ended the overlap of ${partner.name} (${partner.id}): ${finished.retiredKeyPairId} is superseded now and mints nothing; its tokens live out their 15 minutes.`);
}

const REVOKE_KEYS_OPTIONS = defineOptions([
  { flags: '--key-pair <kp_id>', description: 'revoke exactly this pair (active, retiring or superseded); its tokens are refused at once' },
  ...WAIT_OPTIONS,
]);

export const revokeKeysCommand = defineCommand({
  name: 'revoke-keys',
  changes: true,
  group: 'Keys and leaks',
  summary: "revoke a partner's live key pairs and refuse their tokens",
  description:
    'revoke the live key pairs of a partner (no active pair is left) and refuse their tokens and its test tokens at once; nothing left to revoke exits 0, changed: false (asks to confirm)',
  arguments: [PARTNER_ARGUMENT],
  options: REVOKE_KEYS_OPTIONS,
  run: (session, out, { args, options }) => runRevokeKeys(session, out, args[0], options),
});

async function runRevokeKeys(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  options: OptionsOf<typeof REVOKE_KEYS_OPTIONS>,
): Promise<number | undefined> {
  const waitMs = await parseWaitOption(options);
  const reference = await resolvePartnerArgument(session, partnerArgument);
  await checkKeyPairOption(options.keyPair);
  await confirmDestructive(
    session,
    options.keyPair
      ? `Revoke key pair ${options.keyPair} of '${reference}' and refuse its tokens at once`
      : `Revoke every key pair of '${reference}' and refuse its tokens (test tokens too) at once`,
  );
  const [{ revokeKeyPair }, db] = await Promise.all([import('../../domain/operations/key-pairs.js'), session.db()]);
  const change = () => revokeKeyPair(db, session.who, reference, options.keyPair ? { keyPairId: options.keyPair } : {});
  const { result, receipt } = await withReceipt(db, waitMs, change, out, session.options.debug);
  const waitText = options.wait || '3s';
  const { partner, revokedKeyPairIds, changed } = result;
  if (out.json) {
    out.emitJson({
      partner_id: partner.id,
      revoked_key_pair_ids: revokedKeyPairIds,
      tokens_revoked_before: result.tokensRevokedBefore === null ? null : new Date(result.tokensRevokedBefore).toISOString(),
      changed,
      ...receiptJson(receipt),
    });
    return reportReceipt(out, receipt, waitText);
  }
  if (!changed) {
    out.line(say`Nothing left to revoke for ${partner.name} (${partner.id}); nothing changed.`);
    return reportReceipt(out, receipt, waitText);
  }
  out.line(say`Revoked ${revokedKeyPairIds.length} key pair(s) of ${partner.name} (${partner.id}); their tokens are refused now.`);
  if (result.tokensRevokedBefore !== null) out.line(say`Its outstanding test tokens are refused too.`);
  if (!options.keyPair) out.line(say`Partner ${partner.name} has no active key pair: 'partnerctl issue-keys ${partner.id}' issues a new one.`);
  return reportReceipt(out, receipt, waitText);
}

const MINT_TEST_TOKEN_OPTIONS = defineOptions([{ flags: '--ttl <seconds>', description: 'lifetime in seconds, at most 900', default: '900' }]);

export const mintTestTokenCommand = defineCommand({
  name: 'mint-test-token',
  changes: true,
  group: 'Keys and leaks',
  summary: 'a token for trying the API as a partner',
  description: 'mint a token for trying the API as a partner (no key pair needed; prints just the token without --json)',
  arguments: [PARTNER_ARGUMENT],
  options: MINT_TEST_TOKEN_OPTIONS,
  run: (session, out, { args, options }) => runMintTestToken(session, out, args[0], options),
});

async function runMintTestToken(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  options: OptionsOf<typeof MINT_TEST_TOKEN_OPTIONS>,
): Promise<void> {
  const reference = await resolvePartnerArgument(session, partnerArgument);
  // Digits only ('1e3', ' 60' and '0x10' are not seconds); the range is the domain's to check.
  const ttl = options.ttl === undefined ? undefined : /^\d+$/.test(options.ttl) ? Number(options.ttl) : Number.NaN;
  const [{ openSigningKeys }, { mintTestToken }, db] = await Promise.all([
    import('../../domain/runtime/signing-key-guard.js'),
    import('../../domain/operations/test-tokens.js'),
    session.db(),
  ]);
  // Never a fresh key file where keys have already signed tokens (the database remembers their ids).
  const keys = await openSigningKeys(db, session.signingKeyFile);
  const minted = await mintTestToken(db, session.who, keys, reference, ttl);
  if (out.json) {
    out.emitJson({
      access_token: minted.accessToken,
      token_type: 'Bearer',
      expires_in: minted.expiresIn,
      partner_id: minted.claims.partnerId,
      changed: true,
    });
    return;
  }
  out.line(say`${minted.accessToken}`);
  out.note(say`Test token for ${minted.claims.partnerId}, valid ${minted.expiresIn} s. Use: Authorization: Bearer <token>`);
}
