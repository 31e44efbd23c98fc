import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runBinary, runCli, type CliResult } from '../support/cli.js';
import { openProbe, pairsOf, provision, writeMarks, type Probe } from './support.js';

// The rotation the crash tests kill: the built product's, paused by the test's wrapper of its transaction.
const PAUSED_ROTATION = fileURLToPath(new URL('./paused-rotation.mjs', import.meta.url));
const PAUSED_LINE = 'paused inside the rotation transaction';
// What must never reach an operator: a driver's or database's own words, or a stack trace.
const RAW_DATABASE_TEXT = /SQLITE_\w+|database is locked|\bP\d{4}\b|deadlock|could not serialize|PrismaClient|DriverAdapterError|\n\s+at /;

/** A rotation paused inside its transaction (before the new pair is inserted), resolved once it says so on stderr. */
async function pausedRotation(backend: TestBackend, partnerId: string, ...flags: string[]) {
  const child = spawn(process.execPath, [PAUSED_ROTATION, partnerId, ...flags], { env: backend.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the rotation never paused: ${stderr}`)), 30_000);
    child.stderr.setEncoding('utf8').on('data', (chunk) => {
      stderr += chunk;
      if (stderr.includes(PAUSED_LINE)) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then(({ code }) => reject(new Error(`the rotation exited (${code}) before its pause: ${stderr}`)));
  });
  return { child, exited, stdout: () => stdout };
}

function expectCleanFailure(result: CliResult, label: string) {
  const lines = result.stderr.trim().split('\n');
  expect(lines, `${label}: ${result.stderr}`).toHaveLength(1);
  expect(lines[0], label).toMatch(/^partnerctl: [a-z_]+: /);
  expect(result.stderr, label).not.toMatch(RAW_DATABASE_TEXT);
}

describe.concurrent.each(BACKENDS)('rotate-keys under concurrency and crashes (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', { sequential: true }, () => {
    let backend: TestBackend;
    let probe: Probe;

    beforeAll(async () => {
      backend = await createBackend(provider);
      await (await openMigrated(backend)).close();
      probe = await openProbe(backend);
    });
    afterAll(async () => {
      await probe?.close();
      await backend?.dispose();
    });

    it('20 concurrent rotate-keys processes: one active pair, every other superseded, one audit event per success', async () => {
      const partner = await provision(backend, 'contended');
      const before = await writeMarks(probe);
      const results = await Promise.all(Array.from({ length: 20 }, () => runBinary(['rotate-keys', partner.partnerId, '--json'], backend.env)));

      const succeeded = results.filter((result) => result.code === 0);
      for (const [index, result] of results.entries()) {
        if (result.code === 0) expect(result.stderr, `process ${index}`).toBe('');
        else expectCleanFailure(result, `process ${index}`);
        expect(result.stderr + result.stdout, `process ${index}`).not.toMatch(RAW_DATABASE_TEXT);
      }
      const outputs = succeeded.map((result) => result.json() as { key_pair_id: string; superseded_key_pair_id: string });
      const pairs = await pairsOf(probe, partner.partnerId);
      const active = pairs.filter((pair) => pair.status === 'active');
      expect(active).toHaveLength(1);
      expect(pairs.filter((pair) => pair.status === 'superseded')).toHaveLength(succeeded.length);
      expect(pairs).toHaveLength(succeeded.length + 1);

      // The rotations form one chain: each superseded the pair the previous one made.
      const superseded = outputs.map((output) => output.superseded_key_pair_id);
      const made = outputs.map((output) => output.key_pair_id);
      expect(new Set(superseded).size).toBe(outputs.length);
      expect(new Set(made).size).toBe(outputs.length);
      expect(superseded).toContain(partner.keyPairId);
      expect(made).toContain(active[0]!.id);
      expect(superseded).not.toContain(active[0]!.id);
      expect(new Set([...superseded, active[0]!.id])).toEqual(new Set(pairs.map((pair) => pair.id)));

      const rotated = await probe.rows<{ n: number | string }>("SELECT COUNT(*) AS n FROM audit_events WHERE partner_id = $1 AND action = 'keys.rotated'", [partner.partnerId]);
      expect(Number(rotated[0]!.n)).toBe(succeeded.length);
      expect((await writeMarks(probe)).audit).toBe(before.audit + succeeded.length);
      console.info(`[hardening] ${provider}: 20 concurrent rotate-keys processes, ${succeeded.length} exited 0, ${20 - succeeded.length} failed cleanly`);
      expect(succeeded.length).toBe(20);
    }, 150_000);

    it('SIGKILL inside the rotation transaction leaves the old pair active, no new pair, and a usable database', async () => {
      const partner = await provision(backend, 'killed');
      const before = await writeMarks(probe);
      const paused = await pausedRotation(backend, partner.partnerId);
      paused.child.kill('SIGKILL');
      expect((await paused.exited).signal).toBe('SIGKILL');
      expect(paused.stdout()).toBe('');

      const pairs = await pairsOf(probe, partner.partnerId);
      expect(pairs.map((pair) => [pair.id, pair.status])).toEqual([[partner.keyPairId, 'active']]);
      expect(await writeMarks(probe)).toEqual(before);
      if (provider === 'postgresql') {
        // The server notices the dead client and rolls its transaction back: nothing is left holding locks.
        let open: unknown[] = [];
        for (let waited = 0; waited < 10_000; waited += 100) {
          open = await probe.rows("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'");
          if (open.length === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        expect(open).toEqual([]);
      }

      const started = Date.now();
      const next = await runCli(['rotate-keys', partner.partnerId, '--json'], backend.env);
      expect(next.code, next.stderr).toBe(0);
      expect(Date.now() - started).toBeLessThan(20_000);
      expect(next.json()).toMatchObject({ superseded_key_pair_id: partner.keyPairId });
      const after = await pairsOf(probe, partner.partnerId);
      expect(after.filter((pair) => pair.status === 'active').map((pair) => pair.id)).toEqual([next.json().key_pair_id]);
      expect(after).toHaveLength(2);
    });

    it('a rotation queued behind one that is killed goes through once the lock is freed', async () => {
      const partner = await provision(backend, 'queued');
      const paused = await pausedRotation(backend, partner.partnerId);
      // Another process, as in production: an in-process run would hold this worker's event loop in SQLite's
      // busy handler, so the kill below could not fire until the busy timeout ran out.
      const waiting = runBinary(['rotate-keys', partner.partnerId, '--json'], backend.env);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      paused.child.kill('SIGKILL');
      await paused.exited;
      const result = await waiting;
      expect(result.code, result.stderr).toBe(0);
      expect(result.json()).toMatchObject({ superseded_key_pair_id: partner.keyPairId });
      const pairs = await pairsOf(probe, partner.partnerId);
      expect(pairs.filter((pair) => pair.status === 'active').map((pair) => pair.id)).toEqual([result.json().key_pair_id]);
      expect(pairs).toHaveLength(2);
    });

    it('SIGKILL inside a rotation with --revoke-issued-tokens revokes nothing', async () => {
      const partner = await provision(backend, 'killed-revoking');
      const paused = await pausedRotation(backend, partner.partnerId, '--revoke-issued-tokens');
      paused.child.kill('SIGKILL');
      await paused.exited;
      const pairs = await pairsOf(probe, partner.partnerId);
      expect(pairs.map((pair) => [pair.id, pair.status])).toEqual([[partner.keyPairId, 'active']]);
      const revoked = await probe.rows('SELECT id FROM key_pairs WHERE partner_id = $1 AND revoked_at IS NOT NULL', [partner.partnerId]);
      expect(revoked).toEqual([]);
    });
  });
});
