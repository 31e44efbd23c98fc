// Rules of time that run in-process, driven by a test clock instead of waited for.
import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Bookkeeping } from '../../src/domain/runtime/bookkeeping.js';
import { InstanceRegistry, instanceReport, STALE_AFTER_MS } from '../../src/domain/runtime/instances.js';
import { SigningKeyWatch, type KeyFileLog } from '../../src/domain/runtime/signing-key-guard.js';
import { SigningKeys } from '../../src/domain/operations/signing-keys.js';
import { TokenVerifier } from '../../src/domain/operations/tokens.js';
import { backendAvailable } from '../support/backends.js';
import { TestClock } from '../support/clock.js';
import { useMigratedDatabase } from './fixtures.js';

const folder = mkdtempSync(join(tmpdir(), 'partnerctl-clocked-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

function recordingLog(): KeyFileLog & { lines: [string, string][] } {
  const lines: [string, string][] = [];
  return {
    lines,
    error: (_fields, message) => void lines.push(['error', message]),
    warn: (_fields, message) => void lines.push(['warn', message]),
    info: (_fields, message) => void lines.push(['info', message]),
  };
}

describe.skipIf(!backendAvailable('sqlite'))('with a test clock (sqlite)', () => {
  const ctx = useMigratedDatabase('sqlite');

  it('reminds of a missing signing-key file once a minute, by the clock, and says when it is back', async () => {
    const clock = new TestClock();
    const path = join(folder, 'keys.json');
    const keys = SigningKeys.open(path, clock);
    const saved = readFileSync(path);
    const bookkeeping = new Bookkeeping(ctx.db, { clock });
    const log = recordingLog();
    const watch = new SigningKeyWatch(keys, new TokenVerifier(keys), bookkeeping, log, clock);
    const missing = () => log.lines.filter(([, message]) => message.startsWith('SIGNING-KEY FILE MISSING')).length;

    unlinkSync(path);
    watch.check();
    expect(missing()).toBe(1);
    clock.advance(59_999);
    watch.check();
    expect(missing()).toBe(1);
    clock.advance(1);
    watch.check();
    expect(missing()).toBe(2);
    writeFileSync(path, saved, { mode: 0o600 });
    watch.check();
    expect(log.lines).toContainEqual(['warn', 'signing-key file is back']);
    expect(missing()).toBe(2);
    await bookkeeping.stop();
  });

  it('lists a serve instance whose heartbeat is older than the stale bound as stale, by the clock', async () => {
    const clock = new TestClock();
    const db = { ...ctx.db, clock };
    const registry = new InstanceRegistry(db, clock, 'test', () => null, () => null);
    registry.start('127.0.0.1:1');
    await registry.flush();
    const row = async () => (await instanceReport(db)).instances.find((instance) => instance.instanceId === registry.instanceId)!;
    expect(await row()).toMatchObject({ startedAt: new Date(clock.now()), lastSeenAt: new Date(clock.now()), stale: false });
    clock.advance(STALE_AFTER_MS);
    expect((await row()).stale).toBe(false);
    clock.advance(1);
    expect((await row()).stale).toBe(true);
    // A heartbeat makes it live again.
    registry.revisionApplied();
    await registry.flush();
    expect(await row()).toMatchObject({ lastSeenAt: new Date(clock.now()), stale: false });
    expect(await registry.stop()).toBe(true);
    expect((await instanceReport(db)).instances.map((instance) => instance.instanceId)).not.toContain(registry.instanceId);
  });
});
