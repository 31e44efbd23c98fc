import { EXIT } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { iso, type Output } from '../output.js';
import type { Session } from '../session.js';
import { parseLimit } from './common.js';
import { say } from '../say.js';

const EVENTS_HELP =
  'keys.issued, keys.rotated, keys.retired, keys.revoked, tokens.revoked, partner.disabled, partner.enabled, leak.reported, keys.expiring, quota.threshold';

const ADD_OPTIONS = defineOptions([
  { flags: '--url <url>', description: 'where events are POSTed: https:// (http:// only with --insecure)' },
  { flags: '--events <list>', description: `comma list of event types (default every one): ${EVENTS_HELP}` },
  { flags: '--partner <partner>', description: "only this partner's events" },
  { flags: '--description <text>', description: 'a note for the operators' },
  { flags: '--insecure', description: 'allow an http:// URL (loopback tests, private networks)' },
  { flags: '--if-not-exists', description: 'an endpoint for this URL already there: exit 0, changed: false (no secret printed)' },
]);

const DELIVERIES_OPTIONS = defineOptions([
  { flags: '--failed', description: 'only given-up deliveries and those retrying after a failure' },
  { flags: '--limit <n>', description: 'how many, 1-1000', default: '50' },
]);

export const webhooksCommand = defineCommand({
  name: 'webhooks',
  group: 'Audit and webhooks',
  summary: 'endpoints that receive signed events: add, list, remove, …',
  description: 'endpoints that receive signed events (Standard Webhooks): add, list, remove, test, deliveries, deliver',
  subcommands: [
    defineCommand({
      name: 'add',
      changes: true,
      description: 'add an endpoint; prints its id and signing secret (whsec_…) once; one endpoint per URL (exit 4 webhook_exists)',
      options: ADD_OPTIONS,
      examples: [{ lines: ['partnerctl webhooks add --url https://ops.example.com/hooks \\', '  --events keys.expiring,leak.reported'] }],
      run: (session, out, { options }) => runAdd(session, out, options),
    }),
    defineCommand({
      name: 'list',
      description: 'list the endpoints (never their secrets)',
      run: (session, out) => runList(session, out),
    }),
    defineCommand({
      name: 'remove',
      changes: true,
      description:
        'remove an endpoint; what was still to be delivered to it is dropped (asks to confirm, stating how many); one already removed exits 0, changed: false',
      arguments: [{ name: '<id>', description: 'the endpoint id (wh_…)' }],
      run: (session, out, { args }) => runRemove(session, out, args[0]!),
    }),
    defineCommand({
      name: 'test',
      description: 'send a webhook.test event to an endpoint now and print its answer (exit 1 unless 2xx)',
      arguments: [{ name: '<id>', description: 'the endpoint id (wh_…)' }],
      run: (session, out, { args }) => runTest(session, out, args[0]!),
    }),
    defineCommand({
      name: 'deliveries',
      description: 'deliveries, newest first: attempts, last status code, next retry',
      arguments: [{ name: '[id]', description: 'only this endpoint (wh_…)' }],
      options: DELIVERIES_OPTIONS,
      run: (session, out, { args, options }) => runDeliveries(session, out, args[0], options),
    }),
    defineCommand({
      name: 'deliver',
      changes: true,
      description: 'find due reminders and deliver what is due once, then exit (cron, without a running serve)',
      notes: 'Exit codes: 0 nothing failed, 1 some delivery failed this time (it is retried later or was given up).',
      run: (session, out) => runDeliver(session, out),
    }),
  ],
});

async function runAdd(session: Session, out: Output, options: OptionsOf<typeof ADD_OPTIONS>): Promise<void> {
  const [{ addWebhook }, { AppError }] = await Promise.all([import('../../domain/operations/webhooks.js'), import('../../errors.js')]);
  if (options.url === undefined) throw new AppError('missing_argument', '--url is required');
  const db = await session.db();
  const added = await addWebhook(db, session.who, {
    url: options.url,
    events: options.events?.split(','),
    partner: options.partner,
    description: options.description,
    insecure: options.insecure,
    ifNotExists: options.ifNotExists,
  });
  if (!added.changed) {
    if (out.json) out.emitJson({ ...endpointJson(added.endpoint), changed: false });
    else out.line(say`Webhook ${added.endpoint.id} already receives events at this URL; nothing changed (its secret was shown when it was added).`);
    return;
  }
  const { endpoint } = added;
  if (out.json) {
    out.emitJson({ ...endpointJson(endpoint), secret: endpoint.secret, changed: true });
    return;
  }
  out.line(say`Added webhook ${endpoint.id} -> ${endpoint.url}`);
  out.line(say`Events: ${endpoint.events?.join(', ') ?? 'every event'}${endpoint.partnerId ? ` of ${endpoint.partnerId}` : ''}`);
  out.line(say`Signing secret (shown once; verify every delivery with it): ${endpoint.secret}`);
}

function endpointJson(endpoint: import('../../db/repositories/webhooks.js').WebhookEndpoint) {
  return {
    id: endpoint.id,
    url: endpoint.url,
    events: endpoint.events,
    partner_id: endpoint.partnerId,
    description: endpoint.description,
    created_at: iso(endpoint.createdAt),
  };
}

async function runList(session: Session, out: Output): Promise<void> {
  const [{ listWebhooks }, db] = await Promise.all([import('../../domain/operations/webhooks.js'), session.db()]);
  const endpoints = await listWebhooks(db);
  if (out.json) {
    out.emitJson({ webhooks: endpoints.map(endpointJson) });
    return;
  }
  if (endpoints.length === 0) {
    out.line(say`No webhooks.`);
    return;
  }
  out.line(
    await out.table(
      ['ID', 'URL', 'EVENTS', 'PARTNER', { title: 'DESCRIPTION', cut: 'end' }, 'CREATED'],
      endpoints.map((endpoint) => [
        endpoint.id,
        endpoint.url,
        endpoint.events?.join(',') ?? 'all',
        endpoint.partnerId,
        endpoint.description,
        endpoint.createdAt,
      ]),
    ),
  );
}

async function runRemove(session: Session, out: Output, id: string): Promise<void> {
  const [{ removeWebhook, webhookRemoval }, { confirmDestructive }, db] = await Promise.all([
    import('../../domain/operations/webhooks.js'),
    import('../prompts.js'),
    session.db(),
  ]);
  const { endpoint, pending } = await webhookRemoval(db, id);
  if (endpoint) {
    await confirmDestructive(session, `Remove webhook ${endpoint.id} (${endpoint.url}), dropping ${pending} pending deliver${pending === 1 ? 'y' : 'ies'}`);
  }
  const removed = await removeWebhook(db, session.who, id);
  if (out.json) {
    out.emitJson({ id, removed: removed.changed, changed: removed.changed, dropped_deliveries: removed.dropped });
    return;
  }
  out.line(
    removed.changed
      ? say`Removed webhook ${id} (${removed.endpoint.url}); ${removed.dropped} pending deliver${removed.dropped === 1 ? 'y' : 'ies'} dropped.`
      : say`Webhook ${id} was already removed; nothing changed.`,
  );
}

async function runTest(session: Session, out: Output, id: string): Promise<number> {
  const [{ webhookForSending }, { sendWebhook }, { newEventId }, db] = await Promise.all([
    import('../../domain/operations/webhooks.js'),
    import('../../domain/runtime/webhook-delivery.js'),
    import('../../domain/operations/outbox.js'),
    session.db(),
  ]);
  const endpoint = await webhookForSending(db, id);
  const eventId = newEventId();
  const body = JSON.stringify({
    type: 'webhook.test',
    timestamp: new Date().toISOString(),
    data: { webhook_id: endpoint.id, actor: session.who.actor },
  });
  const result = await sendWebhook(endpoint, { id: eventId, body }, db.clock);
  const ok = result.status !== null && result.status >= 200 && result.status < 300;
  if (out.json) {
    out.emitJson({ id: endpoint.id, event_id: eventId, ok, status: result.status, error: ok ? null : result.error, ms: Math.round(result.ms), body: result.body });
  } else {
    out.line(
      result.status === null
        ? say`No answer from ${endpoint.url}: ${result.error}`
        : say`${endpoint.url} answered ${result.status} in ${Math.round(result.ms)} ms${result.body ? `: ${result.body.split('\n')[0]!.slice(0, 200)}` : ''}`,
    );
  }
  return ok ? EXIT.ok : EXIT.error;
}

async function runDeliveries(session: Session, out: Output, id: string | undefined, options: OptionsOf<typeof DELIVERIES_OPTIONS>): Promise<void> {
  const limit = parseLimit(options.limit, 50);
  const [{ listDeliveries }, db] = await Promise.all([import('../../domain/operations/webhooks.js'), session.db()]);
  const rows = await listDeliveries(db, { ...(id !== undefined ? { endpointId: id } : {}), failed: options.failed === true, limit });
  if (out.json) {
    out.emitJson({
      deliveries: rows.map((row) => ({
        event_id: row.eventId,
        webhook_id: row.endpointId,
        type: row.type,
        status: row.status,
        attempts: row.attempts,
        last_status: row.lastStatus,
        last_error: row.lastError,
        last_attempt_at: iso(row.lastAttemptAt),
        next_attempt_at: iso(row.nextAttemptAt),
        delivered_at: iso(row.deliveredAt),
        created_at: iso(row.createdAt),
      })),
    });
    return;
  }
  if (rows.length === 0) {
    out.line(say`No deliveries.`);
    return;
  }
  out.line(
    await out.table(
      // LAST: a status code, or the error a receiver caused (free text, cut on a terminal).
      ['EVENT', 'WEBHOOK', 'TYPE', 'STATUS', 'ATTEMPTS', { title: 'LAST', cut: 'end' }, 'NEXT RETRY', 'CREATED'],
      rows.map((row) => [
        row.eventId,
        row.endpointId,
        row.type,
        row.status,
        row.attempts,
        row.lastStatus !== null ? String(row.lastStatus) : row.lastError,
        row.nextAttemptAt,
        row.createdAt,
      ]),
    ),
  );
}

async function runDeliver(session: Session, out: Output): Promise<number> {
  const [{ WebhookDeliverer }, db] = await Promise.all([import('../../domain/runtime/webhook-delivery.js'), session.db()]);
  const deliverer = new WebhookDeliverer(db, {
    retryDelaysMs: session.config.webhookRetryDelaysMs,
    log: { info: () => {}, warn: () => {}, error: (_details, message) => out.note(say`partnerctl: ${message}`) },
  });
  const summary = await deliverer.runOnce();
  // Every attempt is recorded (delivered, retrying or given up): a run that attempted nothing changed nothing.
  if (out.json) out.emitJson({ ...summary, changed: summary.delivered + summary.retrying + summary.failed > 0 });
  else {
    out.line(
      say`Delivered ${summary.delivered}; ${summary.retrying} failed and will be retried; ${summary.failed} given up; ${summary.reminders} reminder(s) found.`,
    );
  }
  return summary.retrying + summary.failed > 0 ? EXIT.error : EXIT.ok;
}
