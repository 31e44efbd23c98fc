import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { currentRevision } from '../db/repositories/revision.js';
import type { Database } from '../db/client.js';
import type { AccessState } from '../domain/access.js';
import type { TokenVerifier } from '../domain/tokens.js';
import type { UsageCounter } from '../domain/usage.js';
import { BASE_PATH } from './config.js';
import type { DataLimits } from './limits.js';
import type { SharedRedis } from './redis.js';

const ROUTE_CLASSES = ['token', 'data', 'other'] as const;
const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
const TOKEN_OUTCOMES = ['issued', 'refused', 'rate_limited'] as const;
const TOKEN_ROUTE = `${BASE_PATH}/auth/token`;
const DATA_ROUTES = new Set([BASE_PATH, `${BASE_PATH}/*`]);
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const DATABASE_PROBE_TIMEOUT_MS = 1_000;
const MAX_PARTNER_SERIES = 10_000;

type Inc = { inc(value?: number): void };
type Observe = { observe(value: number): void };

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
 * Every label combination a request can hit is resolved once here, so a request costs one counter increment
 * and one histogram observation (two for data requests: the engine's time too).
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Inc[][];
  private readonly latency: Observe[];
  private readonly engine: Observe;
  private readonly tokens: Inc[];
  private readonly partnerRequests: Counter<'partner_id' | 'status_class'> | null;
  private readonly partnerChildren = new Map<string, Inc[]>();

  constructor(sources: MetricsSources, options: { perPartner: boolean; defaults?: boolean }) {
    const registers = [this.registry];
    const requests = new Counter({
      name: 'partnerctl_http_requests_total',
      help: 'Requests answered by the public API, by route class (token, data, other) and status class',
      labelNames: ['route_class', 'status_class'] as const,
      registers,
    });
    this.requests = ROUTE_CLASSES.map((route) => STATUS_CLASSES.map((status) => requests.labels(route, status)));
    const latency = new Histogram({
      name: 'partnerctl_http_request_duration_seconds',
      help: 'Time from the request received to the answer sent, by route class (the gateway total)',
      labelNames: ['route_class'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.latency = ROUTE_CLASSES.map((route) => latency.labels(route));
    this.engine = new Histogram({
      name: 'partnerctl_engine_duration_seconds',
      help: "Time the recommendation engine took to answer a forwarded data request",
      buckets: LATENCY_BUCKETS,
      registers,
    });
    const tokens = new Counter({
      name: 'partnerctl_token_exchanges_total',
      help: 'Token exchanges by outcome: issued, refused (bad, revoked or expired credentials, bad requests), rate_limited',
      labelNames: ['outcome'] as const,
      registers,
    });
    this.tokens = TOKEN_OUTCOMES.map((outcome) => tokens.labels(outcome));
    // Every outcome shows from the start, at 0.
    for (const child of this.tokens) child.inc(0);
    this.partnerRequests = options.perPartner
      ? new Counter({
          name: 'partnerctl_partner_requests_total',
          help: 'Data requests by partner and status class (PUBLIC_API_METRICS_PER_PARTNER=1)',
          labelNames: ['partner_id', 'status_class'] as const,
          registers,
        })
      : null;

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
        this.set(access.confirmedAtMs === 0 ? -1 : (Date.now() - access.confirmedAtMs) / 1000);
      },
    });
    new Gauge({
      name: 'partnerctl_database_up',
      help: 'Whether the database answered a probe at this scrape (1) or not (0)',
      registers,
      async collect() {
        this.set((await probeDatabase(db)) ? 1 : 0);
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
  response(request: FastifyRequest, reply: FastifyReply): void {
    const url = request.routeOptions.url;
    const status = reply.statusCode;
    const statusClass = statusIndex(status);
    const route = url === TOKEN_ROUTE ? 0 : url !== undefined && DATA_ROUTES.has(url) ? 1 : 2;
    this.requests[route]![statusClass]!.inc();
    this.latency[route]!.observe(reply.elapsedTime / 1000);
    if (route === 0 && request.method === 'POST' && status < 500) {
      this.tokens[status === 200 ? 0 : status === 429 ? 2 : 1]!.inc();
    } else if (route === 1 && this.partnerRequests !== null && request.claims !== null) {
      this.partner(request.claims.partnerId)[statusClass]!.inc();
    }
  }

  /** The engine answered after `ms`. */
  engineAnswered(ms: number): void {
    this.engine.observe(ms / 1000);
  }

  private partner(partnerId: string): Inc[] {
    let children = this.partnerChildren.get(partnerId);
    if (children === undefined) {
      if (this.partnerChildren.size >= MAX_PARTNER_SERIES) this.partnerChildren.clear();
      const counter = this.partnerRequests!;
      children = STATUS_CLASSES.map((status) => counter.labels(partnerId, status));
      this.partnerChildren.set(partnerId, children);
    }
    return children;
  }
}

async function probeDatabase(db: Database): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      (async () => {
        await db.sql.verify();
        return (await currentRevision(db.sql)) !== null;
      })(),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), DATABASE_PROBE_TIMEOUT_MS);
      }),
    ]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Called when a request's answer is finished (onResponse): the metrics and the usage counts. Usage counts
 * only data requests of an authenticated partner (its token verified), whatever their answer.
 */
export function responseObserver(metrics: Metrics | null, usage: UsageCounter | null): ((request: FastifyRequest, reply: FastifyReply) => void) | undefined {
  if (!metrics && !usage) return undefined;
  return (request, reply) => {
    metrics?.response(request, reply);
    if (usage !== null && request.claims !== null) {
      usage.record(request.claims.partnerId, request.companyId ?? '', reply.statusCode, request.engineMs);
    }
  };
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
