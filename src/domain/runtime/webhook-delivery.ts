// Delivery of the outbox (src/domain/outbox.ts) per Standard Webhooks, and the reminders a delivering instance
// finds by itself (keys.expiring, quota.threshold). Used by a running `serve` (WebhookDeliverer.start) and by
// `partnerctl webhooks deliver` (runOnce).
import { createRequire } from 'node:module';
import type { Clock } from '../../clock.js';
import type { Database } from '../../db/client.js';
import { holdLeadership, type Leadership } from '../../db/leadership.js';
import {
  claimDelivery,
  dueDeliveries,
  insertReminder,
  pairsExpiringBetween,
  quotaUse,
  recordAttempt,
  remindersSent,
  type AttemptOutcome,
  type DueDelivery,
} from '../../db/repositories/webhooks.js';
import type { SqlTx } from '../../db/unit.js';
import { keyPairState } from '../rules/key-pair-state.js';
import { writeOutbox, type NewWebhookEvent } from '../operations/outbox.js';
import { formatDuration } from '../rules/validation.js';


const require = createRequire(import.meta.url);
type WebhookClass = new (secret: string) => { sign(msgId: string, timestamp: Date, payload: string): string };

/** Each attempt waits this long for an answer (the status line and the body) before it counts as failed. */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** A claimed delivery is due again this long after its claim if its sender never records an outcome (killed). */
const CLAIM_MS = WEBHOOK_TIMEOUT_MS + 5_000;
const DAY_MS = 86_400_000;
/** keys.expiring: these many days before a live pair's expires_at, the nearest only when several are due. */
export const EXPIRY_REMINDER_DAYS = [30, 7, 1] as const;
/** quota.threshold: these percentages of the daily quota, once each per UTC day. */
export const QUOTA_LEVELS = [80, 100] as const;

export interface DeliveryLog {
  info(details: Record<string, unknown>, message: string): void;
  warn(details: Record<string, unknown>, message: string): void;
  error(details: Record<string, unknown>, message: string): void;
}

export interface AttemptResult {
  /** The HTTP status, or null when no answer came (refused, timed out, reset). */
  status: number | null;
  /** Why it failed without an answer, or the first line of the body of a non-2xx answer. */
  error: string | null;
  /** The answer's first 512 characters (for `webhooks test`). */
  body: string;
  ms: number;
}

/**
 * One signed POST: headers webhook-id, webhook-timestamp (the clock's now) and webhook-signature (v1,
 * HMAC-SHA256 over id.timestamp.body by the standardwebhooks package), the body exactly as stored. Never
 * follows a redirect.
 */
export async function sendWebhook(
  target: { url: string; secret: string },
  message: { id: string; body: string },
  clock: Clock,
  timeoutMs = WEBHOOK_TIMEOUT_MS,
  cancel?: AbortSignal,
): Promise<AttemptResult> {
  const { Webhook } = require('standardwebhooks') as { Webhook: WebhookClass };
  const started = performance.now();
  const now = new Date(clock.now());
  let signature: string;
  try {
    signature = new Webhook(target.secret).sign(message.id, now, message.body);
  } catch (error) {
    return { status: null, error: `cannot sign: ${(error as Error).message}`, body: '', ms: 0 };
  }
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = cancel ? AbortSignal.any([timeout, cancel]) : timeout;
  try {
    const response = await fetch(target.url, {
      method: 'POST',
      redirect: 'manual',
      signal,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'partnerctl-webhooks',
        'webhook-id': message.id,
        'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
        'webhook-signature': signature,
      },
      body: message.body,
    });
    const text = await firstChars(response, 512);
    const ok = response.status >= 200 && response.status < 300;
    return { status: response.status, error: ok ? null : `HTTP ${response.status}`, body: text, ms: performance.now() - started };
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const reason = timeout.aborted ? `no answer within ${timeoutMs / 1000} s` : cancel?.aborted ? 'cancelled at shutdown' : (cause?.code ?? cause?.message ?? (error as Error).message);
    return { status: null, error: String(reason).slice(0, 200), body: '', ms: performance.now() - started };
  }
}

/** The start of an answer's body: reading stops there (a receiver's answer may be anything, of any size). */
async function firstChars(response: Response, limit: number): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    while (text.length < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return text.slice(0, limit);
}

export interface DelivererOptions {
  /** Delays before each retry (PARTNERCTL_WEBHOOK_RETRY_DELAYS); after the last, the delivery is given up. */
  retryDelaysMs: readonly number[];
  log?: DeliveryLog | undefined;
  /** How often due deliveries are looked for (default 500 ms: a new event goes out within a second). */
  pollMs?: number;
  /** How often reminders are looked for (default 30 s). */
  reminderMs?: number;
  /** Sends under way at most (default 50): a dead receiver holds one slot per delivery for the timeout at most. */
  maxInFlight?: number;
  /**
   * SQLite: how long a write may wait for another process's lock (0 for the server: its event loop must
   * never sleep; the CLI may wait).
   */
  lockWaitMs?: number;
  timeoutMs?: number;
  /** The serve instance delivering (its id names the lease's holder in `instances`). */
  instanceId?: string;
}

export interface RunSummary {
  delivered: number;
  retrying: number;
  failed: number;
  reminders: number;
}

/**
 * Sends what is due, each delivery on its own (a slow or dead receiver holds only its own), records each
 * outcome, and schedules retries with the configured delays. Claims make it safe to run several at once
 * (on PostgreSQL the server runs one at a time under a lease anyway, its claims fenced by it): at least once,
 * never lost.
 */
export class WebhookDeliverer {
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Outcomes not yet written (the database was busy): retried on the next tick and at stop. */
  private readonly unwritten = new Map<string, { eventId: string; endpointId: string; outcome: AttemptOutcome }>();
  private timer: NodeJS.Timeout | undefined;
  private lastReminderScan = 0;
  private started = false;
  private stopped = false;
  private ticking: Promise<void> | undefined;
  private readonly controller = new AbortController();
  private leadership: Leadership | null = null;
  private failures = 0;
  readonly summary: RunSummary = { delivered: 0, retrying: 0, failed: 0, reminders: 0 };

  constructor(
    private readonly db: Database,
    private readonly options: DelivererOptions,
  ) {}

  /** Runs in the background until stop(); on PostgreSQL only while this instance holds the delivery lease. Once: a second call, or one after stop(), does nothing. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    if (this.db.dialect.hasLeases) {
      const log = this.options.log;
      this.leadership = holdLeadership(this.db.sql, 'webhook_delivery', {
        ...(this.options.instanceId ? { holder: this.options.instanceId } : {}),
        onTaken: () => log?.info({}, 'webhook delivery: this instance delivers (lease taken)'),
        onLost: () =>
          log?.warn({}, 'webhook delivery: lease lost (not renewed in time: this instance was paused or the database unreachable); another instance may deliver'),
      });
    }
    this.schedule(0);
  }

  /** Whether this instance may deliver now: always on SQLite, while it holds the lease on PostgreSQL. */
  get delivering(): boolean {
    return this.leadership === null || this.leadership.held;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.ticking = this.tick().finally(() => {
        this.ticking = undefined;
        this.schedule(this.options.pollMs ?? 500);
      });
    }, delayMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (!this.delivering) return;
    try {
      await this.writeOutcomes();
      const now = this.db.clock.now();
      if (now - this.lastReminderScan >= (this.options.reminderMs ?? 30_000)) {
        this.lastReminderScan = now;
        await this.findReminders(new Date(now));
      }
      await this.sendDue();
    } catch (error) {
      this.databaseFailed(error);
    }
  }

  /** One pass (`webhooks deliver`): reminders, then every due delivery, waiting for all their outcomes. */
  async runOnce(): Promise<RunSummary> {
    await this.findReminders(new Date(this.db.clock.now()));
    for (let round = 0; round < 10_000; round++) {
      const claimed = await this.sendDue();
      await Promise.all(this.inFlight.values());
      await this.writeOutcomes();
      if (claimed === 0) break;
    }
    return this.summary;
  }

  /** Claims due deliveries (as many as slots are free) and sends each on its own. */
  private async sendDue(): Promise<number> {
    const free = (this.options.maxInFlight ?? 50) - this.inFlight.size;
    if (free <= 0 || this.stopped) return 0;
    const now = this.db.clock.now();
    const due = (await dueDeliveries(this.db.sql, new Date(now), free + this.inFlight.size)).filter((row) => !this.inFlight.has(keyOf(row)));
    if (due.length === 0) return 0;
    const claimed: DueDelivery[] = [];
    await this.write(async (tx) => {
      claimed.length = 0;
      for (const row of due.slice(0, free)) {
        if (await claimDelivery(tx, row, new Date(now + CLAIM_MS), this.leadership?.fence)) claimed.push(row);
      }
    });
    for (const row of claimed) {
      const key = keyOf(row);
      const attempt = this.attempt(row).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, attempt);
    }
    return claimed.length;
  }

  private async attempt(row: DueDelivery): Promise<void> {
    // Paused between its claim and now, past its lease: another instance may be the leader, so this one sends
    // nothing more (the claim makes the delivery due again after its lease).
    if (!this.delivering) return;
    const result = await sendWebhook(
      { url: row.url, secret: row.secret },
      { id: row.eventId, body: row.data },
      this.db.clock,
      this.options.timeoutMs,
      this.controller.signal,
    );
    // Cut off by shutdown: not an attempt; the claim's lease makes it due again.
    if (result.status === null && this.controller.signal.aborted) return;
    const attempts = row.attempts + 1;
    const at = new Date(this.db.clock.now());
    const ok = result.status !== null && result.status >= 200 && result.status < 300;
    const delays = this.options.retryDelaysMs;
    let outcome: AttemptOutcome;
    if (ok) {
      outcome = { status: 'delivered', attempts, at, nextAttemptAt: null, httpStatus: result.status, error: null };
      this.summary.delivered++;
    } else if (attempts <= delays.length) {
      outcome = { status: 'pending', attempts, at, nextAttemptAt: new Date(at.getTime() + delays[attempts - 1]!), httpStatus: result.status, error: result.error };
      this.summary.retrying++;
    } else {
      outcome = { status: 'failed', attempts, at, nextAttemptAt: null, httpStatus: result.status, error: result.error };
      this.summary.failed++;
      const total = delays.reduce((sum, delay) => sum + delay, 0);
      this.options.log?.error(
        { webhook_id: row.endpointId, event_id: row.eventId, type: row.type, attempts, last_status: result.status, last_error: result.error },
        `WEBHOOK DELIVERY GAVE UP: event ${row.eventId} (${row.type}) to ${row.endpointId} failed ${attempts} attempts over ${formatDuration(total)}`,
      );
    }
    this.unwritten.set(keyOf(row), { eventId: row.eventId, endpointId: row.endpointId, outcome });
    await this.writeOutcomes();
  }

  private async writeOutcomes(): Promise<void> {
    if (this.unwritten.size === 0) return;
    const batch = [...this.unwritten];
    const written = await this.write(async (tx) => {
      for (const [, { eventId, endpointId, outcome }] of batch) await recordAttempt(tx, eventId, endpointId, outcome);
    });
    if (written) for (const [key, value] of batch) if (this.unwritten.get(key) === value) this.unwritten.delete(key);
  }

  /** A short transaction; on SQLite it never waits for another process's lock in the server. False when busy. */
  private async write(work: (tx: SqlTx) => Promise<void>): Promise<boolean> {
    try {
      await this.db.sql.transaction(work, { timeoutMs: 5_000, ...(this.options.lockWaitMs !== undefined ? { lockWaitMs: this.options.lockWaitMs } : {}) });
      this.failures = 0;
      return true;
    } catch (error) {
      this.databaseFailed(error);
      return false;
    }
  }

  /** One log line for the first failure in a row and every 20th after it (the poll runs twice a second). */
  private databaseFailed(error: unknown): void {
    this.failures++;
    if (this.failures === 1 || this.failures % 20 === 0) {
      this.options.log?.warn(
        { err: { message: String((error as Error)?.message ?? error).split('\n', 1)[0]!.slice(0, 200) }, failures: this.failures },
        'webhook delivery: the database is busy or unavailable; trying again',
      );
    }
  }

  /**
   * keys.expiring (30, 7 and 1 days before a live pair's expiry, the nearest only when several are due) and
   * quota.threshold (80 % and 100 % of the daily quota, per UTC day): each recorded once in webhook_reminders,
   * with its event, in one transaction.
   */
  async findReminders(now: Date): Promise<number> {
    const found: { keys: string[]; event: NewWebhookEvent }[] = [];
    const horizon = new Date(now.getTime() + EXPIRY_REMINDER_DAYS[0] * DAY_MS);
    for (const pair of await pairsExpiringBetween(this.db.sql, now, horizon)) {
      // A pair whose overlap has ended (not settled yet) is no longer live: no reminder.
      const state = keyPairState(pair, now.getTime());
      if (state !== 'active' && state !== 'retiring') continue;
      const left = pair.expiresAt.getTime() - now.getTime();
      const due = EXPIRY_REMINDER_DAYS.filter((days) => left <= days * DAY_MS);
      if (due.length === 0) continue;
      const nearest = Math.min(...due);
      // The nearest one first: once it is recorded the others due with it are recorded too, and never sent.
      const keys = [nearest, ...due.filter((days) => days !== nearest)].map((days) => `keys.expiring:${pair.id}:${days}d`);
      found.push({
        keys,
        event: {
          type: 'keys.expiring',
          partnerId: pair.partnerId,
          data: { key_pair_id: pair.id, expires_at: pair.expiresAt.toISOString(), days_before: nearest },
        },
      });
    }
    const day = now.toISOString().slice(0, 10);
    const dayStart = new Date(`${day}T00:00:00.000Z`);
    for (const use of await quotaUse(this.db.sql, dayStart)) {
      for (const level of QUOTA_LEVELS) {
        if (use.used * 100 < use.quota * level) continue;
        found.push({
          keys: [`quota.threshold:${use.partnerId}:${day}:${level}`],
          event: { type: 'quota.threshold', partnerId: use.partnerId, data: { percent: level, daily_quota: use.quota, used: use.used, day } },
        });
      }
    }
    if (found.length === 0) return 0;
    const sent = await remindersSent(this.db.sql, found.map((item) => item.keys[0]!));
    const fresh = found.filter((item) => !sent.has(item.keys[0]!));
    if (fresh.length === 0) return 0;
    let written = 0;
    const ok = await this.write(async (tx) => {
      written = 0;
      for (const item of fresh) {
        if (!(await insertReminder(tx, item.keys[0]!, now))) continue;
        for (const other of item.keys.slice(1)) await insertReminder(tx, other, now);
        await writeOutbox(tx, [item.event], now);
        written++;
      }
    });
    if (ok) this.summary.reminders += written;
    return ok ? written : 0;
  }

  /**
   * Stops looking for work, gives sends under way up to `graceMs` to finish (then aborts them: their claims
   * make them due again after the lease), and writes the outcomes, retrying for up to `limitMs`; what is
   * still unwritten then is logged loudly (those deliveries are sent again: duplicates, never a loss).
   */
  async stop(graceMs = 2_000, limitMs = 5_000): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    if (this.inFlight.size > 0) {
      await Promise.race([Promise.all(this.inFlight.values()), new Promise((resolve) => setTimeout(resolve, graceMs).unref())]);
    }
    this.controller.abort();
    // A bound on the shutdown itself, in elapsed time whatever the clock says.
    const deadline = performance.now() + limitMs;
    let delay = 50;
    while (this.unwritten.size > 0 && performance.now() < deadline) {
      await this.writeOutcomes();
      if (this.unwritten.size === 0) break;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(1_000, delay * 2);
    }
    if (this.unwritten.size > 0) {
      this.options.log?.error(
        { unwritten: this.unwritten.size },
        `webhook delivery outcomes NOT written at shutdown: ${this.unwritten.size} deliveries will be sent again after their lease (receivers dedupe on webhook-id)`,
      );
    }
    await this.leadership?.stop();
  }
}

function keyOf(row: { eventId: string; endpointId: string }): string {
  return `${row.eventId}/${row.endpointId}`;
}
