import { parseTimeOrDuration } from '../../domain/rules/validation.js';
import { AppError } from '../../errors.js';
import { csvField } from '../csv.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { iso, type Output } from '../output.js';
import type { Session } from '../session.js';
import { say } from '../say.js';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 10_000;
const CSV_COLUMNS = ['at', 'request_id', 'status', 'cause', 'method', 'path', 'partner_id', 'company_id', 'client_address', 'key_pair_id', 'token_id', 'engine_status', 'engine_ms', 'bytes', 'trace_id', 'instance_id'];

const REQUESTS_OPTIONS = defineOptions([
  { flags: '--since <time|duration>', description: 'answers from this ISO time, or this long ago (2h, 7d); default 24h' },
  { flags: '--until <time>', description: 'answers before this ISO time (default: now)' },
  { flags: '--status <class|code>', description: 'only this status class (4xx, 5xx) or status (503)' },
  { flags: '--cause <code>', description: 'only this cause (docs/reasons.md)' },
  { flags: '--company <id>', description: 'only answers naming this company' },
  { flags: '--address <address>', description: 'only answers to this client address' },
  { flags: '--limit <n>', description: `at most this many, newest first (default ${DEFAULT_LIMIT}, at most ${MAX_LIMIT})` },
  { flags: '--csv', description: 'one row per answer' },
]);

/** `--status`: a class (4xx, 5xx) or one status, as an inclusive range. */
function statusRange(value: string): { from: number; to: number } {
  const shown = value.slice(0, 20);
  const kind = /^([1-5])xx$/i.exec(value);
  if (kind) return { from: Number(kind[1]) * 100, to: Number(kind[1]) * 100 + 99 };
  if (/^[1-5][0-9]{2}$/.test(value)) return { from: Number(value), to: Number(value) };
  throw new AppError('invalid_argument', `--status must be a class (4xx, 5xx) or a status (503), got '${shown}'`, { hint: "see 'partnerctl requests --help'" });
}

function limitOf(value: string | undefined): number {
  if (value === undefined) return DEFAULT_LIMIT;
  const limit = /^[0-9]{1,6}$/.test(value) ? Number(value) : 0;
  if (limit < 1 || limit > MAX_LIMIT) throw new AppError('invalid_argument', `--limit must be a whole number from 1 to ${MAX_LIMIT}, got '${value.slice(0, 20)}'`);
  return limit;
}

export const requestsCommand = defineCommand({
  name: 'requests',
  group: 'Audit and webhooks',
  summary: 'the answers on record, newest first, with their request ids',
  description:
    'the answers on record (every answer that was not a success), newest first, with their request ids, causes and the engine\'s part, filtered by window, status, cause, company and address; and how many the caps held back',
  arguments: [{ name: '[partner]', description: 'only this partner (id, unique name, access key or key-pair id)' }],
  options: REQUESTS_OPTIONS,
  notes:
    "'unrecorded' counts what the caps held back in the window (the partner's, with a partner), whatever the\n" +
    'other filters: the counters keep no status, cause, company or address.',
  examples: [
    { caption: "the partner's 5xx of the last hour", lines: ['partnerctl requests "Acme Pricing" --since 1h --status 5xx'] },
    { caption: 'every engine timeout today, for the engine team', lines: ['partnerctl requests --since 24h --cause engine_timeout --csv > timeouts.csv'] },
  ],
  run: (session, out, { args, options }) => runRequests(session, out, args[0], options),
});

async function runRequests(session: Session, out: Output, partner: string | undefined, options: OptionsOf<typeof REQUESTS_OPTIONS>): Promise<void> {
  if (options.csv && out.json) throw new AppError('invalid_argument', '--csv and --json are two formats: choose one');
  const now = Date.now();
  const since = parseTimeOrDuration(options.since ?? '24h', '--since', now);
  const until = options.until === undefined ? new Date(now) : parseTimeOrDuration(options.until, '--until', now);
  const status = options.status === undefined ? undefined : statusRange(options.status);
  const limit = limitOf(options.limit);
  const [{ requestsReport }, db] = await Promise.all([import('../../domain/operations/refusals.js'), session.db()]);
  const report = await requestsReport(db, {
    ...(partner !== undefined ? { partner } : {}),
    since,
    until,
    ...(status !== undefined ? { status } : {}),
    ...(options.cause !== undefined ? { cause: options.cause } : {}),
    ...(options.company !== undefined ? { company: options.company } : {}),
    ...(options.address !== undefined ? { address: options.address } : {}),
    limit,
  });
  const rows = report.requests.map((d) => ({
    at: iso(d.at),
    request_id: d.requestId,
    status: d.status,
    cause: d.reason,
    method: d.method,
    path: d.path,
    partner_id: d.partnerId,
    company_id: d.companyId,
    client_address: d.clientAddress,
    key_pair_id: d.keyPairId,
    token_id: d.tokenId,
    engine_status: d.engineStatus,
    engine_ms: d.engineMs,
    bytes: d.bytes,
    trace_id: d.traceId,
    instance_id: d.instanceId,
  }));
  if (options.csv) {
    const lines = [CSV_COLUMNS.join(',')];
    for (const row of rows) lines.push(CSV_COLUMNS.map((column) => csvField(row[column as keyof typeof row] ?? null)).join(','));
    session.terminal.out.write(`${lines.join('\n')}\n`);
    return;
  }
  if (out.json) {
    out.emitJson({ partner_id: report.partnerId, since: iso(report.since), until: iso(report.until), requests: rows, unrecorded: report.unrecorded });
    return;
  }
  if (rows.length === 0) out.line(say`No answer on record matches.`);
  else {
    out.line(
      await out.table(
        [
          { title: 'AT' },
          { title: 'REQUEST ID' },
          { title: 'STATUS', align: 'right' },
          { title: 'CAUSE' },
          { title: 'PATH', cut: 'end', min: 8 },
          { title: 'ADDRESS' },
          { title: 'ENGINE', align: 'right' },
        ],
        report.requests.map((d) => [
          out.tableTime(d.at),
          d.requestId,
          d.status,
          d.reason,
          d.path,
          d.clientAddress,
          d.engineStatus === null && d.engineMs === null ? null : `${d.engineStatus ?? '-'} ${d.engineMs ?? '-'} ms`,
        ]),
      ),
    );
  }
  const heldBack = Object.values(report.unrecorded).reduce((sum, count) => sum + count, 0);
  out.line(heldBack === 0 ? say`Nothing held back by the caps in the window.` : say`Held back by the caps in the window, counted only: ${heldBack} ('partnerctl refusals' says which caps).`);
}
