// 37.4: connections that never send a byte are closed, and no one host can hold the port's connections.
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { addressKey } from '../../src/domain/rules/address-key.js';
import { createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { dribble, type Flood, forwardedFrom, idleConnection, idleFlood, loopbackAlias, statusFrom } from '../support/floods.js';
import { buildTestApp, type TestApp } from './support.js';

// Node checks the request timeout of open connections once a second (src/http/server/app.ts,
// connectionsCheckingInterval): a connection is closed between the timeout and the timeout + 1 s.
const CHECK_INTERVAL_MS = 1_000;

describe('37.4: connection limits of the public port', () => {
  let backend: TestBackend;
  let db: Database;
  let t: TestApp;
  let port: number;
  const floods: Flood[] = [];

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    db = await openMigrated(backend);
    t = await buildTestApp(backend, db, { PUBLIC_API_REQUEST_TIMEOUT_MS: '600', PUBLIC_API_MAX_CONNECTIONS_PER_ADDRESS: '10', PUBLIC_API_MAX_CONNECTIONS: '25' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await Promise.all(floods.map((flood) => flood.close()));
    await t?.close();
    await db?.close();
    await backend?.dispose();
  });

  it('closes a connection that never sends a byte once the request timeout has passed; one that sent a partial head gets its 408', async () => {
    const idle = await idleConnection({ port }, '127.0.0.11');
    const closedAfter = await idle.closed;
    expect(closedAfter).toBeGreaterThanOrEqual(550);
    expect(closedAfter).toBeLessThan(10_000);
    expect(idle.received()).toBe(0);
    expect(await statusFrom({ port }, '127.0.0.11')).toBe(200);
    // A partial head is not silence: it gets the 408 envelope of the request timeout, not a bare close.
    const partial = await idleConnection({ port }, '127.0.0.12');
    partial.socket.write('GET /healthz HTTP/1.1\r\nHost: loc');
    await partial.closed;
    expect(partial.text()).toMatch(/^HTTP\/1\.1 408 /);
    expect(partial.text()).toContain('"code":"request_timeout"');
  });

  it('refuses a connection past the per-address limit at once, and answers every other address', async () => {
    const flood = await idleFlood({ port }, 10, { from: () => '127.0.0.21' });
    floods.push(flood);
    const held = flood.sockets;
    const extra = await idleConnection({ port }, '127.0.0.21');
    expect(await extra.closed).toBeLessThan(550);
    expect(extra.received()).toBe(0);
    expect(await statusFrom({ port }, '127.0.0.22')).toBe(200);
    // One of the ten closes: that address may open one more.
    held[0]!.socket.destroy();
    await held[0]!.closed;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await statusFrom({ port }, '127.0.0.21')).toBe(200);
    await flood.close();
  });

  it('holds at most the total across addresses, and answers again once connections close', async () => {
    // Five addresses of five connections each: no address past its limit, the port at its total.
    const flood = await idleFlood({ port }, 25, { from: (i) => loopbackAlias(40, Math.floor(i / 5)), concurrency: 1 });
    floods.push(flood);
    const extra = await idleConnection({ port }, '127.0.0.60');
    expect(await extra.closed).toBeLessThan(550);
    await flood.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await statusFrom({ port }, '127.0.0.60')).toBe(200);
  });

  it('cuts a head sent a byte at a time at the request timeout (408), each byte keeping nothing alive; others are answered meanwhile', async () => {
    const head = `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ${'a'.repeat(200)}\r\n\r\n`;
    const [slow, other] = await Promise.all([
      dribble({ port }, head, { from: '127.0.0.70', intervalMs: 50, limitMs: 600 + CHECK_INTERVAL_MS + 2_000 }),
      new Promise<void>((resolve) => setTimeout(resolve, 200)).then(() => statusFrom({ port }, '127.0.0.71')),
    ]);
    expect(other).toBe(200);
    // Closed by the server (not by the dribble's own limit), with the envelope, before the whole head was in.
    expect(slow.closedAfterMs).not.toBeNull();
    expect(slow.closedAfterMs!).toBeGreaterThanOrEqual(550);
    expect(slow.closedAfterMs!).toBeLessThan(600 + CHECK_INTERVAL_MS + 1_000);
    expect(slow.sent).toBeLessThan(head.length);
    expect(slow.answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(slow.answer).toContain('"code":"request_timeout"');
  });

  it('holds a trusted proxy to no per-address limit: its clients, told apart by X-Forwarded-For, are all answered', async () => {
    const proxy = await buildTestApp(backend, db, {
      PUBLIC_API_REQUEST_TIMEOUT_MS: '5000',
      PUBLIC_API_MAX_CONNECTIONS_PER_ADDRESS: '3',
      PUBLIC_API_MAX_CONNECTIONS: '25',
      PUBLIC_API_TRUSTED_PROXIES: '127.0.0.80',
    });
    try {
      await proxy.app.listen({ port: 0, host: '127.0.0.1' });
      const target = { port: (proxy.app.server.address() as AddressInfo).port };
      // Eight connections from the balancer, past the three an address may hold: none closed.
      const flood = await idleFlood(target, 8, { from: () => '127.0.0.80' });
      floods.push(flood);
      const statuses = await Promise.all(Array.from({ length: 5 }, (_, i) => statusFrom(target, '127.0.0.80', '/healthz', forwardedFrom(`198.51.100.${i + 1}`))));
      expect(statuses).toEqual([200, 200, 200, 200, 200]);
      expect(flood.sockets.every((each) => each.socket.readyState === 'open')).toBe(true);
      // An untrusted address is held to three: the fourth is closed at once.
      const others = await idleFlood(target, 3, { from: () => '127.0.0.81' });
      floods.push(others);
      const extra = await idleConnection(target, '127.0.0.81');
      expect(await extra.closed).toBeLessThan(550);
      await flood.close();
      await others.close();
    } finally {
      await proxy.close();
    }
  });

  it('counts an IPv6 client by its /64', () => {
    expect(addressKey('2001:db8:1:2:3:4:5:6')).toBe(addressKey('2001:db8:1:2:ffff:ffff:ffff:ffff'));
    expect(addressKey('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:db8:1:3::1')).not.toBe(addressKey('2001:db8:1:2::1'));
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('127.0.0.1')).toBe('127.0.0.1');
    expect(addressKey('::ffff:127.0.0.1')).toBe('::ffff:127.0.0.1');
  });
});
