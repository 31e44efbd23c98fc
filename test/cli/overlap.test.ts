import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runBinary, runCli, type CliResult } from '../support/cli.js';
import { serveInProcess, type ServedInProcess as Served } from '../support/serve.js';
import { startUpstream, type TestUpstream } from '../http/support.js';

/** A JSON answer of the CLI, read field by field (the shapes are what the assertions check). */
// biome-ignore lint/suspicious/noExplicitAny: JSON read field by field
type Json = any;

/** The servers' staleness bound: every transition must be honoured within it. */
const BOUND_MS = 1_000;

interface Keys {
  partner_id: string;
  key_pair_id: string;
  access_key: string;
  secret_key: string;
}

interface Rotated extends Keys {
  superseded_key_pair_id: string | null;
  retiring_key_pair_id: string | null;
  retires_at: string | null;
  after_switch: string | null;
  ended_retiring_key_pair_id: string | null;
  revoked_key_pair_ids: string[];
}

/**
 * `rotate-keys --overlap` through the real binary against two real `serve` instances on one database: the
 * old pair exchanges during the overlap and is refused (401 invalid_credentials) within 1 s after each way
 * of ending it (time, the switch seen on the other instance, --finish, another rotation, the brake).
 */
describe.concurrent.each(BACKENDS)('planned rotation with an overlap (%s, two serve instances)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', { sequential: true }, () => {
    let backend: TestBackend;
    let upstream: TestUpstream;
    let servers: Served[] = [];
    let counter = 0;

    const run = (...args: string[]): Promise<CliResult> => runCli(['--json', '--yes', ...args], backend.env);
    const cli = async <T = Json>(...args: string[]): Promise<T> => {
      const result = await run(...args);
      expect(result.code, result.stderr).toBe(0);
      return result.json<T>();
    };
    const exchange = async (server: Served, keys: { access_key: string; secret_key: string }) => {
      const response = await fetch(`${server.url}/public/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ access_key: keys.access_key, secret_key: keys.secret_key }),
      });
      const body = (await response.json()) as { access_token?: string; error?: { code: string } };
      return { status: response.status, token: body.access_token ?? null, code: body.error?.code ?? null };
    };
    const tokenOf = async (server: Served, keys: Keys) => {
      const result = await exchange(server, keys);
      expect(result.status).toBe(200);
      return result.token!;
    };
    const data = async (server: Served, token: string) =>
      (await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } })).status;
    /** Exchanges the keys on `server` until refused; resolves when (epoch ms) and with what. */
    /**
     * Exchanges until refused: the refusal, when it arrived (`at`), and when the last accepted exchange was
     * sent (`lastAcceptedSentAt`, null when none was). A bound is checked on the latter: the server decides a
     * request after it was sent, so one accepted means the change was not applied when it was sent, however
     * long a loaded machine then took to answer it.
     */
    const refusedAt = async (server: Served, keys: Keys, limitMs = 15_000) => {
      const deadline = Date.now() + limitMs;
      let lastAcceptedSentAt: number | null = null;
      for (;;) {
        const sentAt = Date.now();
        const result = await exchange(server, keys);
        if (result.status !== 200 || Date.now() > deadline) return { at: Date.now(), lastAcceptedSentAt, ...result };
        lastAcceptedSentAt = sentAt;
        await sleep(25);
      }
    };
    /** How long after `changedAt` an exchange was still accepted (0 when none was after it). */
    const acceptedFor = (refusal: { lastAcceptedSentAt: number | null }, changedAt: number) => Math.max(0, (refusal.lastAcceptedSentAt ?? changedAt) - changedAt);
    const pairOf = async (partnerId: string, keyPairId: string) => {
      const shown = await cli('show-partner', partnerId);
      return shown.key_pairs.find((pair: { key_pair_id: string }) => pair.key_pair_id === keyPairId);
    };
    const retiredEvents = async (partnerId: string) =>
      (await cli('audit', partnerId, '--action', 'keys.retired')).events.map((event: { details: Json }) =>
        typeof event.details === 'string' ? JSON.parse(event.details) : event.details,
      );
    const newPartner = async (): Promise<Keys> => {
      const name = `overlap-${++counter}`;
      await cli('create-partner', '--name', name);
      await cli('map-company', name, '--company', 'acme');
      return cli<Keys>('issue-keys', name);
    };

    beforeAll(async () => {
      backend = await createBackend(provider);
      await (await openMigrated(backend)).close();
      upstream = await startUpstream();
      const env = {
        ...backend.env,
        PUBLIC_API_UPSTREAM_URL: upstream.url,
        PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '0',
        PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '0',
      };
      servers = [await serveInProcess(env), await serveInProcess(env)];
    });
    afterAll(async () => {
      await Promise.all(servers.map((server) => server.stop()));
      await upstream?.close();
      await backend?.dispose();
    });

    it('the switch on one instance ends the overlap on the other within 1 s; everywhere shows retiring, retires_at, switched_at', async () => {
      const [one, two] = servers as [Served, Served];
      const old = await newPartner();
      const rotated = await cli<Rotated>('rotate-keys', old.partner_id, '--overlap', '24h', '--after-switch', '0s');
      const startedAt = Date.now();
      expect(rotated).toMatchObject({ retiring_key_pair_id: old.key_pair_id, superseded_key_pair_id: null, after_switch: '0s' });
      expect(rotated.secret_key).toMatch(/^pctl_sk_/);
      expect(Math.abs(Date.parse(rotated.retires_at!) - (startedAt + 86_400_000))).toBeLessThan(60_000);

      // Visible everywhere a pair is.
      expect(await pairOf(old.partner_id, old.key_pair_id)).toMatchObject({ status: 'retiring', retires_at: rotated.retires_at, switched_at: null });
      const listed = await cli('list-keys', '--partner', old.partner_id, '--status', 'retiring');
      expect(listed.keys.map((pair: { key_pair_id: string }) => pair.key_pair_id)).toEqual([old.key_pair_id]);
      expect(listed.keys[0]).toMatchObject({ status: 'retiring', retires_at: rotated.retires_at, switched_at: null });
      const bySecret = await cli('lookup', old.secret_key);
      expect(bySecret).toMatchObject({ status: 'retiring', retires_at: rotated.retires_at, switched_at: null, accepted: true });
      expect(bySecret.note).toMatch(/has not switched/);
      expect(bySecret.contain).toBe(`partnerctl revoke-keys ${old.partner_id} --key-pair ${old.key_pair_id} --yes`);
      expect((await cli('lookup', old.access_key)).contain).toBeNull();

      // The partner's client still runs on the old pair: it exchanges on both instances.
      const oldToken = await tokenOf(one, old);
      await tokenOf(two, old);

      // The partner deploys the new secret: its first exchange, on instance two, is the switch.
      await tokenOf(two, rotated);
      const switchedAt = Date.now();
      const refusal = await refusedAt(one, old);
      expect(refusal).toMatchObject({ status: 401, code: 'invalid_credentials' });
      expect(acceptedFor(refusal, switchedAt)).toBeLessThanOrEqual(BOUND_MS);
      expect((await exchange(two, old)).status).toBe(401);
      // A token the retiring pair minted during the overlap lives out its 15 minutes.
      expect(await data(one, oldToken)).toBe(200);
      expect(await data(two, oldToken)).toBe(200);

      const shown = await pairOf(old.partner_id, old.key_pair_id);
      expect(shown.status).toBe('superseded');
      expect(Date.parse(shown.switched_at)).toBeGreaterThanOrEqual(startedAt);
      expect(shown.retires_at).toBe(shown.switched_at);
      // The server records how it ended (off the request path): keys.retired, by the switch.
      let events: Json[] = [];
      for (let tries = 0; tries < 40 && events.length === 0; tries++) {
        events = await retiredEvents(old.partner_id);
        if (events.length === 0) await sleep(100);
      }
      expect(events).toEqual([expect.objectContaining({ key_pair_id: old.key_pair_id, ended_by: 'switch' })]);
      expect((await cli('list-keys', '--partner', old.partner_id, '--status', 'retiring')).keys).toEqual([]);
    });

    it('--after-switch: the old pair keeps exchanging that long after the switch, then is refused within 1 s', async () => {
      const [one, two] = servers as [Served, Served];
      const old = await newPartner();
      const rotated = await cli<Rotated>('rotate-keys', old.partner_id, '--overlap', '1h', '--after-switch', '3s');
      // Before the switch is sent: the server records it later, on the same clock, however long a loaded
      // machine then takes to answer.
      const beforeSwitch = Date.now();
      await tokenOf(one, rotated);
      // Still exchanging just after the switch, on the other instance too.
      expect((await exchange(two, old)).status).toBe(200);
      // The switch is written off the request path (the server's bookkeeping): shown once it has landed.
      const shown = await vi.waitFor(
        async () => {
          const pair = await pairOf(old.partner_id, old.key_pair_id);
          expect(pair.switched_at).not.toBeNull();
          return pair;
        },
        { timeout: 5_000, interval: 50 },
      );
      expect(shown.status).toBe('retiring');
      expect(Date.parse(shown.switched_at)).toBeGreaterThanOrEqual(beforeSwitch);
      const end = Date.parse(shown.retires_at);
      expect(end - Date.parse(shown.switched_at)).toBe(3_000);
      const refusal = await refusedAt(two, old);
      expect(refusal.status).toBe(401);
      expect(refusal.at).toBeGreaterThanOrEqual(end);
      expect(acceptedFor(refusal, end)).toBeLessThanOrEqual(BOUND_MS);
      // Not refused before the 3 s after the switch had passed (the old bound here, 2.5 s after the switch's
      // answer had arrived, failed when that answer took 650 ms on a loaded machine).
      expect(refusal.at - beforeSwitch).toBeGreaterThanOrEqual(3_000);
    });

    it('retires_at passes with nothing running: every reader treats the pair as superseded, and the next command records keys.retired by time', async () => {
      const [one] = servers as [Served];
      const old = await newPartner();
      const rotated = await cli<Rotated>('rotate-keys', old.partner_id, '--overlap', '2s');
      // D shorter than 15m: the after-switch default is D.
      expect(rotated.after_switch).toBe('2s');
      expect((await exchange(one, old)).status).toBe(200);
      const end = Date.parse(rotated.retires_at!);
      await sleep(Math.max(0, end - Date.now()) + 50);
      // No exchange of the old pair since: nothing has settled it, yet every reader says superseded.
      expect((await pairOf(old.partner_id, old.key_pair_id)).status).toBe('superseded');
      expect((await cli('list-keys', '--partner', old.partner_id, '--status', 'superseded')).keys.map((pair: Json) => pair.key_pair_id)).toEqual([
        old.key_pair_id,
      ]);
      expect((await cli('lookup', old.secret_key)).status).toBe('superseded');
      expect(await retiredEvents(old.partner_id)).toEqual([]);
      const refusal = await exchange(one, old);
      expect(refusal).toMatchObject({ status: 401, code: 'invalid_credentials' });
      // --finish: nothing is retiring any more (a re-run changes nothing), and the end is on record.
      const finish = await cli('rotate-keys', old.partner_id, '--finish');
      expect(finish).toMatchObject({ changed: false, retired_key_pair_id: null });
      const events = await retiredEvents(old.partner_id);
      expect(events).toEqual([expect.objectContaining({ key_pair_id: old.key_pair_id, ended_by: 'time' })]);
      expect(Date.parse(events[0].ended_at)).toBe(end);
    });

    it('--finish ends the overlap at once on both instances; a re-run exits 0 with changed: false', async () => {
      const [one, two] = servers as [Served, Served];
      const old = await newPartner();
      await cli<Rotated>('rotate-keys', old.partner_id, '--overlap', '7d');
      const oldToken = await tokenOf(one, old);
      const finish = await cli('rotate-keys', old.partner_id, '--finish');
      const finishedAt = Date.now();
      expect(finish).toMatchObject({ changed: true, retired_key_pair_id: old.key_pair_id, ended_by: 'finish' });
      for (const server of [one, two]) {
        const refusal = await refusedAt(server, old);
        expect(refusal).toMatchObject({ status: 401, code: 'invalid_credentials' });
        expect(acceptedFor(refusal, finishedAt)).toBeLessThanOrEqual(BOUND_MS);
      }
      expect(await data(two, oldToken)).toBe(200);
      expect((await pairOf(old.partner_id, old.key_pair_id)).status).toBe('superseded');
      expect(await cli('rotate-keys', old.partner_id, '--finish')).toMatchObject({ changed: false });
      expect(await retiredEvents(old.partner_id)).toEqual([expect.objectContaining({ key_pair_id: old.key_pair_id, ended_by: 'finish' })]);
      const rotatedEvent = (await cli('audit', old.partner_id, '--action', 'keys.rotated')).events[0];
      const details = typeof rotatedEvent.details === 'string' ? JSON.parse(rotatedEvent.details) : rotatedEvent.details;
      expect(details).toMatchObject({ retiring_key_pair_id: old.key_pair_id, after_switch: '15m' });
    });

    it('a second rotation supersedes the retiring pair at once: at most one retiring pair', async () => {
      const [one, two] = servers as [Served, Served];
      const first = await newPartner();
      const second = await cli<Rotated>('rotate-keys', first.partner_id, '--overlap', '1h');
      expect((await exchange(one, first)).status).toBe(200);
      const third = await cli<Rotated>('rotate-keys', first.partner_id, '--overlap', '1h');
      const rotatedAt = Date.now();
      expect(third).toMatchObject({ retiring_key_pair_id: second.key_pair_id, ended_retiring_key_pair_id: first.key_pair_id });
      const refusal = await refusedAt(two, first);
      expect(refusal.status).toBe(401);
      expect(acceptedFor(refusal, rotatedAt)).toBeLessThanOrEqual(BOUND_MS);
      expect((await exchange(one, second)).status).toBe(200);
      const statuses = Object.fromEntries(
        (await cli('show-partner', first.partner_id)).key_pairs.map((pair: Json) => [pair.key_pair_id, pair.status]),
      );
      expect(statuses).toEqual({ [first.key_pair_id]: 'superseded', [second.key_pair_id]: 'retiring', [third.key_pair_id]: 'active' });
      // Without --overlap too: the retiring pair and the active one are both superseded.
      const fourth = await cli<Rotated>('rotate-keys', first.partner_id);
      expect(fourth).toMatchObject({ superseded_key_pair_id: third.key_pair_id, ended_retiring_key_pair_id: second.key_pair_id, retiring_key_pair_id: null });
      expect((await refusedAt(one, second)).status).toBe(401);
      const text = await runCli(['rotate-keys', first.partner_id, '--overlap', '1h'], backend.env);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toMatch(/retiring/);
      // Newest first: the third pair was active (superseded directly), only the retiring ones ended an overlap.
      expect(await retiredEvents(first.partner_id)).toEqual([
        expect.objectContaining({ key_pair_id: second.key_pair_id, ended_by: 'rotation' }),
        expect.objectContaining({ key_pair_id: first.key_pair_id, ended_by: 'rotation' }),
      ]);
    });

    it('the brake kills a retiring pair and its tokens at once; revoke-keys treats it as live', async () => {
      const [one, two] = servers as [Served, Served];
      const old = await newPartner();
      const rotated = await cli<Rotated>('rotate-keys', old.partner_id, '--overlap', '1h');
      const oldToken = await tokenOf(one, old);
      const braked = await cli<Rotated>('rotate-keys', old.partner_id, '--revoke-issued-tokens');
      const brakedAt = Date.now();
      expect(braked.revoked_key_pair_ids).toEqual(expect.arrayContaining([old.key_pair_id, rotated.key_pair_id]));
      expect(braked.retiring_key_pair_id).toBeNull();
      const refusal = await refusedAt(two, old);
      expect(refusal).toMatchObject({ status: 401, code: 'invalid_credentials' });
      expect(acceptedFor(refusal, brakedAt)).toBeLessThanOrEqual(BOUND_MS);
      // The token too: no data request sent later than the bound after the brake was accepted.
      let lastAcceptedSentAt = brakedAt;
      for (let sentAt = Date.now(), status = await data(two, oldToken); status !== 401; sentAt = Date.now(), status = await data(two, oldToken)) {
        expect(status).toBe(200);
        lastAcceptedSentAt = sentAt;
        expect(sentAt - brakedAt).toBeLessThan(5_000);
      }
      expect(lastAcceptedSentAt - brakedAt).toBeLessThanOrEqual(BOUND_MS);
      expect((await pairOf(old.partner_id, old.key_pair_id)).status).toBe('revoked');

      // revoke-keys (every live pair) takes a retiring pair with the rest.
      const other = await newPartner();
      await cli('rotate-keys', other.partner_id, '--overlap', '1h');
      const revoked = await cli('revoke-keys', other.partner_id);
      expect(revoked.revoked_key_pair_ids).toContain(other.key_pair_id);
      expect((await exchange(one, other)).status).toBe(401);
    });

    it('lookup recommends no brake where nothing can be live: an access key alone, a revoked pair, a superseded pair without tokens', async () => {
      const [one] = servers as [Served];
      const unused = await newPartner();
      await cli('rotate-keys', unused.partner_id);
      // Superseded before it ever minted a token: nothing of it can be live.
      const neverUsed = await cli('lookup', unused.secret_key);
      expect(neverUsed).toMatchObject({ status: 'superseded', contain: null });
      expect(neverUsed.note).toMatch(/no token it minted can still be live/);

      const used = await newPartner();
      await tokenOf(one, used);
      // The server records a pair's first use off the request path, within milliseconds: wait for the record,
      // which is what lookup reads (a token minted in that window is what it cannot see).
      for (let tries = 0; (await cli('lookup', used.access_key)).last_used_at == null && tries < 100; tries++) await sleep(20);
      await cli('rotate-keys', used.partner_id);
      // It minted a token within 15 minutes: that token may be live, so the brake for exactly that pair.
      const live = await cli('lookup', used.secret_key);
      expect(live).toMatchObject({ status: 'superseded', contain: `partnerctl revoke-keys ${used.partner_id} --key-pair ${used.key_pair_id} --yes` });
      expect((await cli('lookup', used.access_key)).contain).toBeNull();
      await cli('revoke-keys', used.partner_id, '--key-pair', used.key_pair_id);
      const revoked = await cli('lookup', used.secret_key);
      expect(revoked).toMatchObject({ status: 'revoked', contain: null });
      expect(revoked.note).toMatch(/nothing to contain/);
    });

    it('refuses bad input with one line naming the flag, exit 2, nothing written', async () => {
      const keys = await newPartner();
      // In-process (the same parsing and output as the binary's); the first through the real binary, the proof
      // that its process prints the same one line and exit code.
      const refuse = async (args: string[], flag: string, runner: typeof runCli = runCli) => {
        const result = await runner(['rotate-keys', keys.partner_id, ...args, '--yes'], backend.env);
        expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
        const lines = result.stderr.trim().split('\n');
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^partnerctl: invalid_argument: /);
        expect(lines[0]).toContain(flag);
        expect(result.stdout).toBe('');
      };
      await refuse(['--overlap', '1h', '--revoke-issued-tokens'], '--overlap', runBinary);
      await refuse(['--overlap', '31d'], '--overlap');
      await refuse(['--overlap', '0s'], '--overlap');
      await refuse(['--overlap', 'soon'], '--overlap');
      await refuse(['--overlap', '1h', '--after-switch', '2h'], '--after-switch');
      await refuse(['--after-switch', '5m'], '--after-switch');
      await refuse(['--finish', '--overlap', '1h'], '--finish');
      const json = await run('rotate-keys', keys.partner_id, '--overlap', '1h', '--revoke-issued-tokens');
      expect(json.code).toBe(2);
      expect(json.json().error.code).toBe('invalid_argument');
      // Nothing half-written: still the one active pair, nothing in the trail.
      const shown = await cli('show-partner', keys.partner_id);
      expect(shown.key_pairs.map((pair: Json) => [pair.key_pair_id, pair.status])).toEqual([[keys.key_pair_id, 'active']]);
      expect((await cli('audit', keys.partner_id, '--action', 'keys.rotated')).events).toEqual([]);
      // The edges that are allowed: 30d, and --after-switch 0s.
      expect(await cli('rotate-keys', keys.partner_id, '--overlap', '30d', '--after-switch', '0s')).toMatchObject({ after_switch: '0s' });
    });
  });
});
