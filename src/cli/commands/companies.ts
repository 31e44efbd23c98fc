import { defineCommand, type CommandDefinition } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { iso, type Output } from '../output.js';
import { progressBar } from '../progress.js';
import { askText, confirmDestructive, requireValue } from '../prompts.js';
import type { Session } from '../session.js';
import { parseLimit, PARTNER_ARGUMENT, resolvePartnerArgument } from './common.js';
import { say } from '../say.js';

const MAPPING_OPTIONS = defineOptions([
  { flags: '--company <company_id>', description: 'a company id (visible ASCII, 1-128 characters); repeat for more', repeatable: true },
  {
    flags: '--from-file <path|->',
    description: "company ids, one per line ('#' comments and blank lines ignored; a .csv gives its first column, header skipped); '-' reads stdin",
  },
]);

/** map-company and unmap-company: the same flags, the opposite change. */
function mappingCommand(name: string, action: 'map' | 'unmap', summary: string, description: string): CommandDefinition {
  return defineCommand({
    name,
    changes: true,
    group: 'Companies',
    summary,
    description,
    arguments: [PARTNER_ARGUMENT],
    options: MAPPING_OPTIONS,
    notes:
      'All ids are checked first: one bad line fails the command (exit 2) naming every bad line, and nothing changes.\n' +
      `Every id is ${action === 'map' ? 'mapped' : 'unmapped'} in one transaction.`,
    examples: [{ lines: [`partnerctl ${name} acme --from-file companies.txt --json${action === 'unmap' ? ' --yes' : ''}`] }],
    run: (session, out, { args, options }) => runMapping(session, out, args[0], options, action),
  });
}

export const mapCompanyCommand = mappingCommand(
  'map-company',
  'map',
  'let a partner reach companies',
  'let a partner reach companies (succeeds, changing nothing, for those already mapped)',
);

export const unmapCompanyCommand = mappingCommand(
  'unmap-company',
  'unmap',
  'stop a partner reaching companies',
  'stop a partner reaching companies (asks to confirm, stating the count; succeeds for those not mapped)',
);

async function runMapping(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  options: OptionsOf<typeof MAPPING_OPTIONS>,
  action: 'map' | 'unmap',
): Promise<void> {
  const reference = await resolvePartnerArgument(session, partnerArgument);
  let ids: string[];
  if ((options.company?.length ?? 0) === 0 && options.fromFile === undefined) {
    ids = [await requireValue(session, undefined, '--company <company_id> or --from-file <path|->', () => askText(session, 'Company id'))];
  } else {
    // Every id is checked before the database is opened: a bad line changes nothing.
    const { companyIdsFromOptions } = await import('../inputs.js');
    ids = await companyIdsFromOptions(session, options);
  }
  const single = options.fromFile === undefined && ids.length === 1;
  const distinct = new Set(ids).size;
  if (action === 'unmap') {
    await confirmDestructive(
      session,
      single
        ? `Unmap company '${ids[0]}' from '${reference}' (its requests get 404 at once)`
        : `Unmap ${distinct} compan${distinct === 1 ? 'y' : 'ies'} from '${reference}' (their requests get 404 at once)`,
    );
  }
  const [{ changeMappings }, db] = await Promise.all([import('../../domain/operations/companies.js'), session.db()]);
  const bar = progressBar(session.terminal, action === 'map' ? say`mapping` : say`unmapping`, distinct);
  let change;
  try {
    change = await changeMappings(db, session.who, reference, ids, action, (done) => bar.update(done));
  } finally {
    bar.done();
  }
  const changed = change.changedIds.length;
  const unchanged = change.total - changed;
  if (out.json) {
    out.emitJson({
      partner_id: change.partner.id,
      ...(action === 'map' ? { added: changed } : { removed: changed }),
      unchanged,
      total: change.total,
      ...(single ? { company_id: ids[0] } : {}),
      changed: changed > 0,
    });
    return;
  }
  const where = `${change.partner.name} (${change.partner.id})`;
  if (single) {
    if (changed === 0) {
      out.line(say`Company ${ids[0]} was already ${action === 'map' ? 'mapped to' : 'not mapped to'} ${where}; nothing changed`);
    } else {
      out.line(say`${action === 'map' ? 'Mapped' : 'Unmapped'} company ${ids[0]} ${action === 'map' ? 'to' : 'from'} ${where}`);
    }
    return;
  }
  const verb = action === 'map' ? 'Mapped' : 'Unmapped';
  const already = action === 'map' ? 'already mapped' : 'not mapped';
  out.line(
    changed === 0
      ? say`All ${change.total} companies were ${already} ${action === 'map' ? 'to' : 'from'} ${where}; nothing changed`
      : say`${verb} ${changed} of ${change.total} companies ${action === 'map' ? 'to' : 'from'} ${where} (${unchanged} ${already})`,
  );
}

const LIST_COMPANIES_OPTIONS = defineOptions([
  { flags: '--limit <n>', description: 'page size, 1-1000', default: '100' },
  { flags: '--cursor <cursor>', description: 'continue after this cursor (printed at the end of a page; next_cursor in JSON)' },
]);

export const listCompaniesCommand = defineCommand({
  name: 'list-companies',
  group: 'Companies',
  summary: "list a partner's companies",
  description: "list a partner's companies by id, a page at a time",
  arguments: [PARTNER_ARGUMENT],
  options: LIST_COMPANIES_OPTIONS,
  run: (session, out, { args, options }) => runListCompanies(session, out, args[0], options),
});

async function runListCompanies(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  options: OptionsOf<typeof LIST_COMPANIES_OPTIONS>,
): Promise<void> {
  const reference = await resolvePartnerArgument(session, partnerArgument);
  const limit = parseLimit(options.limit, 100);
  const [{ listCompanies }, db] = await Promise.all([import('../../domain/operations/companies.js'), session.db()]);
  const page = await listCompanies(db, reference, { limit, cursor: options.cursor });
  if (out.json) {
    out.emitJson({
      partner_id: page.partner.id,
      companies: page.companies.map((company) => ({ company_id: company.companyId, created_at: iso(company.createdAt) })),
      next_cursor: page.nextCursor,
    });
    return;
  }
  if (page.companies.length === 0) {
    out.line(options.cursor ? say`No more companies.` : say`No companies mapped to ${page.partner.name} (${page.partner.id}).`);
    return;
  }
  out.line(
    await out.table(
      [{ title: 'COMPANY' }, { title: 'MAPPED' }],
      page.companies.map((company) => [company.companyId, company.createdAt]),
    ),
  );
  if (page.nextCursor) {
    out.note(say`More: partnerctl list-companies ${page.partner.id} --limit ${limit} --cursor ${quote(page.nextCursor)}`);
  }
}

/** A value as a shell word. */
function quote(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}
