import { AUDIT_ACTIONS } from '../../domain/audit-actions.js';
import { parseTimeOrDuration } from '../../domain/validation.js';
import { EXIT } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { iso, type Output } from '../output.js';
import type { Session } from '../session.js';
import { parseLimit } from './common.js';

export const auditCommand = defineCommand<AuditOptions>({
  name: 'audit',
  description: 'show the audit trail, newest first',
  arguments: [{ name: '[partner]', description: 'only events of this partner' }],
  options: [
    { flags: '--limit <n>', description: 'how many events, 1-1000', default: '50' },
    { flags: '--since <time|duration>', description: 'only events at or after this ISO time, or this long ago (2h, 7d)' },
    { flags: '--action <name>', description: `only this action, one of: ${AUDIT_ACTIONS.join(', ')}` },
    { flags: '--principal <name>', description: 'only events of this database login (or user@host on SQLite)' },
    { flags: '--company <company_id>', description: 'only events whose details name this company' },
    { flags: '--cursor <cursor>', description: 'continue after this cursor (next_cursor in JSON)' },
    { flags: '--wide', description: 'every column, every value and time whole, however wide the terminal' },
  ],
  run: (session, out, { args, options }) => runAudit(session, out, args[0], options),
  subcommands: [
    defineCommand<{ head?: string }>({
      name: 'verify',
      description: 'check the audit chain: exit 0 when intact, 1 naming the first event altered, removed or inserted',
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

interface AuditOptions {
  limit?: string;
  since?: string;
  action?: string;
  principal?: string;
  company?: string;
  cursor?: string;
  wide?: boolean;
}

async function runAudit(session: Session, out: Output, partner: string | undefined, options: AuditOptions): Promise<void> {
  const limit = parseLimit(options.limit, 50);
  const since = options.since === undefined ? undefined : parseTimeOrDuration(options.since, '--since');
  const [{ auditEventsPage }, db] = await Promise.all([import('../../domain/audit.js'), session.db()]);
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
  if (events.length === 0) out.line('No audit events.');
  else {
    out.line(
      await out.table(
        // At 80 columns: whole times (to the minute) and actions; the rest cut or dropped (--wide, --json).
        [
          { title: 'AT', whole: true },
          { title: 'ACTION', whole: true },
          { title: 'PARTNER', min: 12 },
          { title: 'ACTOR', min: 8, optional: true },
          { title: 'PRINCIPAL', min: 8, optional: true },
          { title: 'DETAILS', min: 10, optional: true },
        ],
        events.map((event) => [
          out.tableTime(event.at, options.wide),
          event.action,
          event.partnerId === null ? null : `${event.partnerName ?? '?'} (${event.partnerId})`,
          event.actor,
          event.principal === null ? null : `${event.principal}${event.principalVerified ? '' : ' (unverified)'}`,
          JSON.stringify(event.details),
        ]),
        { wide: options.wide === true },
      ),
    );
  }
  if (nextCursor) out.note(`More: partnerctl audit --cursor ${nextCursor} (with the same filters)`);
}

async function runAuditVerify(session: Session, out: Output, head: string | undefined): Promise<number> {
  const [{ verifyAuditChain }, db] = await Promise.all([import('../../domain/audit.js'), session.db()]);
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
    out.line(report.ok ? `OK: ${report.message}; head ${report.head ?? '(none)'}` : `BROKEN (${report.reason}): ${report.message}`);
    if (report.since && report.since.legacyThrough > 0) {
      out.line(
        `Events #1-#${report.since.legacyThrough} predate the chain: they were chained at ${iso(report.since.startedAt)}, and are vouched for only from then on.`,
      );
    }
  }
  return report.ok ? EXIT.ok : EXIT.error;
}

async function runAuditHead(session: Session, out: Output): Promise<void> {
  const [{ auditHead }, db] = await Promise.all([import('../../domain/audit.js'), session.db()]);
  const head = await auditHead(db);
  if (out.json) {
    out.emitJson({ id: head?.id ?? null, seq: head?.seq ?? null, hash: head?.hash ?? null });
    return;
  }
  out.line(head ? `${head.id} ${head.hash}` : 'No audit events.');
}
