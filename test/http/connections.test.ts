// 37.4: connections that never send a byte are closed, and no one host can hold the port's connections.
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { addressKey } from '../../src/domain/rules/address-key.js';
import { createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { buildTestApp, type TestApp } from './support.js';

/** A socket to the port from `localAddress`, and when it closed (ms after it connected; null while open). */
async function idleSocket(port: number, localAddress = '127.0.0.1'): Promise<{ socket: Socket; closed: Promise<number>; received: () => number }> {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  let bytes = 0;
  socket.on('data', (chunk: Buffer) => (bytes += chunk.length));
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const opened = performance.now();
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now() - opened)));
  return { socket, closed, received: () => bytes };
}

async function health(port: number, localAddress: string): Promise<number> {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  let text = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.end('GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  await new Promise((resolve) => socket.once('close', resolve));
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
}

describe('37.4: connection limits of the public port', () => {
  let backend: TestBackend;
  let db: Database;
  let t: TestApp;
  let port: number;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    db = await openMigrated(backend);
    t = await buildTestApp(backend, db, { PUBLIC_API_REQUEST_TIMEOUT_MS: '600', PUBLIC_API_MAX_CONNECTIONS_PER_ADDRESS: '10', PUBLIC_API_MAX_CONNECTIONS: '25' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await t?.close();
    await db?.close();
    await backend?.dispose();
  });

  it('closes a connection that never sends a byte once the request timeout has passed; one that sent a partial head gets its 408', async () => {
    const idle = await idleSocket(port, '127.0.0.11');
    const closedAfter = await idle.closed;
    expect(closedAfter).toBeGreaterThanOrEqual(550);
    expect(closedAfter).toBeLessThan(10_000);
    expect(idle.received()).toBe(0);
    expect(await health(port, '127.0.0.11')).toBe(200);
    // A partial head is not silence: it gets the 408 envelope of the request timeout, not a bare close.
    const partial = await idleSocket(port, '127.0.0.12');
    let text = '';
    partial.socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
    partial.socket.write('GET /healthz HTTP/1.1\r\nHost: loc');
    await partial.closed;
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(text).toContain('"code":"request_timeout"');
  });

  it('refuses a connection past the per-address limit at once, and answers every other address', async () => {
    const held = await Promise.all(Array.from({ length: 10 }, () => idleSocket(port, '127.0.0.21')));
    sockets.push(...held.map((each) => each.socket));
    const extra = await idleSocket(port, '127.0.0.21');
    expect(await extra.closed).toBeLessThan(550);
    expect(extra.received()).toBe(0);
    expect(await health(port, '127.0.0.22')).toBe(200);
    // One of the ten closes: that address may open one more.
    held[0]!.socket.destroy();
    await held[0]!.closed;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await health(port, '127.0.0.21')).toBe(200);
    for (const each of held) each.socket.destroy();
  });

  it('holds at most the total across addresses, and answers again once connections close', async () => {
    const held = [];
    for (let i = 0; i < 25; i++) held.push(await idleSocket(port, `127.0.0.${40 + Math.floor(i / 5)}`));
    sockets.push(...held.map((each) => each.socket));
    const extra = await idleSocket(port, '127.0.0.60');
    expect(await extra.closed).toBeLessThan(550);
    for (const each of held) each.socket.destroy();
    await Promise.all(held.map((each) => each.closed));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await health(port, '127.0.0.60')).toBe(200);
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
