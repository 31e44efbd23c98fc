// The outbox: webhook events written in the transaction of the change they report (src/domain/transactions.ts
// appendToChain writes them from the unit's audit entries), delivered later by src/domain/webhook-delivery.ts.
import { randomBytes } from 'node:crypto';
import { partnerById } from '../../db/repositories/partners.js';
import { insertOutboxEvent, webhookEndpoints, type WebhookEndpoint } from '../../db/repositories/webhooks.js';
import type { SqlTx } from '../../db/unit.js';

/**
 * The events webhooks carry: named as the audit actions they report (one vocabulary), plus the reminders a
 * delivering instance finds by itself (keys.expiring, quota.threshold).
 */
export const WEBHOOK_EVENT_TYPES = [
  'keys.issued',
  'keys.rotated',
  'keys.retired',
  'keys.revoked',
  'tokens.revoked',
  'partner.disabled',
  'partner.enabled',
  'leak.reported',
  'keys.expiring',
  'quota.threshold',
] as const;

export const EVENT_SET: ReadonlySet<string> = new Set<string>(WEBHOOK_EVENT_TYPES);

/** An event's id: the `webhook-id` header every attempt carries (receivers dedupe on it). */
export function newEventId(): string {
  return `msg_${randomBytes(16).toString('hex')}`;
}

/** What the outbox holds for one event (the body sent is exactly `body`). */
export interface NewWebhookEvent {
  type: string;
  partnerId: string | null;
  data: Record<string, unknown>;
  /** The audit event it reports (its seq); absent for the reminders a delivering server finds. */
  auditSeq?: number;
}

/**
 * Writes events into the outbox in the caller's transaction, with one pending delivery per endpoint that
 * wants it: the change and its events commit together or not at all. Events no endpoint wants are not
 * written. Types outside the vocabulary are ignored (most audit actions are not webhook events).
 */
export async function writeOutbox(tx: SqlTx, events: readonly NewWebhookEvent[], at: Date): Promise<number> {
  const wanted = events.filter((event) => EVENT_SET.has(event.type) || event.type === 'webhook.test');
  if (wanted.length === 0) return 0;
  const endpoints = await webhookEndpoints(tx);
  if (endpoints.length === 0) return 0;
  const names = new Map<string, string | null>();
  let written = 0;
  for (const event of wanted) {
    const targets = endpoints.filter((endpoint) => wants(endpoint, event.type, event.partnerId)).map((endpoint) => endpoint.id);
    if (targets.length === 0) continue;
    let partnerName: string | null = null;
    if (event.partnerId !== null) {
      if (!names.has(event.partnerId)) names.set(event.partnerId, (await partnerById(tx, event.partnerId))?.name ?? null);
      partnerName = names.get(event.partnerId) ?? null;
    }
    const body = {
      type: event.type,
      timestamp: at.toISOString(),
      data: { partner_id: event.partnerId, partner_name: partnerName, ...event.data },
    };
    await insertOutboxEvent(tx, { id: newEventId(), type: event.type, partnerId: event.partnerId, data: JSON.stringify(body), createdAt: at, auditSeq: event.auditSeq ?? null }, targets);
    written++;
  }
  return written;
}

function wants(endpoint: WebhookEndpoint, type: string, partnerId: string | null): boolean {
  if (endpoint.events !== null && !endpoint.events.includes(type)) return false;
  return endpoint.partnerId === null || endpoint.partnerId === partnerId;
}

/** The audit rows of a unit as webhook events: the actor and the event's details (never a secret: audit details hold none). */
export function auditRowsAsEvents(
  rows: readonly { seq: number; actor: string; action: string; partnerId: string | null; details: string }[],
): NewWebhookEvent[] {
  return rows
    .filter((row) => EVENT_SET.has(row.action))
    .map((row) => ({
      type: row.action,
      partnerId: row.partnerId,
      data: { actor: row.actor, ...(JSON.parse(row.details) as Record<string, unknown>) },
      auditSeq: row.seq,
    }));
}

