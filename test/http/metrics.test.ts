import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serveInProcess, type ServedInProcess as Served } from '../support/serve.js';
import { bearer, startUpstream, type TestUpstream } from './support.js';

/** The metrics URL from the startup line that follows the listening one. */
async function metricsUrlOf(server: Served): Promise<string> {
  const started = Date.now();
  while (Date.now() - started < 5_000) {
    const match = /partnerctl serve: metrics on (http:\/\/\S+)\n/.exec(server.stderr());
    if (match) return match[1]!;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`no metrics line: ${server.stderr()}`);
}

/** The value of one series line, exactly as written (`name{labels}`); undefined when absent. */
function seriesValue(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('metrics on their own listener', () => {
  let backend: TestBackend;
  let upstream: TestUpstream;
  let keys: { access_key: string; secret_key: string };
  let partnerId: string;

  const cli = async <T = Record<string, unknown>>(...args: string[]): Promise<T> => {
    const result = await runCli(['--json', '--yes', ...args], backend.env);
    expect(result.code, result.stderr).toBe(0);
    return result.json<T>();
  };
  const exchange = (server: Served, secret = keys.secret_key) =>
    fetch(`${server.url}/public/v1/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ access_key: keys.access_key, secret_key: secret }),
    });

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    upstream = await startUpstream();
    partnerId = (await cli<{ partner_id: string }>('create-partner', '--name', 'Metered')).partner_id;
    keys = await cli<{ access_key: string; secret_key: string }>('issue-keys', 'Metered');
    await cli('map-company', 'Metered', '--company', 'acme');
  });
  afterAll(async () => {
    await upstream?.close();
    await backend?.dispose();
  });

  it('counts requests by route and status class, token outcomes, engine and gateway latency, caches, revision age, availability, process defaults', async () => {
    const server = await serveInProcess({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url }, ['--metrics-port', '0']);
    try {
      const metricsUrl = await metricsUrlOf(server);
      expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      expect(metricsUrl).not.toContain(new URL(server.url).port + '/');

      const issued = await exchange(server);
      expect(issued.status).toBe(200);
      const { access_token: token } = (await issued.json()) as { access_token: string };
      expect((await exchange(server, 'not-the-secret')).status).toBe(401);
      for (let i = 0; i < 3; i++) {
        expect((await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: bearer(token) })).status).toBe(200);
      }
      expect((await fetch(`${server.url}/public/v1/prices?company_id=nope`, { headers: bearer(token) })).status).toBe(404);
      // The public port answers /metrics like any unknown path.
      const onPublic = await fetch(`${server.url}/metrics`);
      expect(onPublic.status).toBe(404);
      expect(await onPublic.json()).toMatchObject({ error: { code: 'not_found' } });

      const response = await fetch(metricsUrl);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      const text = await response.text();
      expect(seriesValue(text, 'partnerctl_http_requests_total{route_class="token",status_class="2xx"}')).toBe(1);
      expect(seriesValue(text, 'partnerctl_http_requests_total{route_class="token",status_class="4xx"}')).toBe(1);
      expect(seriesValue(text, 'partnerctl_http_requests_total{route_class="data",status_class="2xx"}')).toBe(3);
      expect(seriesValue(text, 'partnerctl_http_requests_total{route_class="data",status_class="4xx"}')).toBe(1);
      expect(seriesValue(text, 'partnerctl_http_requests_total{route_class="other",status_class="4xx"}')).toBe(1);
      expect(seriesValue(text, 'partnerctl_token_exchanges_total{outcome="issued"}')).toBe(1);
      expect(seriesValue(text, 'partnerctl_token_exchanges_total{outcome="refused"}')).toBe(1);
      expect(seriesValue(text, 'partnerctl_token_exchanges_total{outcome="rate_limited"}')).toBe(0);
      expect(seriesValue(text, 'partnerctl_engine_duration_seconds_count')).toBe(3);
      expect(seriesValue(text, 'partnerctl_engine_duration_seconds_sum')).toBeGreaterThan(0);
      expect(seriesValue(text, 'partnerctl_http_request_duration_seconds_count{route_class="data"}')).toBe(4);
      expect(seriesValue(text, 'partnerctl_http_request_duration_seconds_bucket{le="+Inf",route_class="data"}')).toBe(4);
      // One signature check, then the token's verdict from memory (counted per lookup: a request the fast
      // lane hands to Fastify, such as the 404, looks the verdict up again there).
      expect(seriesValue(text, 'partnerctl_cache_misses_total{cache="token"}')).toBe(1);
      expect(seriesValue(text, 'partnerctl_cache_hits_total{cache="token"}')).toBeGreaterThanOrEqual(3);
      expect(seriesValue(text, 'partnerctl_cache_hits_total{cache="access"}')).toBeGreaterThan(0);
      const age = seriesValue(text, 'partnerctl_revision_age_seconds')!;
      expect(age).toBeGreaterThanOrEqual(0);
      expect(age).toBeLessThan(5);
      expect(seriesValue(text, 'partnerctl_database_up')).toBe(1);
      expect(seriesValue(text, 'partnerctl_redis_up')).toBe(-1);
      expect(seriesValue(text, 'process_cpu_seconds_total')).toBeGreaterThan(0);
      expect(text).toContain('nodejs_eventloop_lag_seconds');
      // No series per partner unless asked for.
      expect(text).not.toContain('partnerctl_partner_requests_total');
      expect(text).not.toContain(partnerId);

      expect((await fetch(metricsUrl.replace('/metrics', '/other'))).status).toBe(404);
    } finally {
      await server.stop();
    }
  });

  it('per-partner series with PUBLIC_API_METRICS_PER_PARTNER=1; token rate limits counted as rate_limited', async () => {
    const server = await serveInProcess(
      { ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_METRICS_PER_PARTNER: '1', PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '2' },
      ['--metrics-port', '0', '--metrics-host', '127.0.0.1'],
    );
    try {
      const metricsUrl = await metricsUrlOf(server);
      const { access_token: token } = (await (await exchange(server)).json()) as { access_token: string };
      await exchange(server);
      expect((await exchange(server)).status).toBe(429);
      await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: bearer(token) });
      const text = await (await fetch(metricsUrl)).text();
      expect(seriesValue(text, 'partnerctl_token_exchanges_total{outcome="rate_limited"}')).toBe(1);
      expect(seriesValue(text, 'partnerctl_token_exchanges_total{outcome="issued"}')).toBe(2);
      expect(seriesValue(text, `partnerctl_partner_requests_total{partner_id="${partnerId}",status_class="2xx"}`)).toBe(1);
    } finally {
      await server.stop();
    }
  });

  it('no metrics listener unless a port is given; flags and variables checked at startup', async () => {
    expect(loadConfig({}, {}).server!.metricsPort).toBeNull();
    expect(loadConfig({ PUBLIC_API_METRICS_PORT: '9464' }, {}).server!).toMatchObject({ metricsPort: 9464, metricsHost: '127.0.0.1', metricsPerPartner: false });
    expect(loadConfig({ PUBLIC_API_METRICS_PORT: '9464' }, { metricsPort: '9100', metricsHost: '0.0.0.0' }).server!).toMatchObject({ metricsPort: 9100, metricsHost: '0.0.0.0' });
    expect(() => loadConfig({}, { port: 9100, metricsPort: '9100' }).server!).toThrow(/--metrics-port \/ PUBLIC_API_METRICS_PORT must differ from --port/);
    expect(() => loadConfig({ PUBLIC_API_METRICS_PORT: 'x' }, {}).server!).toThrow(/--metrics-port \/ PUBLIC_API_METRICS_PORT must be a whole number/);
    expect(() => loadConfig({ PUBLIC_API_METRICS_PER_PARTNER: 'maybe' }, {}).server!).toThrow(/PUBLIC_API_METRICS_PER_PARTNER must be 1 or 0/);
    const server = await serveInProcess({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url });
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(server.stderr()).not.toContain('metrics on');
    } finally {
      await server.stop();
    }
  });
});
