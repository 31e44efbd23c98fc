import { parseTimeOrDuration } from '../../domain/rules/validation.js';
import { AppError } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { iso, type Output } from '../output.js';
import type { Session } from '../session.js';
import { parseLimit } from './common.js';
import { say } from '../say.js';

const GROUPINGS = ['company', 'hour', 'day'] as const;
export const USAGE_DEFAULT_SINCE = '24h';

const USAGE_OPTIONS = defineOptions([
  { flags: '--since <time|duration>', description: 'hours from this ISO time, or this long ago (2h, 7d); default 24h' },
  { flags: '--by <company|hour|day>', description: 'one row per partner and company, hour or UTC day (default: per partner)' },
  { flags: '--limit <n>', description: 'how many rows, 1-1000', default: '50' },
  { flags: '--wide', description: 'every column, every value and time whole, however wide the terminal' },
]);

export const usageCommand = defineCommand({
  name: 'usage',
  group: 'Limits and usage',
  summary: 'data requests counted per partner, company, hour or day',
  description: 'data requests counted by the servers, per partner (and company, hour or UTC day); heaviest first',
  arguments: [{ name: '[partner]', description: 'only this partner' }],
  options: USAGE_OPTIONS,
  notes:
    'requests = accepted + client_errors + server_errors; a 429 counts in client_errors and rate_limited.\n' +
    'Servers write their counts at least every 10 s: the newest seconds may not show yet.',
  examples: [
    { caption: 'which partners hit the engines hardest this week, and which company?', lines: ['partnerctl usage --since 7d --by company'] },
  ],
  run: (session, out, { args, options }) => runUsage(session, out, args[0], options),
});

async function runUsage(session: Session, out: Output, partner: string | undefined, options: OptionsOf<typeof USAGE_OPTIONS>): Promise<void> {
  const limit = parseLimit(options.limit, 50);
  const since = parseTimeOrDuration(options.since ?? USAGE_DEFAULT_SINCE, '--since', Date.now());
  const by = options.by;
  if (by !== undefined && !(GROUPINGS as readonly string[]).includes(by)) {
    const { closest } = await import('../../text.js');
    const near = closest(by, GROUPINGS, 1)[0];
    throw new AppError('invalid_argument', `--by must be company, hour or day, got '${by.slice(0, 40)}'`, {
      hint: `${near ? `did you mean --by ${near}? ` : ''}see 'partnerctl usage --help'`,
    });
  }
  const [{ usageReport }, db] = await Promise.all([import('../../domain/runtime/usage.js'), session.db()]);
  const rows = await usageReport(db, {
    ...(partner !== undefined ? { partner } : {}),
    since,
    ...(by !== undefined ? { by: by as (typeof GROUPINGS)[number] } : {}),
    limit,
  });
  if (out.json) {
    out.emitJson({
      rows: rows.map((row) => ({
        partner_id: row.partnerId,
        ...(row.companyId !== undefined ? { company_id: row.companyId === '' ? null : row.companyId } : {}),
        period_start: iso(row.periodStart),
        requests: row.accepted + row.clientErrors + row.serverErrors,
        accepted: row.accepted,
        client_errors: row.clientErrors,
        server_errors: row.serverErrors,
        rate_limited: row.rateLimited,
      })),
    });
    return;
  }
  if (rows.length === 0) {
    out.line(say`No data requests counted in that period.`);
    return;
  }
  const period = by === 'hour' ? 'HOUR' : by === 'day' ? 'DAY' : 'FROM';
  out.line(
    await out.table(
      // At 80 columns: whole times (to the minute) and counts; names cut, ACCEPTED and ENGINE S dropped
      // first (--wide and --json carry them).
      [
        { title: 'PARTNER', cut: 'name', min: 12 },
        ...(by === 'company' ? [{ title: 'COMPANY' }] : []),
        { title: period },
        { title: 'REQUESTS', align: 'right' },
        { title: 'ACCEPTED', align: 'right', optional: true },
        { title: '4XX', align: 'right' },
        { title: '5XX', align: 'right' },
        { title: '429', align: 'right' },
        { title: 'ENGINE S', align: 'right', optional: true },
      ],
      rows.map((row) => [
        `${row.partnerName ?? '?'} (${row.partnerId})`,
        ...(by === 'company' ? [row.companyId === '' ? '(none)' : (row.companyId ?? null)] : []),
        row.periodStart,
        row.accepted + row.clientErrors + row.serverErrors,
        row.accepted,
        row.clientErrors,
        row.serverErrors,
        row.rateLimited,
        (row.engineMsSum / 1000).toFixed(1),
      ]),
      { wide: options.wide === true },
    ),
  );
}
