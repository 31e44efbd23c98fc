// The token endpoint's throttles (@fastify/rate-limit) on the same Redis as the data limits, with the same
// fallback to this instance's memory while Redis does not answer.
import { createRequire } from 'node:module';
import type { FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { SharedRedis } from './redis.js';

const require = createRequire(import.meta.url);
type StoreCallback = (error: Error | null, result?: { current: number; ttl: number }) => void;
interface Store {
  incr(key: string, callback: StoreCallback, timeWindow: number, max: number): void;
  child(routeOptions: Record<string, unknown>): Store;
}
type StoreClass = new (...args: unknown[]) => Store;
const LocalStore = require('@fastify/rate-limit/store/LocalStore.js') as StoreClass;
const RedisStore = require('@fastify/rate-limit/store/RedisStore.js') as StoreClass;

/**
 * A store class for @fastify/rate-limit's `store` option: its own Redis store while Redis answers, its own
 * in-memory store (this instance's counts only) when it does not.
 */
export function failoverStore(redis: SharedRedis, prefix = 'partnerctl:token:'): FastifyRateLimitStoreCtor {
  class Failover implements Store {
    constructor(
      private readonly shared: Store,
      private readonly local: Store,
    ) {}

    incr(key: string, callback: StoreCallback, timeWindow: number, max: number): void {
      if (!redis.available) {
        this.local.incr(key, callback, timeWindow, max);
        return;
      }
      this.shared.incr(
        key,
        (error, result) => {
          if (error) {
            redis.failed(error);
            this.local.incr(key, callback, timeWindow, max);
          } else {
            callback(null, result);
          }
        },
        timeWindow,
        max,
      );
    }

    child(routeOptions: Record<string, unknown>): Store {
      // Every child gets the same Redis prefix; the token endpoint's keys carry their own (ip:, key:).
      return new Failover(
        new RedisStore(routeOptions.continueExceeding, routeOptions.exponentialBackoff, redis.client, prefix),
        this.local.child(routeOptions),
      );
    }
  }
  const Root = class extends Failover {
    constructor(options: unknown) {
      const params = options as Record<string, unknown>;
      super(
        new RedisStore(params.continueExceeding, params.exponentialBackoff, redis.client, prefix),
        new LocalStore(params.continueExceeding, params.exponentialBackoff),
      );
    }
  };
  return Root as unknown as FastifyRateLimitStoreCtor;
}
