import type { Clock } from '../../clock.js';
import type { Database } from '../../db/client.js';
import type { AccessState } from '../../domain/runtime/access.js';
import { effectiveLimits, partnerLimits, type EffectiveLimits, type LimitDefaults } from '../../domain/operations/limits.js';
import { SnapshotCache } from '../../domain/rules/snapshot-cache.js';
import { AppError } from '../../errors.js';
import type { SharedRedis } from './redis.js';

const DAY_MS = 86_400_000;
const MAX_TRACKED = 200_000;

/** One request's verdict and what the RateLimit-* headers say. */
export interface Decision {
  allowed: boolean;
  /** Which limit refused it. */
  reason?: 'rate' | 'quota';
  /** RateLimit-Limit: the bucket size (burst), or the daily quota when that is the tighter one. */
  limit: number;
  remaining: number;
  /** RateLimit-Reset: seconds until the limit reported is whole again. */
  resetSeconds: number;
  /** For a refusal: seconds until a request would be accepted. */
  retryAfterSeconds: number;
}

/**
 * The generic cell rate algorithm (a token bucket kept as one timestamp, the "theoretical arrival time"):
 * `count` requests per period on average, up to `burst` at once after a quiet spell. With a daily quota on
 * top, counted from 00:00 UTC. Both forms below (memory and Redis) follow the same steps: the rate is
 * checked first, then the quota, and a refused request consumes neither. The kept timestamp never runs
 * further ahead than the current policy's tolerance (under one policy it cannot; after set-limits it
 * could, and the old limit would outlive its change): after a change the bucket is at most empty under the
 new limit and refills at its rate, so a new limit takes effect at once, in both directions.
 */
export interface Policy {
  /** Milliseconds between requests at the steady rate; 0 when only a quota applies. */
  intervalMs: number;
  /** burst x intervalMs. */
  toleranceMs: number;
  burst: number;
  dailyQuota: number;
}

export function policyOf(limits: EffectiveLimits): Policy {
  const intervalMs = limits.rate ? (limits.rate.periodSeconds * 1000) / limits.rate.count : 0;
  return { intervalMs, toleranceMs: intervalMs * limits.burst, burst: limits.burst, dailyQuota: limits.dailyQuota ?? 0 };
}

/** Builds the verdict from the raw state after (or instead of) taking one request. */
function decide(policy: Policy, now: number, allowed: boolean, reason: 'rate' | 'quota' | undefined, tat: number, used: number, waitMs: number): Decision {
  const ahead = Math.max(0, tat - now);
  let limit = policy.burst;
  let remaining = policy.intervalMs > 0 ? Math.max(0, Math.floor((policy.toleranceMs - ahead) / policy.intervalMs + 1e-9)) : Infinity;
  let resetSeconds = Math.ceil(ahead / 1000);
  if (policy.dailyQuota > 0) {
    const left = Math.max(0, policy.dailyQuota - used);
    if (left < remaining || policy.intervalMs === 0) {
      limit = policy.dailyQuota;
      remaining = left;
      resetSeconds = Math.ceil((DAY_MS - (now % DAY_MS)) / 1000);
    }
  }
  return {
    allowed,
    ...(reason ? { reason } : {}),
    limit,
    remaining: Number.isFinite(remaining) ? remaining : limit,
    resetSeconds,
    retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
  };
}

interface Cell {
  tat: number;
  day: number;
  used: number;
}

/** Counters of this instance alone: the only ones without Redis, the fallback when Redis is unavailable. */
export class MemoryLimiter {
  private readonly cells = new Map<string, Cell>();

  constructor(private readonly clock: Clock) {}

  take(key: string, policy: Policy): Decision {
    const now = this.clock.now();
    const day = Math.floor(now / DAY_MS);
    let cell = this.cells.get(key);
    if (!cell) {
      if (this.cells.size >= MAX_TRACKED) this.sweep(now);
      cell = { tat: now, day, used: 0 };
      this.cells.set(key, cell);
    }
    if (cell.day !== day) {
      cell.day = day;
      cell.used = 0;
    }
    if (cell.tat > now + policy.toleranceMs) cell.tat = now + policy.toleranceMs;
    const tat = Math.max(cell.tat, now);
    if (policy.intervalMs > 0 && tat + policy.intervalMs - now > policy.toleranceMs) {
      return decide(policy, now, false, 'rate', tat, cell.used, tat + policy.intervalMs - policy.toleranceMs - now);
    }
    if (policy.dailyQuota > 0 && cell.used >= policy.dailyQuota) {
      return decide(policy, now, false, 'quota', tat, cell.used, DAY_MS - (now % DAY_MS));
    }
    cell.used++;
    cell.tat = policy.intervalMs > 0 ? tat + policy.intervalMs : now;
    return decide(policy, now, true, undefined, cell.tat, cell.used, 0);
  }

  /** Drops cells that remember nothing any more (bucket full again, no quota used today). */
  private sweep(now: number): void {
    const day = Math.floor(now / DAY_MS);
    for (const [key, cell] of this.cells) {
      if (cell.tat <= now && (cell.used === 0 || cell.day !== day)) this.cells.delete(key);
    }
    if (this.cells.size >= MAX_TRACKED) this.cells.clear();
  }
}

// The same steps as MemoryLimiter.take, atomically in Redis, on Redis's clock (instances' clocks may
// differ). KEYS[1] the bucket, KEYS[2] the quota counter's prefix (the UTC day is appended).
// Returns {allowed, reason (0 rate, 1 quota, -1 none), tat - now, used, wait ms, now}.
const TAKE_LUA = `
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local quota = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tat = now
if interval > 0 then
  tat = tonumber(redis.call('GET', KEYS[1]) or '0')
  if tat < now then tat = now end
  if tat > now + tolerance then
    tat = now + tolerance
    redis.call('SET', KEYS[1], string.format('%.3f', tat), 'PX', math.ceil(tolerance) + 1000)
  end
  if tat + interval - now > tolerance then
    return {0, 0, math.ceil(tat - now), 0, math.ceil(tat + interval - tolerance - now), now}
  end
end
local used = 0
if quota > 0 then
  local qkey = KEYS[2] .. ':' .. math.floor(now / 86400000)
  used = tonumber(redis.call('GET', qkey) or '0')
  if used >= quota then
    return {0, 1, math.ceil(tat - now), used, 86400000 - (now % 86400000), now}
  end
  used = redis.call('INCR', qkey)
  if used == 1 then redis.call('PEXPIRE', qkey, 90000000) end
end
if interval > 0 then
  tat = tat + interval
  redis.call('SET', KEYS[1], string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1000)
end
return {1, -1, math.ceil(tat - now), used, 0, now}
`;

type TakeReply = [number, number, number, number, number, number];

interface TakeCommand {
  partnerctlTake(bucket: string, quota: string, interval: number, tolerance: number, dailyQuota: number): Promise<TakeReply>;
}

/** Counters shared by every instance through Redis: one atomic script per request. */
export class RedisLimiter {
  private readonly client: TakeCommand;

  constructor(
    redis: SharedRedis,
    private readonly prefix = 'partnerctl:limit:',
  ) {
    redis.client.defineCommand('partnerctlTake', { numberOfKeys: 2, lua: TAKE_LUA });
    this.client = redis.client as unknown as TakeCommand;
  }

  async take(key: string, policy: Policy): Promise<Decision> {
    const [allowed, reason, ahead, used, wait, now] = await this.client.partnerctlTake(
      `${this.prefix}${key}`,
      `${this.prefix}quota:${key}`,
      policy.intervalMs,
      policy.toleranceMs,
      policy.dailyQuota,
    );
    return decide(policy, now, allowed === 1, reason === 0 ? 'rate' : reason === 1 ? 'quota' : undefined, now + ahead, used, wait);
  }
}

/**
 * The per-partner limits of data requests: the partner's effective limits (own values over the server's
 * defaults) cached under the access state's revision, so a set-limits reaches every instance within the
 * staleness bound; counters in Redis when configured and reachable, in memory otherwise.
 */
export class DataLimits {
  /** The partners' policies under the revision last seen (null: no limit applies). */
  private readonly policies = new SnapshotCache<string, Policy | null>(MAX_TRACKED);
  private revision: number | null = null;
  private readonly memory: MemoryLimiter;
  private readonly shared: RedisLimiter | null;
  /** Refusals, for the metrics. */
  refused = 0;

  constructor(
    private readonly db: Database,
    private readonly access: AccessState,
    private readonly defaults: LimitDefaults,
    clock: Clock,
    private readonly redis: SharedRedis | null,
  ) {
    this.memory = new MemoryLimiter(clock);
    this.shared = redis ? new RedisLimiter(redis) : null;
  }

  /**
   * One request of the partner taken from its allowance, after the gate's authenticate (the revision is
   * fresh): the RateLimit-* headers into `headers`; for a refusal Retry-After, and the 429. Undefined: allowed
   * at once (the policy known, the counters in memory); otherwise a promise, rejected with the 429.
   */
  take(partnerId: string, headers: Record<string, string>): Promise<void> | undefined {
    const revision = this.access.revisionSeen;
    if (revision !== this.revision) {
      this.policies.clear();
      this.revision = revision;
    }
    const policy = this.policies.get(partnerId, () => this.policyOf(partnerId));
    if (policy instanceof Promise) return policy.then((known) => this.takeUnder(partnerId, known, headers));
    return this.takeUnder(partnerId, policy, headers);
  }

  /** The partner's policy, read as the gate's own reads are (bounded, none while the held state decides). */
  private async policyOf(partnerId: string): Promise<Policy | null> {
    const limits = effectiveLimits(await this.access.read(() => partnerLimits(this.db, partnerId)), this.defaults);
    return limits ? policyOf(limits) : null;
  }

  private takeUnder(partnerId: string, policy: Policy | null, headers: Record<string, string>): Promise<void> | undefined {
    if (policy === null) return undefined;
    const decided = this.counted(partnerId, policy);
    if (decided instanceof Promise) return decided.then((decision) => this.settle(decision, policy, headers));
    try {
      this.settle(decided, policy, headers);
      return undefined;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Takes one request from the partner's allowance under `policy`, nothing else: in Redis while it is
   * configured and answers (a promise), else in this instance's memory (at once, no promise).
   */
  private counted(partnerId: string, policy: Policy): Decision | Promise<Decision> {
    if (this.shared && this.redis!.available) {
      return this.shared.take(partnerId, policy).catch((error: unknown) => {
        this.redis!.failed(error);
        return this.memory.take(partnerId, policy);
      });
    }
    return this.memory.take(partnerId, policy);
  }

  /** A decision's answer: the RateLimit-* headers into `headers`, and for a refusal Retry-After and the 429 (thrown). */
  private settle(decision: Decision, policy: Policy, headers: Record<string, string>): void {
    headers['ratelimit-limit'] = String(decision.limit);
    headers['ratelimit-remaining'] = String(decision.remaining);
    headers['ratelimit-reset'] = String(decision.resetSeconds);
    if (!decision.allowed) {
      this.refused++;
      headers['retry-after'] = String(decision.retryAfterSeconds);
      throw new AppError(
        'rate_limited',
        decision.reason === 'quota'
          ? `the daily quota of ${policy.dailyQuota} requests is used up; it resets at 00:00 UTC`
          : `too many requests; retry after ${decision.retryAfterSeconds} s`,
        { reason: decision.reason === 'quota' ? 'quota_exceeded' : 'rate_limited' },
      );
    }
  }
}
