// set-network and the configuration of issue 24: usage errors name the value, the rules are canonical,
// audited, shown and carried by export/apply; PUBLIC_API_TRUSTED_PROXIES is checked at start.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { canonicalCidr, matcherOf } from '../../src/domain/operations/networks.js';
import { AppError } from '../../src/errors.js';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

describe('network rules and trusted proxies', () => {
  let backend: TestBackend;
  // In-process: what is checked is the command's answer (exit code, stderr line, JSON), not its process.
  const cli = (...args: string[]) => runCli(['--yes', ...args], backend.env);

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    expect((await cli('create-partner', '--name', 'Netted')).code).toBe(0);
  });
  afterAll(async () => backend?.dispose());

  it('reads CIDRs and addresses canonically, and refuses anything else naming it', () => {
    expect(canonicalCidr('10.1.2.3/8')).toBe('10.0.0.0/8');
    expect(canonicalCidr('203.0.113.7')).toBe('203.0.113.7/32');
    expect(canonicalCidr('2001:DB8::1/32')).toBe('2001:db8::/32');
    for (const bad of ['10.0.0.300', '10.0.0.0/33', '0x7f.1', 'example.com', '::1/129', '10.0.0.0/']) {
      expect(() => canonicalCidr(bad)).toThrow(AppError);
      expect(() => canonicalCidr(bad)).toThrow(bad);
    }
    const matches = matcherOf('10.0.0.0/8,2001:db8::/32')!;
    expect([matches('10.9.8.7'), matches('::ffff:10.9.8.7'), matches('2001:db8::5'), matches('11.0.0.1'), matches('')]).toEqual([true, true, true, false, false]);
    expect(matcherOf(null)).toBeNull();
  });

  it('reads a /0 prefix as every address of its family, and a stored rule it cannot use as none', () => {
    expect(canonicalCidr('0.0.0.0/0')).toBe('0.0.0.0/0');
    expect(canonicalCidr('10.1.2.3/0')).toBe('0.0.0.0/0');
    expect(canonicalCidr('::/0')).toBe('::/0');
    const everyIPv4 = matcherOf('0.0.0.0/0')!;
    expect([everyIPv4('203.0.113.9'), everyIPv4('::ffff:10.0.0.1'), everyIPv4('2001:db8::1'), everyIPv4('')]).toEqual([true, true, false, false]);
    const mixed = matcherOf('0.0.0.0/0,2001:db8::/32')!;
    expect([mixed('198.51.100.1'), mixed('2001:db8::1'), mixed('2001:db9::1')]).toEqual([true, true, false]);
    const every = matcherOf('::/0')!;
    expect([every('2001:db8::1'), every('::1'), every('127.0.0.1'), every('::ffff:10.0.0.1'), every('')]).toEqual([true, true, true, true, false]);
    // Written around set-network: refused for every address, never thrown (a 500 or a database error).
    const broken = matcherOf('10.0.0.0/99,garbage')!;
    expect([broken('10.0.0.1'), broken('203.0.113.9')]).toEqual([false, false]);
  });

  it('sets, shows, audits and clears the rules; an invalid CIDR exits 2 naming it', async () => {
    const bad = await cli('set-network', 'Netted', '--allow', '192.0.2.0/24', '--allow', '192.0.2.999');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("'192.0.2.999'");
    expect((await cli('set-network', 'Netted')).code).toBe(2);
    expect((await cli('set-network', 'Netted', '--clear', '--allow', '192.0.2.0/24')).code).toBe(2);
    const set = await cli('--json', 'set-network', 'Netted', '--allow', '192.0.2.9/24', '--allow', '2001:db8::/48');
    expect(set.code, set.stderr).toBe(0);
    expect(set.json()).toMatchObject({ network: { allow: ['192.0.2.0/24', '2001:db8::/48'] }, changed: true });
    expect((await cli('--json', 'set-network', 'Netted', '--allow', '192.0.2.0/24', '--allow', '2001:db8::/48')).json().changed).toBe(false);
    expect((await cli('--json', 'show-partner', 'Netted')).json().network).toEqual({ allow: ['192.0.2.0/24', '2001:db8::/48'] });
    const events = (await cli('--json', 'audit', 'Netted')).json().events as { action: string }[];
    expect(events.filter((event) => event.action === 'partner.network_set')).toHaveLength(1);
    expect((await cli('--json', 'set-network', 'Netted', '--clear')).json()).toMatchObject({ network: { allow: [] }, changed: true });
  });

  it('export carries allow_from and apply sets or clears it', async () => {
    await cli('set-network', 'Netted', '--allow', '198.51.100.0/24');
    const exported = await cli('--json', 'export', '--partner', 'Netted');
    expect(exported.json().partners[0].allow_from).toEqual(['198.51.100.0/24']);
    const apply = await runCli(['--yes', '--json', 'apply', '-f', '-'], backend.env, {
      input: JSON.stringify({ partners: [{ name: 'Netted', allow_from: ['198.51.100.0/25'] }] }),
    });
    expect(apply.code, apply.stderr).toBe(0);
    expect(apply.json().plan).toMatchObject({ networks_set: 1, changes: 1 });
    expect((await cli('--json', 'show-partner', 'Netted')).json().network.allow).toEqual(['198.51.100.0/25']);
    const invalid = await runCli(['--yes', 'apply', '-f', '-'], backend.env, { input: JSON.stringify({ partners: [{ name: 'Netted', allow_from: ['nope'] }] }) });
    expect(invalid.code).toBe(2);
    expect(invalid.stderr).toContain('allow_from[0]');
  });

  it('reads PUBLIC_API_TRUSTED_PROXIES (addresses, CIDRs, loopback, private) and names a bad entry', () => {
    expect(loadConfig({}, {}).server!.trustedProxies).toEqual([]);
    expect(loadConfig({ PUBLIC_API_TRUSTED_PROXIES: ' 10.0.0.1, loopback ,PRIVATE,2001:db8::/32' }, {}).server!.trustedProxies).toEqual([
      '10.0.0.1',
      'loopback',
      'uniquelocal',
      '2001:db8::/32',
    ]);
    expect(() => loadConfig({ PUBLIC_API_TRUSTED_PROXIES: '10.0.0.1,lan' }, {})).toThrow(/PUBLIC_API_TRUSTED_PROXIES .*'lan'/);
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }, {}).server!.otlpEndpoint?.href).toBe('http://127.0.0.1:4318/');
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://x' }, {})).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
  });
});
