import { auditEventsPage } from '../../domain/audit.js';
import { parseTimeOrDuration } from '../../domain/validation.js';
import { iso, type Output } from '../output.js';
import type { Session } from '../session.js';
import { parseLimit } from './partners.js';

export async function runAudit(
  session: Session,
  out: Output,
  partner: string | undefined,
  options: { limit?: string; since?: string; action?: string; company?: string; cursor?: string },
): Promise<void> {
  const limit = parseLimit(options.limit, 50);
  const since = options.since === undefined ? undefined : parseTimeOrDuration(options.since, '--since');
  const db = await session.db();
  const { events, nextCursor } = await auditEventsPage(db, {
    partner,
    limit,
    ...(since ? { since } : {}),
    ...(options.action !== undefined ? { action: options.action } : {}),
    ...(options.company !== undefined ? { company: options.company } : {}),
    ...(options.cursor !== undefined ? { cursor: options.cursor } : {}),
  });
  if (out.json) {
    out.emitJson({
      events: events.map((event) => ({
        id: event.id,
        at: iso(event.at),
        actor: event.actor,
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
        ['AT', 'ACTOR', 'ACTION', 'PARTNER', 'DETAILS'],
        events.map((event) => [
          iso(event.at),
          event.actor,
          event.action,
          event.partnerId === null ? null : `${event.partnerName ?? '?'} (${event.partnerId})`,
          JSON.stringify(event.details),
        ]),
      ),
    );
  }
  if (nextCursor) out.line(`More: --cursor ${nextCursor}`);
}
