import { randomBytes } from 'node:crypto';
import type { Database } from '../../db/client.js';
import {
  deleteWebhookEndpoint,
  deliveryPage,
  insertWebhookEndpoint,
  pendingDeliveryCount,
  webhookEndpointById,
  webhookEndpointWithSecret,
  webhookEndpoints,
  type DeliveryRow,
  type WebhookEndpoint,
  type WebhookEndpointRow,
} from '../../db/repositories/webhooks.js';
import { webhookEventExists } from '../../db/repositories/audit.js';
import { AppError } from '../../errors.js';
import { maskedUrl } from '../../text.js';
import { WEBHOOK_EVENT_TYPES, EVENT_SET } from './outbox.js';
import { findPartner } from './partners.js';
import { runUnit, type Actor } from './transactions.js';
import { CONTROL } from '../rules/validation.js';

export { WEBHOOK_EVENT_TYPES } from './outbox.js';
export const WEBHOOK_ID_PATTERN = /^wh_[0-9a-f]{16}$/;

/** The signing secret: `whsec_` + base64 of 32 random bytes (what the standardwebhooks libraries take). */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export interface WebhookInput {
  url: string;
  events?: string[] | undefined;
  partner?: string | undefined;
  description?: string | undefined;
  /** Allows http:// (loopback tests, private networks). */
  insecure?: boolean | undefined;
  /** An endpoint for this URL already there is the answer (changed: false), not a conflict. */
  ifNotExists?: boolean | undefined;
}

function validateWebhookUrl(raw: string, insecure: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AppError('invalid_argument', `url is not a URL: '${maskedUrl(raw).slice(0, 200)}'`, { field: 'url' });
  }
  if (url.protocol === 'http:' && !insecure) {
    throw new AppError('invalid_argument', 'url must be https:// (http:// only where allowed explicitly, for loopback tests and private networks)', { field: 'url' });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new AppError('invalid_argument', `url must be an https:// URL, got '${maskedUrl(raw).slice(0, 200)}'`, { field: 'url' });
  }
  if (url.username || url.password) throw new AppError('invalid_argument', 'url must not carry credentials', { field: 'url' });
  if (url.hash) throw new AppError('invalid_argument', 'url must not carry a fragment', { field: 'url' });
  return url.toString();
}

function validateEventList(events: readonly string[]): string[] {
  const list = [...new Set(events.map((event) => event.trim()).filter(Boolean))];
  if (list.length === 0) throw new AppError('invalid_argument', `events must name at least one of ${WEBHOOK_EVENT_TYPES.join(', ')}`, { field: 'events' });
  for (const event of list) {
    if (!EVENT_SET.has(event)) {
      throw new AppError('invalid_argument', `events: unknown event '${event.slice(0, 40)}'`, { field: 'events', hint: `events: ${WEBHOOK_EVENT_TYPES.join(', ')}` });
    }
  }
  return list;
}

/** The new endpoint with its secret (returned once, here), or the one already there for the URL, without it. */
export type AddedWebhook = { endpoint: WebhookEndpointRow; changed: true } | { endpoint: WebhookEndpoint; changed: false };

/**
 * Adds an endpoint (audited as webhook.added, without its secret). One endpoint per URL: a second add of the
 * same URL is `webhook_exists`, or the existing endpoint (changed: false) with ifNotExists, so a runbook
 * re-run never makes a second one that receives every event twice.
 */
export async function addWebhook(db: Database, who: Actor, input: WebhookInput): Promise<AddedWebhook> {
  const url = validateWebhookUrl(input.url, input.insecure === true);
  const events = input.events === undefined ? null : validateEventList(input.events);
  const description = input.description?.trim() || null;
  if (description !== null && (description.length > 200 || CONTROL.test(description))) {
    throw new AppError('invalid_argument', 'description must be 1 to 200 characters without control characters', { field: 'description' });
  }
  return runUnit<AddedWebhook>(db, who, async (unit) => {
    const partnerId = input.partner === undefined ? null : (await findPartner(unit.tx, input.partner)).id;
    const existing = (await webhookEndpoints(unit.tx)).find((endpoint) => endpoint.url === url);
    if (existing) {
      if (input.ifNotExists) return { endpoint: existing, changed: false };
      throw new AppError('webhook_exists', `webhook ${existing.id} already receives events at this URL`, { field: 'url' });
    }
    const endpoint: WebhookEndpointRow = {
      id: `wh_${randomBytes(8).toString('hex')}`,
      url,
      secret: newSecret(),
      events,
      partnerId,
      description,
      createdAt: new Date(unit.clock.now()),
    };
    await insertWebhookEndpoint(unit.tx, endpoint);
    unit.audit({
      action: 'webhook.added',
      partnerId,
      details: { webhook_id: endpoint.id, url, events, ...(description ? { description } : {}) },
    });
    return { endpoint, changed: true };
  });
}

/** What removing an endpoint would drop, for the question asked first. */
export async function webhookRemoval(db: Database, id: string): Promise<{ endpoint: WebhookEndpoint | null; pending: number }> {
  checkWebhookId(id);
  const endpoint = await webhookEndpointById(db.sql, id);
  return { endpoint, pending: endpoint ? await pendingDeliveryCount(db.sql, id) : 0 };
}

export type RemovedWebhook = { changed: true; endpoint: WebhookEndpoint; dropped: number } | { changed: false; endpoint: null; dropped: 0 };

/**
 * Removes an endpoint and the deliveries still to be made to it. One removed earlier (its webhook.removed
 * event names it) is `changed: false`, so a re-run succeeds; an id never added is not found.
 */
export async function removeWebhook(db: Database, who: Actor, id: string): Promise<RemovedWebhook> {
  checkWebhookId(id);
  return runUnit<RemovedWebhook>(db, who, async (unit) => {
    const endpoint = await webhookEndpointById(unit.tx, id);
    if (!endpoint) {
      if (await webhookEventExists(unit.tx, 'webhook.removed', id)) return { changed: false, endpoint: null, dropped: 0 };
      throw new AppError('not_found', `no webhook '${id}'`, { field: 'webhook' });
    }
    const { dropped } = await deleteWebhookEndpoint(unit.tx, id);
    unit.audit({ action: 'webhook.removed', partnerId: endpoint.partnerId, details: { webhook_id: id, url: endpoint.url, dropped_deliveries: dropped } });
    return { changed: true, endpoint, dropped };
  });
}

export function checkWebhookId(id: string): void {
  if (!WEBHOOK_ID_PATTERN.test(id)) throw new AppError('invalid_argument', `'${id.slice(0, 40)}' is not a webhook id (wh_ and 16 hex digits)`);
}

export async function findWebhook(db: Database, id: string): Promise<WebhookEndpoint> {
  checkWebhookId(id);
  const endpoint = await webhookEndpointById(db.sql, id);
  if (!endpoint) throw new AppError('not_found', `no webhook '${id}'`, { field: 'webhook' });
  return endpoint;
}

/** The endpoint with its signing secret, for `webhooks test` (a role that may not read secrets is refused). */
export async function webhookForSending(db: Database, id: string): Promise<WebhookEndpointRow> {
  checkWebhookId(id);
  const endpoint = await webhookEndpointWithSecret(db.sql, id);
  if (!endpoint) throw new AppError('not_found', `no webhook '${id}'`, { field: 'webhook' });
  return endpoint;
}

export function listWebhooks(db: Database): Promise<WebhookEndpoint[]> {
  return webhookEndpoints(db.sql);
}

export async function listDeliveries(db: Database, options: { endpointId?: string; failed?: boolean; limit: number }): Promise<DeliveryRow[]> {
  if (options.endpointId !== undefined) await findWebhook(db, options.endpointId);
  return deliveryPage(db.sql, options);
}
