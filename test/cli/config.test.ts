import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfig, resolveDatabase, SERVER_DEFAULTS, TUNING, VERSION } from '../../src/config.js';
import { VARIABLES } from '../../src/config/table.js';
import { AppError } from '../../src/errors.js';

describe('the CLI configuration', () => {
  it('takes each default as if it were given: setting any variables to their defaults changes nothing', () => {
    const withDefaults = Object.entries(VARIABLES).flatMap(([name, variable]) => ('default' in variable ? [[name, variable.default] as const] : []));
    const unset = JSON.stringify(loadConfig({}, {}));
    fc.assert(
      fc.property(fc.subarray(withDefaults), (given) => {
        expect(JSON.stringify(loadConfig(Object.fromEntries(given), {}))).toBe(unset);
      }),
    );
    expect(SERVER_DEFAULTS).toEqual(loadConfig({}, {}).server);
    expect(SERVER_DEFAULTS.stalenessBoundMs).toBe(TUNING.stalenessBoundMs);
  });

  it("lets serve's flags win over the variables they name", () => {
    const env = { HOST: '10.0.0.1', PORT: '1', PUBLIC_API_UPSTREAM_URL: 'http://a.test', PUBLIC_API_METRICS_PORT: '2', PUBLIC_API_METRICS_HOST: '10.0.0.2' };
    const server = loadConfig(env, { host: '::1', port: 3, upstream: 'http://b.test', metricsPort: '4', metricsHost: '127.0.0.2' }).server!;
    expect([server.host, server.port, server.upstream?.href, server.metricsPort, server.metricsHost]).toEqual(['::1', 3, 'http://b.test/', 4, '127.0.0.2']);
    expect(() => loadConfig({}, { port: 'x' })).toThrow(/^--port \/ PORT must be a whole number/);
  });

  it('comes from package.json for the version, not a fallback', () => {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    expect(VERSION).toBe(manifest.version);
    expect(loadConfig({}).version).toBe(manifest.version);
  });

  it('is parsed once into a frozen object with the documented defaults', () => {
    const config = loadConfig({ PARTNERCTL_ACTOR: 'ops-bot', TERM: 'xterm', UNRELATED: 'x' });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.env)).toBe(true);
    expect(config.defaultActor).toBe('ops-bot');
    expect(config.colourAllowed).toBe(true);
    expect(config.env.PARTNERCTL_DB_POOL_SIZE).toBeUndefined();
    expect(config.env).not.toHaveProperty('UNRELATED');
  });

  it('turns colour off for NO_COLOR (any value) and TERM=dumb', () => {
    expect(loadConfig({ NO_COLOR: '' }).colourAllowed).toBe(false);
    expect(loadConfig({ TERM: 'dumb' }).colourAllowed).toBe(false);
  });

  it('treats blank variables as unset', () => {
    const config = loadConfig({ DATABASE_URL: '  ', PARTNERCTL_ACTOR: '', PARTNERCTL_DB_POOL_SIZE: ' ' });
    expect(config.env.DATABASE_URL).toBeUndefined();
    expect(config.defaultActor).toBeUndefined();
    expect(config.env.PARTNERCTL_DB_POOL_SIZE).toBeUndefined();
  });

  it('refuses a bad value with invalid_argument naming the variable', () => {
    for (const bad of ['abc', '-1', '0', '1.5', '1001']) {
      let caught: unknown;
      try {
        loadConfig({ PARTNERCTL_DB_POOL_SIZE: bad });
      } catch (error) {
        caught = error;
      }
      expect(caught, bad).toBeInstanceOf(AppError);
      expect((caught as AppError).code).toBe('invalid_argument');
      expect((caught as AppError).message).toContain('PARTNERCTL_DB_POOL_SIZE must be a whole number from 1 to 1000');
    }
  });

  it('parses the pool size once, as a number the database resolver takes', () => {
    const config = loadConfig({ PARTNERCTL_DB_POOL_SIZE: ' 7 ' });
    expect(config.env.PARTNERCTL_DB_POOL_SIZE).toBe(7);
    expect(resolveDatabase('postgresql://ops@db/partners', config.env, 2).poolSize).toBe(7);
    expect(resolveDatabase('postgresql://ops@db/partners', loadConfig({}).env, 2).poolSize).toBe(2);
  });

  it('reports every bad variable together, the server\'s too for serve', () => {
    let caught: unknown;
    try {
      loadConfig({ PARTNERCTL_DB_POOL_SIZE: 'many', PORT: 'http', PUBLIC_API_USAGE: 'maybe' }, { host: 'bad host' });
    } catch (error) {
      caught = error;
    }
    expect((caught as AppError).code).toBe('invalid_argument');
    const problems = (caught as AppError).message.split('; ');
    expect(problems).toHaveLength(4);
    expect(problems[0]).toMatch(/^PARTNERCTL_DB_POOL_SIZE must be a whole number/);
    expect(problems.slice(1).join('\n')).toMatch(/--host \/ HOST is not a host name/);
    expect(problems.slice(1).join('\n')).toMatch(/--port \/ PORT must be a whole number from 0 to 65535, got 'http'/);
    expect(problems.slice(1).join('\n')).toMatch(/PUBLIC_API_USAGE must be 1 or 0/);
    // Without serve, the server's variables are not looked at.
    expect(() => loadConfig({ PORT: 'http', PUBLIC_API_USAGE: 'maybe' })).not.toThrow();
  });

  it('reads the webhook retry delays and the secret-scanning settings, refusing bad ones in one line', () => {
    const day = 86_400_000;
    const defaults = loadConfig({}).webhookRetryDelaysMs;
    expect(defaults.reduce((sum, delay) => sum + delay, 0)).toBeGreaterThan(day);
    expect(defaults.every((delay, i) => i === 0 || delay >= defaults[i - 1]!)).toBe(true);
    expect(loadConfig({ PARTNERCTL_WEBHOOK_RETRY_DELAYS: '500ms, 1s,2m,1h,1d' }).webhookRetryDelaysMs).toEqual([500, 1_000, 120_000, 3_600_000, day]);
    for (const bad of ['1s,,2s', 'soon', '0s', '1s,2x']) {
      expect(() => loadConfig({ PARTNERCTL_WEBHOOK_RETRY_DELAYS: bad }), bad).toThrow(/PARTNERCTL_WEBHOOK_RETRY_DELAYS must be a comma list/);
    }
    expect(loadConfig({}, {}).server!.secretScanning).toBeNull();
    const scanning = loadConfig({ PUBLIC_API_SECRET_SCANNING: 'GitHub', PUBLIC_API_SECRET_SCANNING_KEYS_URL: 'http://127.0.0.1:9/keys' }, {}).server!.secretScanning!;
    expect(scanning).toMatchObject({ action: 'contain', rateLimitPerIp: 60 });
    expect(scanning.keysUrl.href).toBe('http://127.0.0.1:9/keys');
    expect(loadConfig({ PUBLIC_API_SECRET_SCANNING: 'github' }, {}).server!.secretScanning!.keysUrl.href).toBe(
      'https://api.github.com/meta/public_keys/secret_scanning',
    );
    expect(() => loadConfig({ PUBLIC_API_SECRET_SCANNING: 'gitlab' }, {})).toThrow(/PUBLIC_API_SECRET_SCANNING must be one of github, off/);
    expect(() => loadConfig({ PUBLIC_API_SECRET_SCANNING_ACTION: 'delete' }, {})).toThrow(/must be one of contain, report/);
  });

  it('reads the staleness budget as a duration (default 120 s, 0 for none), refusing anything else', () => {
    expect(loadConfig({}, {}).server!.staleBudgetMs).toBe(120_000);
    expect(loadConfig({ PUBLIC_API_STALE_BUDGET: '0' }, {}).server!.staleBudgetMs).toBe(0);
    expect(loadConfig({ PUBLIC_API_STALE_BUDGET: '2m' }, {}).server!.staleBudgetMs).toBe(120_000);
    expect(loadConfig({ PUBLIC_API_STALE_BUDGET: '45s' }, {}).server!.staleBudgetMs).toBe(45_000);
    expect(loadConfig({ PUBLIC_API_STALE_BUDGET: '500ms' }, {}).server!.staleBudgetMs).toBe(500);
    for (const bad of ['120', '-1s', 'two minutes', '61m']) {
      expect(() => loadConfig({ PUBLIC_API_STALE_BUDGET: bad }, {}), bad).toThrow(/PUBLIC_API_STALE_BUDGET must be/);
    }
  });
});
