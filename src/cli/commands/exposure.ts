import type { ExposureReport } from '../../domain/operations/exposure.js';
import { parseTimeOrDuration } from '../../domain/rules/validation.js';
import { AppError } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { iso, type Output } from '../output.js';
import type { Session } from '../session.js';
import { leakedValue, signingKeysIfAny } from './leaks.js';
import { say } from '../say.js';
import { csvField } from '../csv.js';

const EXPOSURE_OPTIONS = defineOptions([
  { flags: '--since <time|duration>', description: 'from this ISO time, or this long ago (2h, 7d); default: everything kept' },
  { flags: '--until <time>', description: 'before this ISO time (default: now)' },
  { flags: '--csv', description: 'one row per company, per client address and per address tokens were minted from (minted_from), for a notice to the partner' },
]);

export const exposureCommand = defineCommand({
  name: 'exposure',
  group: 'Keys and leaks',
  summary: "what a credential reached: companies, addresses, when",
  description:
    'what a credential did: its first and last use, its containment, every company and client address it reached with counts, where its secret minted tokens (addresses, counts, failed attempts), and what it was refused after containment',
  arguments: [
    {
      name: '<value>',
      description: "what lookup takes (secret key, access key, key-pair id, token or token id) or a partner; '-' reads it from stdin",
    },
  ],
  options: EXPOSURE_OPTIONS,
  notes:
    'Counts are per hour (the window is rounded down to its hour) and kept PUBLIC_API_DECISION_RETENTION\n' +
    '(30 days by default). Servers write them at least every 10 s.',
  examples: [
    { caption: 'after containment, for the partner and its lawyers (a key-pair id is no secret)', lines: ['partnerctl exposure kp_01J… --csv > exposure.csv'] },
    { caption: 'a leaked value from the clipboard: pbpaste on macOS, wl-paste on Linux', lines: ['wl-paste | partnerctl exposure -'] },
  ],
  run: (session, out, { args, options }) => runExposure(session, out, args[0]!, options),
});

function countsJson(row: ExposureReport['companies'][number] | ExposureReport['addresses'][number]) {
  return {
    requests: row.accepted + row.clientErrors + row.serverErrors,
    accepted: row.accepted,
    client_errors: row.clientErrors,
    server_errors: row.serverErrors,
    first_seen: iso(row.firstAt),
    last_seen: iso(row.lastAt),
  };
}

async function runExposure(session: Session, out: Output, value: string, options: OptionsOf<typeof EXPOSURE_OPTIONS>): Promise<void> {
  if (options.csv && out.json) throw new AppError('invalid_argument', '--csv and --json are two formats: choose one');
  const now = Date.now();
  const since = options.since === undefined ? undefined : parseTimeOrDuration(options.since, '--since', now);
  const until = options.until === undefined ? undefined : parseTimeOrDuration(options.until, '--until', now);
  const looked = await leakedValue(session, value, 'exposure');
  const [{ exposureReport }, db] = await Promise.all([import('../../domain/operations/exposure.js'), session.db()]);
  const report = await exposureReport(db, looked, () => signingKeysIfAny(session, db, out), { ...(since ? { since } : {}), ...(until ? { until } : {}) });
  if (options.csv) {
    const lines = ['kind,value,requests,accepted,client_errors,server_errors,first_seen,last_seen'];
    const row = (kind: string, key: string, counts: ReturnType<typeof countsJson>) =>
      [kind, key, counts.requests, counts.accepted, counts.client_errors, counts.server_errors, counts.first_seen, counts.last_seen].map(csvField).join(',');
    for (const company of report.companies) lines.push(row('company', company.companyId, countsJson(company)));
    for (const address of report.addresses) lines.push(row('address', address.clientAddress, countsJson(address)));
    // Tokens minted from an address: accepted = tokens minted, the errors refused attempts at its access key.
    for (const address of report.mintedFrom) lines.push(row('minted_from', address.clientAddress, countsJson(address)));
    session.terminal.out.write(`${lines.join('\n')}\n`);
    return;
  }
  const refused = report.refusedAfterContainment;
  if (out.json) {
    out.emitJson({
      kind: report.kind,
      partner_id: report.partnerId,
      partner_name: report.partnerName,
      key_pair_id: report.keyPairId,
      token_id: report.tokenId,
      first_use: iso(report.firstUse),
      last_use: iso(report.lastUse),
      contained_at: iso(report.containedAt),
      companies: report.companies.map((company) => ({ company_id: company.companyId, ...countsJson(company) })),
      addresses: report.addresses.map((address) => ({ client_address: address.clientAddress, ...countsJson(address) })),
      tokens_minted_from: report.mintedFrom.map((address) => ({
        client_address: address.clientAddress,
        minted: address.accepted,
        failed_attempts: address.clientErrors + address.serverErrors,
        first_seen: iso(address.firstAt),
        last_seen: iso(address.lastAt),
      })),
      refused_after_containment: refused && {
        refusals: refused.refusals,
        by_reason: refused.byReason,
        by_address: refused.byAddress.map(({ clientAddress, refusals }) => ({ client_address: clientAddress, refusals })),
        latest: refused.latest.map((d) => ({ request_id: d.requestId, at: iso(d.at), reason: d.reason, client_address: d.clientAddress })),
      },
    });
    return;
  }
  const style = out.style;
  const subject = report.kind === 'token' ? `token ${report.tokenId}` : report.kind === 'key_pair' ? `key pair ${report.keyPairId}` : 'every credential';
  out.line(say`${style.bold(subject)} of ${style.bold(report.partnerName)} (${report.partnerId})`);
  out.line(report.firstUse ? say`Used from ${iso(report.firstUse)} to ${iso(report.lastUse)}` : say`No accepted data request on record.`);
  out.line(report.containedAt ? say`Contained at ${iso(report.containedAt)}` : say`Not contained.`);
  if (report.companies.length > 0) {
    out.line();
    out.line(
      await out.table(
        [{ title: 'COMPANY' }, { title: 'REQUESTS', align: 'right' }, { title: '2XX/3XX', align: 'right' }, { title: '4XX', align: 'right' }, { title: '5XX', align: 'right' }, { title: 'FIRST' }, { title: 'LAST' }],
        report.companies.map((c) => [c.companyId, c.accepted + c.clientErrors + c.serverErrors, c.accepted, c.clientErrors, c.serverErrors, out.tableTime(c.firstAt), out.tableTime(c.lastAt)]),
      ),
    );
    out.line();
    out.line(
      await out.table(
        [{ title: 'ADDRESS' }, { title: 'REQUESTS', align: 'right' }, { title: 'FIRST' }, { title: 'LAST' }],
        report.addresses.map((a) => [a.clientAddress, a.accepted + a.clientErrors + a.serverErrors, out.tableTime(a.firstAt), out.tableTime(a.lastAt)]),
      ),
    );
  }
  if (report.kind !== 'token') {
    out.line();
    if (report.mintedFrom.length === 0) out.line(say`Tokens minted from: no token exchange on record.`);
    else {
      out.line(say`Tokens minted from:`);
      out.line(
        await out.table(
          [{ title: 'ADDRESS' }, { title: 'MINTED', align: 'right' }, { title: 'FAILED', align: 'right' }, { title: 'FIRST' }, { title: 'LAST' }],
          report.mintedFrom.map((a) => [a.clientAddress, a.accepted, a.clientErrors + a.serverErrors, out.tableTime(a.firstAt), out.tableTime(a.lastAt)]),
        ),
      );
    }
  }
  if (refused) {
    out.line();
    out.line(
      refused.refusals === 0
        ? say`Refused after containment: nothing on record.`
        : say`Refused after containment: ${refused.refusals} (${refused.byReason.map((r) => `${r.reason} ${r.refusals}`).join(', ')}), from ${refused.byAddress.map((a) => `${a.clientAddress} (${a.refusals})`).join(', ')}`,
    );
  }
}
