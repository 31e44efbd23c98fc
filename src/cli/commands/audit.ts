import { listAuditEvents } from '../../domain/audit.js';
import { iso, type Output } from '../output.js';
import type { Session } from '../session.js';
import { parseLimit } from './partners.js';

export async function runAudit(
  session: Session,
  out: Output,
  partner: string | undefined,
  options: { limit?: string },
): Promise<void> {
  const limit = parseLimit(options.limit, 50);
  const db = await session.db();
  const events = await listAuditEvents(db, { partner, limit });
  if (out.json) {
    out.emitJson({
      events: events.map((event) => ({
        id: event.id,
        at: iso(event.at),
        actor: event.actor,
        action: event.action,
        partner_id: event.partnerId,
        details: event.details,
      })),
    });
    return;
  }
  if (events.length === 0) {
    out.line('No audit events.');
    return;
  }
  out.line(
    await out.table(
      ['AT', 'ACTOR', 'ACTION', 'PARTNER', 'DETAILS'],
      events.map((event) => [iso(event.at), event.actor, event.action, event.partnerId, JSON.stringify(event.details)]),
    ),
  );
}
