import { parseTimeOrDuration } from '../../domain/rules/validation.js';
import { AppError } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { iso, type Output } from '../output.js';
import type { Session } from '../session.js';
import { say } from '../say.js';

const GROUPINGS = ['company', 'address'] as const;
const EXAMPLES = 10;

const REFUSALS_OPTIONS = defineOptions([
  { flags: '--since <time|duration>', description: 'refusals from this ISO time, or this long ago (2h, 7d); default 24h' },
  { flags: '--until <time>', description: 'refusals before this ISO time (default: now)' },
  { flags: '--reason <code>', description: 'only this reason code (docs/reasons.md)' },
  { flags: '--by <company|address>', description: 'counts per reason and company, or per reason and client address' },
]);

export const refusalsCommand = defineCommand({
  name: 'refusals',
  group: 'Audit and webhooks',
  summary: "the gate's refusals on record, by reason",
  description: "the gate's refusals on record, counted by reason (and company or address), the latest with their request ids, and how many the cap left unrecorded",
  arguments: [{ name: '[partner]', description: 'only this partner (id, unique name, access key or key-pair id)' }],
  options: REFUSALS_OPTIONS,
  notes:
    'Each server records at most 1,000 refusals per partner and per client address per minute; the rest are\n' +
    "counted, not recorded ('unrecorded'). With a partner, only what its own cap held back is counted.",
  examples: [{ caption: 'why has this partner been refused since 10:00?', lines: ['partnerctl refusals "Acme Pricing" --since 2026-11-26T10:00:00Z --by company'] }],
  run: (session, out, { args, options }) => runRefusals(session, out, args[0], options),
});

async function runRefusals(session: Session, out: Output, partner: string | undefined, options: OptionsOf<typeof REFUSALS_OPTIONS>): Promise<void> {
  const now = Date.now();
  const since = parseTimeOrDuration(options.since ?? '24h', '--since', now);
  const until = options.until === undefined ? new Date(now) : parseTimeOrDuration(options.until, '--until', now);
  const by = options.by;
  if (by !== undefined && !(GROUPINGS as readonly string[]).includes(by)) {
    throw new AppError('invalid_argument', `--by must be company or address, got '${by.slice(0, 40)}'`, { hint: "see 'partnerctl refusals --help'" });
  }
  const [{ refusalsReport }, db] = await Promise.all([import('../../domain/operations/refusals.js'), session.db()]);
  const report = await refusalsReport(db, {
    ...(partner !== undefined ? { partner } : {}),
    since,
    until,
    ...(options.reason !== undefined ? { reason: options.reason } : {}),
    ...(by !== undefined ? { by: by as (typeof GROUPINGS)[number] } : {}),
    examples: EXAMPLES,
  });
  const key = by === 'company' ? 'company_id' : 'client_address';
  if (out.json) {
    out.emitJson({
      partner_id: report.partnerId,
      since: iso(report.since),
      until: iso(report.until),
      counts: report.counts.map((count) => ({
        reason: count.reason,
        ...(by !== undefined ? { [key]: by === 'company' && count.key === '' ? null : count.key } : {}),
        refusals: count.refusals,
        latest_at: iso(count.latestAt),
      })),
      latest: report.latest.map((d) => ({
        request_id: d.requestId,
        at: iso(d.at),
        status: d.status,
        reason: d.reason,
        partner_id: d.partnerId,
        company_id: d.companyId,
        client_address: d.clientAddress,
      })),
      unrecorded: report.unrecorded,
    });
    return;
  }
  const unrecorded = report.unrecorded.address + report.unrecorded.partner + report.unrecorded.overflow;
  if (report.counts.length === 0) out.line(say`No refusals on record in that period.`);
  else {
    out.line(
      await out.table(
        [{ title: 'REASON' }, ...(by ? [{ title: by === 'company' ? 'COMPANY' : 'ADDRESS' }] : []), { title: 'REFUSALS', align: 'right' }, { title: 'LATEST' }],
        report.counts.map((count) => [
          count.reason,
          ...(by ? [by === 'company' && count.key === '' ? '(none)' : (count.key ?? null)] : []),
          count.refusals,
          out.tableTime(count.latestAt),
        ]),
      ),
    );
    out.line();
    out.line(say`Latest (partnerctl explain <request id>):`);
    out.line(
      await out.table(
        [{ title: 'AT' }, { title: 'REQUEST ID' }, { title: 'STATUS', align: 'right' }, { title: 'REASON' }, { title: 'ADDRESS' }],
        report.latest.map((d) => [out.tableTime(d.at), d.requestId, d.status, d.reason, d.clientAddress]),
      ),
    );
  }
  out.line(
    unrecorded === 0
      ? say`Every refusal of the period is on record (none over the cap).`
      : say`Unrecorded under the cap: ${unrecorded} (${report.unrecorded.address} over an address's cap, ${report.unrecorded.partner} over a partner's, ${report.unrecorded.overflow} beyond a server's buffer).`,
  );
}
