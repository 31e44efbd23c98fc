import type { PartnerRecord, PartnerStatus } from '../../domain/operations/partners.js';
import { validateCompanyId, validatePartnerName } from '../../domain/rules/validation.js';
import { nameKey } from '../../text.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { iso, lastUsed, type Output } from '../output.js';
import { askText, confirmDestructive, requireValue } from '../prompts.js';
import { parseWaitOption, receiptJson, reportReceipt, WAIT_OPTIONS, withReceipt, type WaitOptions } from '../receipt.js';
import type { Session } from '../session.js';
import { parseLimit, PARTNER_ARGUMENT, resolvePartnerArgument } from './common.js';
import { say, type Said, type Style } from '../say.js';

const CREATE_PARTNER_OPTIONS = defineOptions([
  { flags: '--name <name>', description: 'unique partner name (1-100 characters)' },
  { flags: '--if-not-exists', description: 'succeed and return the existing partner when the name is taken' },
]);

export const createPartnerCommand = defineCommand({
  name: 'create-partner',
  changes: true,
  group: 'Partners',
  summary: 'create a partner',
  description: 'create a partner account',
  options: CREATE_PARTNER_OPTIONS,
  examples: [{ lines: ['partnerctl create-partner --name "Acme Pricing" --json'] }],
  run: (session, out, { options }) => runCreatePartner(session, out, options),
});

async function runCreatePartner(session: Session, out: Output, options: OptionsOf<typeof CREATE_PARTNER_OPTIONS>): Promise<void> {
  const name = await requireValue(session, options.name, '--name <name>', () =>
    askText(session, 'Partner name', async (value) => {
      let name: string;
      try {
        name = validatePartnerName(value);
      } catch (error) {
        return say`${(error as Error).message}`.text;
      }
      if (options.ifNotExists) return true;
      // A taken name is asked again here rather than refused after the prompt.
      const [{ searchPartners }, db] = await Promise.all([import('../../domain/operations/partners.js'), session.db()]);
      const taken = (await searchPartners(db, name, 50)).find((partner) => nameKey(partner.name) === nameKey(name));
      return taken ? say`'${taken.name}' is taken (${taken.id}); type another name`.text : true;
    }),
  );
  const [{ createPartner }, db] = await Promise.all([import('../../domain/operations/partners.js'), session.db()]);
  const { partner, created } = await createPartner(db, session.who, { name, ifNotExists: options.ifNotExists });
  if (out.json) {
    out.emitJson({ partner_id: partner.id, name: partner.name, status: partner.status, created, created_at: iso(partner.createdAt), changed: created });
    return;
  }
  const style = out.style;
  out.line(
    created
      ? say`${style.green('Created')} partner ${style.bold(partner.name)} (${partner.id})`
      : say`Partner ${style.bold(partner.name)} already exists (${partner.id}); nothing changed`,
  );
  if (created) out.note(say`Next: partnerctl issue-keys ${partner.id}`);
}

const LIST_PARTNERS_OPTIONS = defineOptions([
  { flags: '--status <status>', description: 'only partners with this status', choices: ['active', 'disabled'] },
  { flags: '--limit <n>', description: 'page size, 1-1000', default: '50' },
  { flags: '--cursor <cursor>', description: 'continue after this cursor (printed at the end of a page; next_cursor in JSON)' },
  { flags: '--company <company_id>', description: 'only the partners mapped to this company (support: who can reach it?)' },
]);

export const listPartnersCommand = defineCommand({
  name: 'list-partners',
  group: 'Partners',
  summary: 'list partners, a page at a time',
  description: 'list partners, oldest first, a page at a time',
  options: LIST_PARTNERS_OPTIONS,
  run: (session, out, { options }) => runListPartners(session, out, options),
});

async function runListPartners(session: Session, out: Output, options: OptionsOf<typeof LIST_PARTNERS_OPTIONS>): Promise<void> {
  const limit = parseLimit(options.limit, 50);
  if (options.company !== undefined) validateCompanyId(options.company);
  const [{ listPartners }, db] = await Promise.all([import('../../domain/operations/partners.js'), session.db()]);
  const page = await listPartners(db, {
    status: options.status,
    limit,
    cursor: options.cursor,
    companyId: options.company,
  });
  if (out.json) {
    out.emitJson({
      partners: page.partners.map((partner) => ({
        partner_id: partner.id,
        name: partner.name,
        status: partner.status,
        company_count: partner.companyCount,
        active_access_key: partner.activeAccessKey,
        credentials: partner.credentialsPolicy,
        active_shared_secret: partner.activeSharedSecret,
        created_at: iso(partner.createdAt),
      })),
      next_cursor: page.nextCursor,
    });
    return;
  }
  if (page.partners.length === 0) {
    if (options.company !== undefined) {
      out.line(options.cursor ? say`No more partners.` : say`No partner is mapped to company ${options.company}.`);
      return;
    }
    if (options.status !== undefined) {
      out.line(options.cursor ? say`No more ${options.status} partners.` : say`No ${options.status} partners.`);
      return;
    }
    out.line(options.cursor ? say`No more partners.` : say`No partners yet. Create one with 'partnerctl create-partner --name <name>'.`);
    return;
  }
  const style = out.style;
  out.line(
    await out.table(
      [
        { title: 'ID' },
        { title: 'NAME', cut: 'end', min: 10 },
        { title: 'STATUS' },
        { title: 'COMPANIES', align: 'right' },
        { title: 'ACTIVE ACCESS KEY', optional: true },
        { title: 'SHARED SECRET', optional: true },
        { title: 'CREATED' },
      ],
      page.partners.map((partner) => [
        partner.id,
        partner.name,
        statusText(style, partner.status),
        partner.companyCount,
        partner.activeAccessKey,
        partner.activeSharedSecret ? 'active' : '-',
        partner.createdAt,
      ]),
    ),
  );
  const company = options.company === undefined ? '' : ` --company '${options.company.replace(/'/g, `'\\''`)}'`;
  if (page.nextCursor) out.note(say`More: partnerctl list-partners${company} --limit ${limit} --cursor ${page.nextCursor}`);
}

function statusText(style: Style, status: string): Said {
  if (status === 'active') return style.green(status);
  if (status === 'disabled' || status === 'revoked') return style.red(status);
  return style.yellow(status);
}

export const showPartnerCommand = defineCommand({
  name: 'show-partner',
  group: 'Partners',
  summary: 'a partner: key pairs, limits, network rules, companies',
  description: 'show a partner, its key pairs (never secrets), its company count and first 20 companies (list-companies for all)',
  arguments: [PARTNER_ARGUMENT],
  run: (session, out, { args }) => runShowPartner(session, out, args[0]),
});

async function runShowPartner(session: Session, out: Output, partnerArgument: string | undefined): Promise<void> {
  const reference = await resolvePartnerArgument(session, partnerArgument);
  const [{ showPartner }, { limitsJson }, { describeLimits }, db] = await Promise.all([
    import('../../domain/operations/partner-details.js'),
    import('../../domain/operations/limits.js'),
    import('./describe-limits.js'),
    session.db(),
  ]);
  const { partner, limits, network, keyPairs, companies, companyCount } = await showPartner(db, reference);
  if (out.json) {
    out.emitJson({
      ...partnerJson(partner),
      updated_at: iso(partner.updatedAt),
      credentials: partner.credentialsPolicy,
      key_pairs: keyPairs.map((pair) => ({
        key_pair_id: pair.id,
        access_key: pair.accessKey,
        kind: pair.kind,
        kid: pair.kid,
        alg: pair.publicKeyAlg,
        status: pair.state,
        created_at: iso(pair.createdAt),
        superseded_at: iso(pair.supersededAt),
        revoked_at: iso(pair.revokedAt),
        last_used_at: iso(pair.lastUsedAt),
        expires_at: iso(pair.expiresAt),
        last_refused_at: iso(pair.lastRefusedAt),
        retires_at: iso(pair.retiresAt),
        switched_at: iso(pair.switchedAt),
        refused_from_unlisted_address_at: iso(pair.unlistedRefusedAt),
        refused_from_unlisted_address: pair.unlistedRefusedAddress,
      })),
      company_count: companyCount,
      companies: companies.map((company) => ({ company_id: company.companyId, created_at: iso(company.createdAt) })),
      limits: limitsJson(limits),
      network: { allow: network },
    });
    return;
  }
  const style = out.style;
  out.line(style.bold(partner.name));
  out.line(
    await out.fields([
      ['id', partner.id],
      ['status', statusText(style, partner.status)],
      ['created', partner.createdAt],
      ['updated', partner.updatedAt],
      ['limits', describeLimits(limits)],
      ['network', network.length === 0 ? 'any client address' : network.join(', ')],
      ['credentials', CREDENTIALS_WORDS[partner.credentialsPolicy] ?? partner.credentialsPolicy],
    ]),
  );
  out.line();
  out.line(say`${style.bold(say`Key pairs (${keyPairs.length})`)}${style.dim('  secrets are never shown again')}`);
  if (keyPairs.length > 0) {
    out.line(
      await out.table(
        [
          { title: 'KEY PAIR' },
          { title: 'ACCESS KEY', optional: true },
          { title: 'KIND' },
          { title: 'STATUS' },
          { title: 'CREATED' },
          { title: 'LAST USED', optional: true },
        ],
        keyPairs.map((pair) => [
          pair.id,
          pair.accessKey,
          pair.kind === 'public_key' ? 'public key' : 'secret',
          statusText(style, pair.state),
          pair.createdAt,
          lastUsed(pair.lastUsedAt, db.clock.now()),
        ]),
      ),
    );
    for (const pair of keyPairs.filter((each) => each.kind === 'public_key')) out.line(say`${pair.id} is a public-key pair: ${pair.publicKeyAlg}, kid ${pair.kid}.`);
    for (const pair of keyPairs.filter((each) => each.state === 'retiring')) {
      const switched = pair.switchedAt ? `the partner switched at ${out.tableTime(pair.switchedAt)}` : 'the partner has not switched yet (the new pair has not exchanged)';
      out.line(say`${pair.id} is retiring: it still exchanges until ${out.tableTime(pair.retiresAt)}; ${switched}.`);
    }
  }
  out.line();
  out.line(style.bold(say`Companies (${companyCount})`));
  for (const company of companies) out.line(say`  ${company.companyId}`);
  if (companyCount > companies.length) {
    out.line(say`  … and ${companyCount - companies.length} more: partnerctl list-companies ${partner.id} --limit 1000`);
  }
}

/** set-credentials' policies, as show-partner says them. */
export const CREDENTIALS_WORDS: Record<string, string> = {
  secret: 'shared secrets only',
  'public-key': 'public keys only (private_key_jwt)',
  both: 'shared secrets and public keys',
};

function partnerJson(partner: PartnerRecord) {
  return { partner_id: partner.id, name: partner.name, status: partner.status, created_at: iso(partner.createdAt) };
}

export const disablePartnerCommand = defineCommand({
  name: 'disable-partner',
  changes: true,
  group: 'Partners',
  summary: 'disable a partner: its keys and tokens are refused',
  description: 'disable a partner: its keys mint nothing and its tokens are refused (asks to confirm)',
  arguments: [PARTNER_ARGUMENT],
  options: WAIT_OPTIONS,
  run: (session, out, { args, options }) => runSetPartnerStatus(session, out, args[0], 'disabled', options),
});

export const enablePartnerCommand = defineCommand({
  name: 'enable-partner',
  changes: true,
  group: 'Partners',
  summary: 'enable a disabled partner (its keys, not its old tokens)',
  description:
    'enable a disabled partner again: its keys work again; tokens issued before are still refused, so its client exchanges its keys once more',
  arguments: [PARTNER_ARGUMENT],
  run: (session, out, { args }) => runSetPartnerStatus(session, out, args[0], 'active'),
});

async function runSetPartnerStatus(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  status: PartnerStatus,
  options: WaitOptions = { wait: false },
): Promise<number | undefined> {
  const waitMs = status === 'disabled' ? await parseWaitOption(options) : null;
  const reference = await resolvePartnerArgument(session, partnerArgument);
  if (status === 'disabled') {
    await confirmDestructive(session, `Disable partner '${reference}' (its tokens are refused at once, its keys mint nothing)`);
  }
  const [{ setPartnerStatus }, db] = await Promise.all([import('../../domain/operations/partners.js'), session.db()]);
  const { result, receipt } = await withReceipt(db, waitMs, () => setPartnerStatus(db, session.who, reference, status), out, session.options.debug);
  const { partner, changed } = result;
  if (out.json) {
    out.emitJson({ ...partnerJson(partner), changed, ...receiptJson(receipt) });
    return reportReceipt(out, receipt, options.wait || '3s');
  }
  if (!changed) out.line(say`Partner ${partner.name} was already ${status}; nothing changed`);
  else if (status === 'disabled') out.line(say`Disabled partner ${partner.name} (${partner.id})`);
  else out.line(say`Enabled partner ${partner.name} (${partner.id}): its keys work again; tokens issued before now stay refused (its client exchanges its keys once more)`);
  return reportReceipt(out, receipt, options.wait || '3s');
}
