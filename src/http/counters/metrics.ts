import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { Database } from '../../db/client.js';
import { databaseFailure } from '../../domain/runtime/health.js';
import type { AccessState } from '../../domain/runtime/access.js';
import type { TokenVerifier } from '../../domain/operations/tokens.js';
import type { UsageCounter } from '../../domain/runtime/usage.js';
import type { FinishedRequest } from '../protocol/finished-request.js';
import { BASE_PATH, OPENAPI_PATH, TOKEN_PATH } from '../protocol/paths.js';
import type { DataLimits } from './limits.js';
import type { SharedRedis } from './redis.js';

const ROUTE_CLASSES = ['token', 'data', 'other'] as const;
const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
const TOKEN_OUTCOMES = ['issued', 'refused', 'rate_limited'] as const;

/** `url` (with its query) is exactly `path`. */
const isPath = (url: string, path: string): boolean => url.startsWith(path) && (url.length === path.length || url.charCodeAt(path.length) === 63); // '?'

/**
 * 0 token, 1 data, 2 other, from the request's URL as the router saw it (request.routeOptions builds a whole
 * object on each read): under the base path, anything but the token and document routes is a data request.
 */
function routeClassOf(url: string): number {
  if (!url.startsWith(BASE_PATH)) return 2;
  if (isPath(url, TOKEN_PATH)) return 0;
  if (isPath(url, OPENAPI_PATH)) return 2;
  const next = url.charCodeAt(BASE_PATH.length);
  return url.length === BASE_PATH.length || next === 47 || next === 63 ? 1 : 2; // '/', '?'
}
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const DATABASE_PROBE_TIMEOUT_MS = 1_000;
const MAX_PARTNER_SERIES = 10_000;

/** One series' value as the registry formats it. */
interface Sample {
  metricName?: string;
  labels?: Record<string, string | number>;
  value: number;
}

/**
 * A metric the registry reads only when scraped, from plain numbers the request path adds to: prom-client's
 * own counters and histograms hash their labels on every increment, which a request should not pay for.
 */
function rawMetric(registry: Registry, name: string, help: string, type: 'counter' | 'histogram', samples: () => Sample[]): void {
  const metric = {
    name,
    help,
    type,
    aggregator: 'sum',
    get: async () => ({ name, help, type, aggregator: 'sum', values: samples() }),
    reset: () => {},
  };
  registry.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
}

/** Bucket counts (not cumulative; the last one is +Inf), sum and count. */
class RawHistogram {
  readonly counts = new Float64Array(LATENCY_BUCKETS.length + 1);
  sum = 0;
  count = 0;

  observe(value: number): void {
    let i = 0;
    while (i < LATENCY_BUCKETS.length && value > LATENCY_BUCKETS[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }

  samples(name: string, labels: Record<string, string>): Sample[] {
    const out: Sample[] = [];
    let cumulative = 0;
    for (let i = 0; i <= LATENCY_BUCKETS.length; i++) {
      cumulative += this.counts[i]!;
      out.push({ metricName: `${name}_bucket`, labels: { le: i < LATENCY_BUCKETS.length ? LATENCY_BUCKETS[i]! : '+Inf', ...labels }, value: cumulative });
    }
    out.push({ metricName: `${name}_sum`, labels, value: this.sum }, { metricName: `${name}_count`, labels, value: this.count });
    return out;
  }
}

/** What the gauges read when scraped: nothing on the request path. */
export interface MetricsSources {
  db: Database;
  access: AccessState;
  verifier: TokenVerifier;
  limits: DataLimits | null;
  redis: SharedRedis | null;
  usage: UsageCounter | null;
}

const statusIndex = (status: number): number => Math.min(4, Math.max(0, Math.floor(status / 100) - 1));

/**
 * The server's Prometheus metrics, in a registry of its own (several servers may share a process in tests).
 * A request adds to plain numbers (an array slot, a histogram's bucket) at indices known up front; the
 * registry turns them into series only when scraped.
 */
export class Metrics {
  readonly registry = new Registry();
  /** [route class x 5 + status class] */
  private readonly requests = new Float64Array(ROUTE_CLASSES.length * STATUS_CLASSES.length);
  private readonly latency = ROUTE_CLASSES.map(() => new RawHistogram());
  private readonly engine = new RawHistogram();
  private readonly tokens = new Float64Array(TOKEN_OUTCOMES.length);
  private readonly partners: Map<string, Float64Array> | null;

  constructor(sources: MetricsSources, options: { perPartner: boolean; defaults?: boolean }) {
    const registers = [this.registry];
    this.partners = options.perPartner ? new Map() : null;
    rawMetric(this.registry, 'partnerctl_http_requests_total', 'Requests answered by the public API, by route class (token, data, other) and status class', 'counter', () => {
      const out: Sample[] = [];
      ROUTE_CLASSES.forEach((route, r) => {
        STATUS_CLASSES.forEach((status, c) => {
          out.push({ labels: { route_class: route, status_class: status }, value: this.requests[r * STATUS_CLASSES.length + c]! });
        });
      });
      return out;
    });
    rawMetric(this.registry, 'partnerctl_http_request_duration_seconds', 'Time from the request received to the answer sent, by route class (the gateway total)', 'histogram', () =>
      ROUTE_CLASSES.flatMap((route, r) => this.latency[r]!.samples('partnerctl_http_request_duration_seconds', { route_class: route })),
    );
    rawMetric(this.registry, 'partnerctl_engine_duration_seconds', 'Time the recommendation engine took to answer a forwarded data request', 'histogram', () =>
      this.engine.samples('partnerctl_engine_duration_seconds', {}),
    );
    rawMetric(
      this.registry,
      'partnerctl_token_exchanges_total',
      'Token exchanges by outcome: issued, refused (bad, revoked or expired credentials, bad requests), rate_limited',
      'counter',
      () => TOKEN_OUTCOMES.map((outcome, i) => ({ labels: { outcome }, value: this.tokens[i]! })),
    );
    if (this.partners) {
      const partners = this.partners;
      rawMetric(this.registry, 'partnerctl_partner_requests_total', 'Data requests by partner and status class (PUBLIC_API_METRICS_PER_PARTNER=1)', 'counter', () => {
        const out: Sample[] = [];
        for (const [partnerId, counts] of partners) {
          STATUS_CLASSES.forEach((status, c) => {
            if (counts[c]! > 0) out.push({ labels: { partner_id: partnerId, status_class: status }, value: counts[c]! });
          });
        }
        return out;
      });
    }

    const { access, verifier, limits, redis, usage, db } = sources;
    new Counter({
      name: 'partnerctl_cache_hits_total',
      help: 'Answers from memory: cache="token" verified tokens, cache="access" partner, key-pair and mapping verdicts',
      labelNames: ['cache'] as const,
      registers,
      collect() {
        this.reset();
        this.labels('token').inc(verifier.cacheHits);
        this.labels('access').inc(access.cacheHits);
      },
    });
    new Counter({
      name: 'partnerctl_cache_misses_total',
      help: 'Cache misses: cache="token" signatures checked, cache="access" verdicts read from the database',
      labelNames: ['cache'] as const,
      registers,
      collect() {
        this.reset();
        this.labels('token').inc(verifier.cacheMisses);
        this.labels('access').inc(access.cacheMisses);
      },
    });
    new Gauge({
      name: 'partnerctl_revision_age_seconds',
      help: 'Seconds since the access revision was last confirmed from the database (normally under the 1 s staleness bound)',
      registers,
      collect() {
        this.set(access.confirmedAtMs === 0 ? -1 : access.stateAgeMs / 1000);
      },
    });
    new Gauge({
      name: 'partnerctl_state_age_seconds',
      help: 'Seconds since the state data requests are decided from was last confirmed from the database (within the staleness budget while it does not answer)',
      registers,
      collect() {
        this.set(access.confirmedAtMs === 0 ? -1 : access.stateAgeMs / 1000);
      },
    });
    new Gauge({
      name: 'partnerctl_serving_stale',
      help: 'Whether data requests are being decided from the last confirmed state because the database does not answer (1) or not (0)',
      registers,
      collect() {
        this.set(access.servingStale ? 1 : 0);
      },
    });
    new Counter({
      name: 'partnerctl_requests_unconfirmed_total',
      help: 'Data requests decided from the last confirmed state while the database did not answer (the staleness budget)',
      registers,
      collect() {
        this.reset();
        this.inc(access.servedUnconfirmed);
      },
    });
    new Gauge({
      name: 'partnerctl_applied_revision',
      help: 'The access revision this instance applied (its caches reflect it; -1 before the first): what receipts wait for',
      registers,
      collect() {
        this.set(access.appliedRevision ?? -1);
      },
    });
    new Gauge({
      name: 'partnerctl_database_up',
      help: 'Whether the database answered a probe at this scrape (1) or not (0)',
      registers,
      async collect() {
        this.set((await databaseFailure(db, DATABASE_PROBE_TIMEOUT_MS)) === undefined ? 1 : 0);
      },
    });
    new Gauge({
      name: 'partnerctl_redis_up',
      help: 'Whether the shared counters are in Redis (1) or, Redis being unavailable, per instance (0); -1 without REDIS_URL',
      registers,
      collect() {
        this.set(redis ? (redis.available ? 1 : 0) : -1);
      },
    });
    new Counter({
      name: 'partnerctl_redis_fallbacks_total',
      help: 'Times a limit was counted in memory because Redis failed or was unavailable',
      registers,
      collect() {
        this.reset();
        this.inc(redis?.fallbacks ?? 0);
      },
    });
    new Counter({
      name: 'partnerctl_data_rate_limited_total',
      help: 'Data requests refused with 429 by the per-partner limits',
      registers,
      collect() {
        this.reset();
        this.inc(limits?.refused ?? 0);
      },
    });
    new Gauge({
      name: 'partnerctl_usage_pending_cells',
      help: 'Usage counts (partner x company x hour) not yet written to the database',
      registers,
      collect() {
        this.set(usage?.pending ?? 0);
      },
    });
    new Counter({
      name: 'partnerctl_usage_dropped_total',
      help: 'Data requests not counted in usage because too many counts were waiting for the database',
      registers,
      collect() {
        this.reset();
        this.inc(usage?.dropped ?? 0);
      },
    });
    if (options.defaults !== false) collectDefaultMetrics({ register: this.registry });
  }

  /** One answered request (onResponse). */
  /** One finished answer, whoever served it (the data handler or Fastify). */
  response(answered: FinishedRequest): void {
    const status = answered.status;
    const statusClass = statusIndex(status);
    const route = routeClassOf(answered.url);
    this.requests[route * STATUS_CLASSES.length + statusClass]!++;
    this.latency[route]!.observe(answered.durationMs / 1000);
    if (answered.engineMs > 0) this.engine.observe(answered.engineMs / 1000);
    if (route === 0 && answered.method === 'POST' && status < 500) {
      this.tokens[status === 200 ? 0 : status === 429 ? 2 : 1]!++;
    } else if (route === 1 && this.partners !== null && answered.partnerId !== null) {
      let counts = this.partners.get(answered.partnerId);
      if (counts === undefined) {
        if (this.partners.size >= MAX_PARTNER_SERIES) this.partners.clear();
        counts = new Float64Array(STATUS_CLASSES.length);
        this.partners.set(answered.partnerId, counts);
      }
      counts[statusClass]!++;
    }
  }
}

/** The metrics listener: GET /metrics in the Prometheus text format on its own address, nothing else. */
export async function startMetricsListener(metrics: Metrics, host: string, port: number): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(path === '/metrics' ? 405 : 404, { 'content-type': 'text/plain; charset=utf-8' }).end(path === '/metrics' ? 'GET only\n' : 'not found\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => {
        response.writeHead(200, { 'content-type': metrics.registry.contentType });
        response.end(request.method === 'HEAD' ? undefined : text);
      },
      (error: Error) => {
        response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(`metrics failed: ${error.message}\n`);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shown}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
