import { AUDIT_ACTIONS } from '../../domain/rules/audit-actions.js';
import { parseTimeOrDuration } from '../../domain/rules/validation.js';
import { EXIT } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { iso, type Output } from '../output.js';
import { shortTime } from '../table.js';
import type { Session } from '../session.js';
import { parseLimit } from './common.js';
import { say } from '../say.js';

const AUDIT_OPTIONS = defineOptions([
  { flags: '--limit <n>', description: 'how many events, 1-1000', default: '50' },
  { flags: '--since <time|duration>', description: 'only events at or after this ISO time, or this long ago (2h, 7d)' },
  { flags: '--action <name>', description: `only this action, one of: ${AUDIT_ACTIONS.join(', ')}` },
  { flags: '--principal <name>', description: 'only events of this database login (or user@host on SQLite)' },
  { flags: '--company <company_id>', description: 'only events whose details name this company' },
  { flags: '--cursor <cursor>', description: 'continue after this cursor (next_cursor in JSON)' },
  { flags: '--wide', description: 'every column, every value and time whole, however wide the terminal' },
]);

export const auditCommand = defineCommand({
  name: 'audit',
  group: 'Audit and webhooks',
  summary: 'the audit trail, newest first',
  description: 'show the audit trail, newest first',
  arguments: [{ name: '[partner]', description: 'only events of this partner' }],
  options: AUDIT_OPTIONS,
  run: (session, out, { args, options }) => runAudit(session, out, args[0], options),
  subcommands: [
    defineCommand({
      name: 'verify',
      description: 'check the audit chain: exit 0 when intact, 1 naming the first event altered, removed, inserted or reordered',
      options: [{ flags: '--head <hash>', description: "also prove nothing was cut from the end: a hash 'audit head' printed earlier" }],
      run: (session, out, { options }) => runAuditVerify(session, out, options.head),
    }),
    defineCommand({
      name: 'head',
      description: "print the latest event's id and hash (keep it where the database's owner cannot rewrite it)",
      run: (session, out) => runAuditHead(session, out),
    }),
  ],
});

async function runAudit(session: Session, out: Output, partner: string | undefined, options: OptionsOf<typeof AUDIT_OPTIONS>): Promise<void> {
  const limit = parseLimit(options.limit, 50);
  const since = options.since === undefined ? undefined : parseTimeOrDuration(options.since, '--since', Date.now());
  const [{ auditEventsPage }, db] = await Promise.all([import('../../domain/operations/audit.js'), session.db()]);
  const { events, nextCursor } = await auditEventsPage(db, {
    partner,
    limit,
    ...(since ? { since } : {}),
    ...(options.action !== undefined ? { action: options.action } : {}),
    ...(options.principal !== undefined ? { principal: options.principal } : {}),
    ...(options.company !== undefined ? { company: options.company } : {}),
    ...(options.cursor !== undefined ? { cursor: options.cursor } : {}),
  });
  if (out.json) {
    out.emitJson({
      events: events.map((event) => ({
        id: event.id,
        at: iso(event.at),
        actor: event.actor,
        principal: event.principal,
        principal_verified: event.principalVerified,
        action: event.action,
        partner_id: event.partnerId,
        partner_name: event.partnerName,
        details: event.details,
      })),
      next_cursor: nextCursor,
    });
    return;
  }
  if (events.length === 0) out.line(say`No audit events.`);
  else {
    out.line(
      await out.table(
        // At 80 columns: whole times (to the minute) and actions, a summary of the details; the rest cut or dropped (--wide, --json).
        [
          { title: 'AT' },
          { title: 'ACTION' },
          { title: 'PARTNER', cut: 'name', min: 12 },
          { title: 'ACTOR', cut: 'end', min: 8, optional: true },
          { title: 'PRINCIPAL', cut: 'end', min: 8, optional: true },
          { title: 'DETAILS', cut: 'end', min: 12 },
        ],
        events.map((event) => [
          event.at,
          event.action,
          event.partnerId === null ? null : `${event.partnerName ?? '?'} (${event.partnerId})`,
          event.actor,
          event.principal === null ? null : `${event.principal}${event.principalVerified ? '' : ' (unverified)'}`,
          // On a terminal a summary to read at a glance; the whole with --wide, through a pipe and in --json.
          session.terminal.outIsTTY && !options.wide ? detailsSummary(event.details) : JSON.stringify(event.details),
        ]),
        { wide: options.wide === true },
      ),
    );
  }
  if (nextCursor) out.note(say`More: partnerctl audit --cursor ${nextCursor} (with the same filters)`);
}

const ID = /^([a-z]{2,4}_)([0-9A-Za-z]{6})[0-9A-Za-z]{10,}$/;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/;

/**
 * An event's details as `key_pair=kp_01KX9F… retires=2026-12-03 08:41 after_switch=7d`: ids shortened, times
 * to the minute, `_id`/`_at` dropped from the names, what is false or empty left out, access keys (the pair
 * names them) too.
 */
function detailsSummary(details: Record<string, unknown>): string {
  const value = (key: string, raw: unknown): string | null => {
    if (raw === null || raw === undefined || raw === false || raw === '') return null;
    if (raw === true) return '';
    if (typeof raw === 'number') return /_(at|before)$/.test(key) && raw > 1e12 ? shortTime(new Date(raw)) : String(raw);
    if (typeof raw === 'string') {
      const id = ID.exec(raw);
      if (id) return `${id[1]}${id[2]}…`;
      return ISO_TIME.test(raw) && !Number.isNaN(Date.parse(raw)) ? shortTime(new Date(raw)) : raw;
    }
    if (Array.isArray(raw)) {
      if (raw.length === 0) return '[]';
      const first = value(key, raw[0]);
      return raw.length === 1 ? first : `${first}+${raw.length - 1}`;
    }
    if (typeof raw === 'object') return `{${detailsSummary(raw as Record<string, unknown>)}}`;
    return String(raw);
  };
  return Object.entries(details)
    .filter(([key]) => key !== 'access_key')
    .map(([key, raw]) => {
      const shown = value(key, raw);
      const name = key.replace(/_ids$/, 's').replace(/ys$/, 'ies').replace(/_id$|_at$/, '');
      return shown === null ? null : shown === '' ? name : `${name}=${shown}`;
    })
    .filter((part): part is string => part !== null)
    .join(' ');
}

async function runAuditVerify(session: Session, out: Output, head: string | undefined): Promise<number> {
  const [{ verifyAuditChain }, db] = await Promise.all([import('../../domain/operations/audit.js'), session.db()]);
  const report = await verifyAuditChain(db, head === undefined ? {} : { expectedHead: head });
  const since = report.since && {
    chain_started_at: iso(report.since.startedAt),
    events_before_chain: report.since.legacyThrough,
  };
  if (out.json) {
    out.emitJson({
      ok: report.ok,
      events: report.events,
      head: report.head,
      ...(report.ok ? {} : { broken_at: report.brokenAt, reason: report.reason }),
      message: report.message,
      ...(since ?? {}),
    });
  } else {
    out.line(report.ok ? say`OK: ${report.message}; head ${report.head ?? '(none)'}` : say`BROKEN (${report.reason}): ${report.message}`);
    if (report.since && report.since.legacyThrough > 0) {
      out.line(
        say`Events #1-#${report.since.legacyThrough} predate the chain: they were chained at ${iso(report.since.startedAt)}, and are vouched for only from then on.`,
      );
    }
  }
  return report.ok ? EXIT.ok : EXIT.error;
}

async function runAuditHead(session: Session, out: Output): Promise<void> {
  const [{ auditHead }, db] = await Promise.all([import('../../domain/operations/audit.js'), session.db()]);
  const head = await auditHead(db);
  if (out.json) {
    out.emitJson({ id: head?.id ?? null, seq: head?.seq ?? null, hash: head?.hash ?? null });
    return;
  }
  out.line(head ? say`${head.id} ${head.hash}` : say`No audit events.`);
}
