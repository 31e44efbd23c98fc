import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig, VERSION } from '../../src/config.js';
import { AppError } from '../../src/errors.js';

describe('the CLI configuration', () => {
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
    expect(config.env).not.toHaveProperty('UNRELATED');
  });

  it('turns colour off for NO_COLOR (any value) and TERM=dumb', () => {
    expect(loadConfig({ NO_COLOR: '' }).colourAllowed).toBe(false);
    expect(loadConfig({ TERM: 'dumb' }).colourAllowed).toBe(false);
  });

  it('treats blank variables as unset', () => {
    const config = loadConfig({ DATABASE_URL: '  ', PARTNERCTL_ACTOR: '', PARTNERCTL_WEBHOOK_RETRY_DELAYS: ' ' });
    expect(config.env.DATABASE_URL).toBeUndefined();
    expect(config.defaultActor).toBeUndefined();
    expect(config.webhookRetryDelaysMs).toEqual(loadConfig({}).webhookRetryDelaysMs);
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
      expect((caught as AppError).message).toContain('PARTNERCTL_DB_POOL_SIZE');
    }
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
});
