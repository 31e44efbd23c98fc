import type { Database } from '../../db/client.js';
import type { Containment, LookupResult } from '../../domain/operations/lookup.js';
import type { SigningKeys } from '../../domain/operations/signing-keys.js';
import { parseDuration, parseTimeOrDuration } from '../../domain/rules/validation.js';
import { AppError, EXIT, isAppError } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { iso, lastUsed, type Field, type Output } from '../output.js';
import { askSecret, confirmDestructive } from '../prompts.js';
import { parseWaitOption, receiptJson, reportReceipt, WAIT_OPTIONS, withReceipt } from '../receipt.js';
import type { Session } from '../session.js';
import { DURATION_HELP, parseLimit, PARTNER_ARGUMENT, resolvePartnerArgument } from './common.js';
import { say, writeLine } from '../say.js';

/**
 * The command line that contains a leak, for runbooks and the operator: it names what leaked (the pair, or
 * the instant before which tokens are refused), so running it again finds it contained and changes nothing;
 * where it issues a secret, the secret goes to a new file, never to the terminal.
 */
export function containCommand(contain: Containment): string {
  if (contain.action === 'rotate_keys') {
    return `partnerctl rotate-keys ${contain.partnerId} --key-pair ${contain.keyPairId}${contain.revokeIssuedTokens ? ' --revoke-issued-tokens' : ''} --secret-to replacement-of-${contain.keyPairId}.json --yes`;
  }
  if (contain.action === 'revoke_keys') return `partnerctl revoke-keys ${contain.partnerId} --key-pair ${contain.keyPairId} --yes`;
  return `partnerctl revoke-tokens ${contain.partnerId} --issued-before ${contain.issuedBefore.toISOString()} --yes`;
}

/** What to run next when a value could not be looked up (the domain names the field; the words are here). */
function lookupHint(error: AppError, value: string): string | undefined {
  if (error.field === 'partner_id') return `see 'partnerctl show-partner ${value}'`;
  if (error.field === 'access_key') return "look up the access key it was used with ('partnerctl lookup' asks for it)";
  if (error.field === 'token') return "look up the token itself ('partnerctl lookup' asks for it), or contain by partner with 'partnerctl revoke-tokens <partner>'";
  return undefined;
}

function lookupJson(result: LookupResult) {
  const { partner, pair, token } = result;
  return {
    kind: result.kind,
    partner_id: partner?.id ?? null,
    partner_name: partner?.name ?? null,
    partner_status: partner?.status ?? null,
    key_pair_id: pair?.id ?? null,
    status: result.status,
    access_key: pair?.accessKey ?? null,
    key_kind: pair?.kind ?? null,
    kid: pair?.kid ?? null,
    key_pair_status: result.pairState,
    created_at: iso(pair?.createdAt),
    superseded_at: iso(pair?.supersededAt),
    revoked_at: iso(pair?.revokedAt),
    expires_at: iso(pair?.expiresAt),
    last_used_at: iso(pair?.lastUsedAt),
    last_refused_at: iso(pair?.lastRefusedAt),
    retires_at: iso(pair?.retiresAt),
    switched_at: iso(pair?.switchedAt),
    // The genuine secret was last presented from outside the partner's network rules (set-network), from there.
    refused_from_unlisted_address_at: iso(pair?.unlistedRefusedAt),
    refused_from_unlisted_address: pair?.unlistedRefusedAddress ?? null,
    leak_reported_at: iso(pair?.leakReportedAt),
    leak_url: pair?.leakUrl ?? null,
    genuine: result.genuine,
    accepted: result.accepted,
    reason: result.reason,
    // accepted holds only from these addresses (lookup has none to check); null: any address.
    network_allow: result.network,
    accepted_until: iso(result.acceptedUntil),
    token: token
      ? {
          jti: token.jti,
          kid: token.kid,
          test: token.test,
          issued_at: iso(token.issuedAt),
          expires_at: iso(token.expiresAt),
          traceable: token.traceable,
          claims: token.claims,
        }
      : null,
    note: result.note,
    contain: result.contain ? containCommand(result.contain) : null,
  };
}

export const lookupCommand = defineCommand({
  name: 'lookup',
  group: 'Keys and leaks',
  summary: 'what a leaked value is, whose, and what contains it',
  description:
    'what a leaked value is and whose (access key, secret key, key-pair id, JWT, token id, kid, public key, or a private key PEM on stdin), whether it is genuine and accepted now, and the command that contains it',
  arguments: [
    {
      name: '[value]',
      description: "the leaked value; '-' reads it from a pipe (kept out of the shell's history); on a terminal, omitted or '-', it is asked for, masked",
    },
  ],
  notes: 'Exit codes: 0 found, 2 malformed (a wrong checksum says "checksum"), 3 matches nothing or cannot be traced.',
  examples: [
    { caption: 'on a terminal: asks for the value, masked', lines: ['partnerctl lookup'] },
    {
      caption: 'from the clipboard: pbpaste on macOS, wl-paste or xclip -o on Linux',
      lines: ['pbpaste | partnerctl lookup - --json | jq -r .contain', 'wl-paste | partnerctl lookup - --json | jq -r .contain'],
    },
  ],
  run: (session, out, { args }) => runLookup(session, out, args[0]),
});

async function runLookup(session: Session, out: Output, value: string | undefined): Promise<void> {
  if (value !== undefined && value !== '-' && value.includes('PRIVATE KEY-----')) {
    throw new AppError('invalid_argument', "a private key is read from stdin only, never from the command line: 'partnerctl lookup - < key.pem'");
  }
  const looked = await leakedValue(session, value, 'lookup');
  const [{ lookup }, db] = await Promise.all([import('../../domain/operations/lookup.js'), session.db()]);
  const openKeys = () => signingKeysIfAny(session, db, out);
  let result: LookupResult;
  try {
    result = await lookup(db, looked, openKeys);
  } catch (error) {
    const hint = isAppError(error) ? lookupHint(error, looked) : undefined;
    if (hint === undefined) throw error;
    const { code, message, field, reason } = error as AppError;
    throw new AppError(code, message, { hint, cause: error, ...(field ? { field } : {}), ...(reason ? { reason } : {}) });
  }
  if (out.json) {
    out.emitJson(lookupJson(result));
    return;
  }
  const style = out.style;
  const { partner, pair, token } = result;
  const what = {
    access_key: 'an access key',
    secret_key: 'a secret key',
    key_pair_id: 'a key-pair id',
    token: 'a token',
    token_id: 'a token id',
    kid: 'a key id (kid)',
    public_key: 'a public key',
    private_key: 'a private key (read, never kept or shown)',
  }[result.kind];
  out.line(say`${style.bold(what)} of ${partner ? say`${style.bold(partner.name)} (${partner.id})` : 'no known partner'}`);
  // Whose status is whose, said plainly: the partner's, then the key pair's or the token's.
  const own = result.kind === 'token' || result.kind === 'token_id' ? 'token status' : 'key pair status';
  const rows: Field[] = [
    ...(partner ? ([['partner status', partner.status]] as Field[]) : []),
    [own, result.status],
    ['genuine', result.genuine === null ? 'cannot tell from this value' : result.genuine ? 'yes' : 'NO'],
    [
      'accepted now',
      result.accepted
        ? `yes${result.acceptedUntil ? `, until ${out.tableTime(result.acceptedUntil)}` : ''}${result.network ? ` (only from ${result.network.join(', ')})` : ''}`
        : `no (${result.reason})`,
    ],
  ];
  if (pair) {
    rows.push(
      ['key pair', `${pair.id} (${result.pairState})`],
      ['access key', pair.accessKey],
      ['created', pair.createdAt],
      ['superseded', pair.supersededAt],
      ['revoked', pair.revokedAt],
      ['expires', pair.expiresAt],
      ...(result.pairState === 'retiring'
        ? ([
            ['retires', pair.retiresAt],
            ['switched', pair.switchedAt ? pair.switchedAt : 'not yet (the new pair has not exchanged)'],
          ] as Field[])
        : []),
      ['last used', lastUsed(pair.lastUsedAt, db.clock.now())],
      ['last refused', pair.lastRefusedAt],
      ...(pair.leakReportedAt ? ([['leak reported', `${out.tableTime(pair.leakReportedAt)} at ${pair.leakUrl ?? '(no URL)'}`]] as Field[]) : []),
    );
    if (pair.unlistedRefusedAt !== null) {
      rows.push([
        'unlisted address',
        `${out.tableTime(pair.unlistedRefusedAt)} from ${pair.unlistedRefusedAddress ?? 'unknown'}: the genuine secret was used outside the partner's network`,
      ]);
    }
  }
  if (token) {
    rows.push(
      ['token id', token.jti],
      ['test token', token.test ? 'yes' : 'no'],
      ['issued', token.issuedAt],
      ['expires', token.expiresAt],
    );
  }
  out.line(await out.fields(rows));
  out.line();
  out.line(say`${result.note}`);
  out.line(result.contain ? say`Contain: ${style.bold(containCommand(result.contain))}` : say`Nothing to contain.`);
}

const REVOKE_TOKENS_OPTIONS = defineOptions([
  {
    flags: '--issued-before <time>',
    description: 'the brake at this instant (ISO time, not in the future) instead of now: a brake already there or later is left as it is (changed: false)',
  },
  ...WAIT_OPTIONS,
]);

export const revokeTokensCommand = defineCommand({
  name: 'revoke-tokens',
  changes: true,
  group: 'Keys and leaks',
  summary: 'refuse every token issued before now; keys untouched',
  description:
    'leaked token, keys safe: refuse every token of the partner issued before now (test tokens too); keys untouched, the client re-exchanges once (asks to confirm)',
  arguments: [PARTNER_ARGUMENT],
  options: REVOKE_TOKENS_OPTIONS,
  notes:
    "A re-run moves the brake to the new now, refusing tokens the partner exchanged since (unless none of them can still be live: then nothing changes). To re-check a change that exited 6, use 'partnerctl receipt <change-id>'; to contain a leaked token re-runnably, name the instant: --issued-before (the Contain: line 'partnerctl lookup' prints does).",
  run: (session, out, { args, options }) => runRevokeTokens(session, out, args[0], options),
});

async function runRevokeTokens(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  options: OptionsOf<typeof REVOKE_TOKENS_OPTIONS>,
): Promise<number | undefined> {
  const waitMs = await parseWaitOption(options);
  const reference = await resolvePartnerArgument(session, partnerArgument);
  await confirmDestructive(
    session,
    `Refuse every token of '${reference}' issued before ${options.issuedBefore ?? 'now'} (test tokens too); its keys stay valid and its client re-exchanges them`,
  );
  const [{ revokeTokens }, db] = await Promise.all([import('../../domain/operations/key-pairs.js'), session.db()]);
  const issuedBefore = options.issuedBefore === undefined ? undefined : parseTimeOrDuration(options.issuedBefore, '--issued-before', db.clock.now());
  const { result, receipt } = await withReceipt(db, waitMs, () => revokeTokens(db, session.who, reference, issuedBefore), out, session.options.debug);
  const { partner, tokensRevokedBefore, changed } = result;
  if (out.json) {
    out.emitJson({ partner_id: partner.id, tokens_revoked_before: new Date(tokensRevokedBefore).toISOString(), changed, ...receiptJson(receipt) });
    return reportReceipt(out, receipt, options.wait || '3s');
  }
  out.line(
    changed
      ? say`Every token of ${partner.name} (${partner.id}) issued before ${new Date(tokensRevokedBefore).toISOString()} is refused now; its keys still work.`
      : say`No token of ${partner.name} (${partner.id}) issued since ${new Date(tokensRevokedBefore).toISOString()} can still be live; nothing changed.`,
  );
  return reportReceipt(out, receipt, options.wait || '3s');
}

const LIST_KEYS_OPTIONS = defineOptions([
  { flags: '--partner <partner>', description: 'only this partner (id, name, access key or key-pair id)' },
  {
    flags: '--status <status>',
    description: 'only pairs with this status (expired: past --expires-in; retiring: in an overlap)',
    choices: ['active', 'retiring', 'superseded', 'revoked', 'expired'],
  },
  { flags: '--older-than <duration>', description: `created longer ago than this (${DURATION_HELP})` },
  { flags: '--expiring-within <duration>', description: `active and expiring within this, not yet expired (${DURATION_HELP})` },
  { flags: '--unused-for <duration>', description: `live and not used for this long (${DURATION_HELP})` },
  { flags: '--fail-if-any', description: 'exit 1 when the list is not empty (for a daily cron alert)' },
  { flags: '--limit <n>', description: 'page size, 1-1000', default: '50' },
  { flags: '--cursor <cursor>', description: 'continue after this cursor (next_cursor in JSON)' },
  { flags: '--wide', description: 'every column, every value and time whole, however wide the terminal' },
]);

export const listKeysCommand = defineCommand({
  name: 'list-keys',
  group: 'Keys and leaks',
  summary: 'list key pairs across partners (never a secret)',
  description: 'list key pairs across partners (never a secret), oldest first, a page at a time',
  options: LIST_KEYS_OPTIONS,
  examples: [{ caption: 'daily cron', lines: ['partnerctl list-keys --status active --older-than 90d --fail-if-any --json'] }],
  run: (session, out, { options }) => runListKeys(session, out, options),
});

async function runListKeys(session: Session, out: Output, options: OptionsOf<typeof LIST_KEYS_OPTIONS>): Promise<number> {
  const limit = parseLimit(options.limit, 50);
  const filters = {
    ...(options.partner !== undefined ? { partner: options.partner } : {}),
    ...(options.status !== undefined ? { status: options.status } : {}),
    ...(options.olderThan !== undefined ? { olderThanMs: parseDuration(options.olderThan, '--older-than') } : {}),
    ...(options.expiringWithin !== undefined ? { expiringWithinMs: parseDuration(options.expiringWithin, '--expiring-within') } : {}),
    ...(options.unusedFor !== undefined ? { unusedForMs: parseDuration(options.unusedFor, '--unused-for') } : {}),
    ...(options.cursor !== undefined ? { cursor: options.cursor } : {}),
  };
  const [{ listKeyPairs }, db] = await Promise.all([import('../../domain/operations/key-pairs.js'), session.db()]);
  const page = await listKeyPairs(db, { ...filters, limit });
  const code = options.failIfAny && page.keys.length > 0 ? EXIT.error : EXIT.ok;
  if (out.json) {
    out.emitJson({
      keys: page.keys.map((pair) => ({
        key_pair_id: pair.id,
        partner_id: pair.partnerId,
        partner_name: pair.partnerName,
        access_key: pair.accessKey,
        kind: pair.kind,
        kid: pair.kid,
        status: pair.state,
        created_at: iso(pair.createdAt),
        superseded_at: iso(pair.supersededAt),
        revoked_at: iso(pair.revokedAt),
        expires_at: iso(pair.expiresAt),
        last_used_at: iso(pair.lastUsedAt),
        last_refused_at: iso(pair.lastRefusedAt),
        retires_at: iso(pair.retiresAt),
        switched_at: iso(pair.switchedAt),
        refused_from_unlisted_address_at: iso(pair.unlistedRefusedAt),
        refused_from_unlisted_address: pair.unlistedRefusedAddress,
        leak_reported_at: iso(pair.leakReportedAt),
        leak_url: pair.leakUrl,
      })),
      next_cursor: page.nextCursor,
    });
    return code;
  }
  if (page.keys.length === 0) out.line(options.cursor ? say`No more key pairs.` : say`No key pairs match.`);
  else {
    out.line(
      await out.table(
        // At 80 columns: whole key-pair ids (revoke-keys --key-pair needs them) and short times; the
        // rest as the width allows (--wide and --json carry everything).
        [
          { title: 'KEY PAIR' },
          { title: 'PARTNER', cut: 'name', min: 10 },
          { title: 'STATUS' },
          { title: 'CREATED' },
          { title: 'LAST USED', optional: true },
          { title: 'EXPIRES', optional: true },
          { title: 'ACCESS KEY', optional: true },
          { title: 'KIND', optional: true },
          { title: 'LAST REFUSED', optional: true },
          { title: 'LEAK REPORTED', optional: true },
        ],
        page.keys.map((pair) => [
          pair.id,
          `${pair.partnerName} (${pair.partnerId})`,
          pair.state,
          pair.createdAt,
          lastUsed(pair.lastUsedAt, db.clock.now()),
          pair.expiresAt,
          pair.accessKey,
          pair.kind === 'public_key' ? `public key ${pair.kid}` : 'secret',
          pair.lastRefusedAt,
          pair.leakReportedAt ? `${out.tableTime(pair.leakReportedAt, options.wide)} ${pair.leakUrl ?? ''}`.trim() : null,
        ]),
        { wide: options.wide === true },
      ),
    );
  }
  // The strongest sign of a leak: a genuine secret used from outside the partner's network rules.
  for (const pair of page.keys) {
    if (pair.unlistedRefusedAt !== null) {
      out.line(say`${pair.id}: genuine secret refused from unlisted address ${pair.unlistedRefusedAddress ?? 'unknown'} at ${iso(pair.unlistedRefusedAt)}`);
    }
  }
  if (page.nextCursor) out.note(say`More: partnerctl list-keys --cursor ${page.nextCursor} (with the same filters)`);
  return code;
}

/** A value piped on stdin (at most 64 KiB), trimmed. */
/**
 * The leaked value a command was given (lookup, exposure). '-' reads it from stdin, so a secret need not go
 * into the shell's history; from a terminal that would echo it and wait for Ctrl-D, so there it is asked
 * for, masked, as with no argument at all.
 */
export async function leakedValue(session: Session, value: string | undefined, command: string): Promise<string> {
  const fromTerminal = value === undefined || (value === '-' && session.terminal.inIsTTY);
  if (fromTerminal && !session.interactive) {
    throw new AppError('missing_argument', 'missing <value> (an access key, secret key, key-pair id, token or token id)', {
      hint: `pipe it in ('partnerctl ${command} -' reads stdin), or run 'partnerctl ${command}' on a terminal without --json or --no-input: it asks, masked`,
    });
  }
  if (fromTerminal) return askSecret(session, 'Leaked value (access key, secret key, key-pair id, token or token id; not echoed)');
  if (value === '-') return readAll(session.terminal.in);
  const { SECRET_KEY_PREFIX } = await import('../../domain/rules/identifiers.js');
  // A secret (a secret key, or a token: a JWT) typed as an argument works, but it is not where it was.
  const secret = value.includes(SECRET_KEY_PREFIX) ? 'a secret key' : /eyJ[\w-]+\.[\w-]+\.[\w-]+/.test(value) ? 'a token' : null;
  if (secret !== null) {
    writeLine(
      session.terminal.err,
      say`partnerctl: warning: ${secret} given as an argument is now in this shell's history (and was visible in the process list); next time pipe it in ('... | partnerctl ${command} -') or run 'partnerctl ${command}' on a terminal: it asks, masked`,
    );
  }
  return value;
}

/**
 * The signing keys, or null without the key file here: the value is still traced, only a token's signature
 * cannot be checked (said once on stderr).
 */
export async function signingKeysIfAny(session: Session, db: Database, out: Output): Promise<SigningKeys | null> {
  const { openSigningKeys } = await import('../../domain/runtime/signing-key-guard.js');
  try {
    return await openSigningKeys(db, session.signingKeyFile);
  } catch (error) {
    if (isAppError(error) && error.code === 'signing_key_unavailable') {
      out.note(say`partnerctl: note: ${error.message}; a token's signature is not checked (genuine: null)`);
      return null;
    }
    throw error;
  }
}

export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) {
    text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    if (text.length > 64 * 1024) break;
  }
  return text.trim();
}
