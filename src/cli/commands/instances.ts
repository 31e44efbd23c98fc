import { EXIT } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { iso, type Output } from '../output.js';
import { confirmDestructive } from '../prompts.js';
import type { Session } from '../session.js';
import type { WebhookDelivererStatus } from '../../domain/runtime/instances.js';
import { say, type Said } from '../say.js';

const INSTANCES_OPTIONS = defineOptions([
  {
    flags: '--fail-if-behind',
    description: 'exit 1 when any live instance (or stale one that may still serve) is behind the current revision (a monitor check)',
  },
  {
    flags: '--forget <id>',
    description: 'remove an instance known to be gone for good (a crashed host) from the registry, audited: no later receipt waits for it',
  },
]);

export const instancesCommand = defineCommand({
  name: 'instances',
  changes: (options) => options.forget !== undefined,
  group: 'Server',
  summary: 'the running serve instances and what each applied',
  description: 'list the running serve instances: heartbeat, the revision each applied, clock offset, stale or behind',
  options: INSTANCES_OPTIONS,
  notes: `An instance heartbeats every second; one silent for over 10 s is stale.
A stale instance with a staleness budget (PUBLIC_API_STALE_BUDGET) may
still answer from its last state until its last heartbeat + budget
(SERVING UNTIL): receipts do not count it as done before then. Past
that, it is listed, never awaited. Behind: live (or stale and may
serve) and not yet at the database's current revision. Clock (PostgreSQL): the
instance's clock minus the database server's; beyond 2 s it is skewed and
mints no token. On PostgreSQL the last line names the instance that
delivers webhooks (it holds the delivery lease).`,
  run: (session, out, { options }) => (options.forget === undefined ? runInstances(session, out, options) : runForget(session, out, options.forget)),
});

async function runForget(session: Session, out: Output, instanceId: string): Promise<undefined> {
  await confirmDestructive(session, `Forget serve instance '${instanceId}' (receipts stop waiting for it; only for an instance that will not serve again)`);
  const [{ forgetInstance }, db] = await Promise.all([import('../../domain/runtime/instances.js'), session.db()]);
  const row = await forgetInstance(db, session.who, instanceId);
  if (out.json) out.emitJson({ instance_id: row.instanceId, host: row.host, pid: row.pid, forgotten: true, changed: true });
  else out.line(say`Forgot serve instance ${row.instanceId} (${row.host}, pid ${row.pid}, last seen ${iso(row.lastSeenAt)}).`);
  return undefined;
}

async function runInstances(session: Session, out: Output, options: OptionsOf<typeof INSTANCES_OPTIONS>): Promise<number | undefined> {
  const [{ instanceReport }, db] = await Promise.all([import('../../domain/runtime/instances.js'), session.db()]);
  const { revision, instances, webhookDelivery } = await instanceReport(db);
  if (out.json) {
    out.emitJson({
      revision,
      webhook_delivery:
        webhookDelivery === null
          ? null
          : { holder: webhookDelivery.holder, instance_id: webhookDelivery.instanceId, held_until: webhookDelivery.heldUntil === null ? null : iso(webhookDelivery.heldUntil) },
      instances: instances.map((i) => ({
        instance_id: i.instanceId,
        host: i.host,
        pid: i.pid,
        version: i.version,
        address: i.address,
        started_at: iso(i.startedAt),
        last_seen_at: iso(i.lastSeenAt),
        applied_revision: i.appliedRevision,
        clock_offset_ms: i.clockOffsetMs,
        clock_skewed: i.clockSkewed,
        stale: i.stale,
        behind: i.behind,
        stale_budget_ms: i.staleBudgetMs,
        serving_until: i.servingUntil === null ? null : iso(i.servingUntil),
        may_serve: i.mayServe,
      })),
    });
  } else {
    out.line(say`Revision ${revision}; ${instances.length} registered serve instance(s).`);
    if (instances.length > 0) {
      out.line(
        await out.table(
          [
            { title: 'INSTANCE' },
            { title: 'HOST' },
            { title: 'PID' },
            { title: 'ADDRESS' },
            { title: 'APPLIED' },
            { title: 'LAST SEEN' },
            { title: 'CLOCK' },
            { title: 'STATE' },
            { title: 'SERVING UNTIL', optional: true },
          ],
          instances.map((i) => [
            i.instanceId,
            i.host,
            i.pid,
            i.address,
            i.appliedRevision,
            i.lastSeenAt,
            clockText(i.clockOffsetMs, i.clockSkewed),
            i.mayServe ? 'stale, may serve' : i.stale ? 'stale' : i.behind ? 'behind' : 'current',
            i.servingUntil,
          ]),
        ),
      );
    }
    if (webhookDelivery !== null) out.line(deliveryText(webhookDelivery));
  }
  const behind = instances.filter((i) => i.behind);
  if (options.failIfBehind && behind.length > 0) {
    out.note(
      say`partnerctl: ${behind.length} serve instance(s) behind revision ${revision}: ${behind.map((i) => `${i.instanceId} (${i.host}, pid ${i.pid}, at ${i.appliedRevision ?? 'none'})`).join(', ')}`,
    );
    return EXIT.error;
  }
  return undefined;
}

/** PostgreSQL: which instance holds the webhook-delivery lease, if any. */
function deliveryText(delivery: WebhookDelivererStatus): Said {
  if (delivery.holder === null) return say`Webhook delivery: no instance holds the lease; none delivers now.`;
  const who = delivery.instanceId ?? say`${delivery.holder} (not a registered serve instance: a 'webhooks deliver' run)`;
  return say`Webhook delivery: ${who}, lease held until ${iso(delivery.heldUntil!)}.`;
}

/** `+12 ms`, `-0.3 s`, `+60.0 s SKEWED`; `-` where nothing is measured (SQLite: one clock). */
function clockText(offsetMs: number | null, skewed: boolean): string {
  if (offsetMs === null) return '-';
  const sign = offsetMs > 0 ? '+' : '';
  const text = Math.abs(offsetMs) < 1_000 ? `${sign}${offsetMs} ms` : `${sign}${(offsetMs / 1000).toFixed(1)} s`;
  return skewed ? `${text} SKEWED` : text;
}
