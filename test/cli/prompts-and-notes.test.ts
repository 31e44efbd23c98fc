// What a person at a terminal sees (the real binary on a pseudo-terminal): one "cancelled" on Ctrl-C, a taken
// name asked again, questions that name the database they change and what they drop; and the notes of
// list-partners and serve.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { onTerminal, runCli } from '../support/cli.js';
import { serveInProcess } from '../support/serve.js';

describe.skipIf(process.platform !== 'linux')('prompts on a terminal', () => {
  let backend: TestBackend;
  const database = () => `${backend.dir}/partnerctl.db`;
  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    expect((await runCli(['create-partner', '--name', 'Taken Name'], backend.env)).code).toBe(0);
  });
  afterAll(() => backend.dispose());

  it('says "cancelled" once on Ctrl-C, exit 130', async () => {
    const { code, screen } = await onTerminal(['create-partner'], backend.env, [[/Partner name/, '\u0003']]);
    expect(code, screen).toBe(130);
    expect(screen).toMatch(/partnerctl: cancelled: nothing changed/);
    expect(screen.match(/cancelled/g)).toHaveLength(1);
  });

  it('asks again for a name that is taken, instead of failing after the prompt', async () => {
    const { code, screen } = await onTerminal(['create-partner'], backend.env, [
      [/Partner name/, 'taken name\r'],
      [/'Taken Name' is taken \(ptn_\w+\); type another name/, '\u0015Fresh Name\r'],
    ]);
    expect(code, screen).toBe(0);
    expect(screen).toMatch(/Created partner Fresh Name/);
  });

  it('names the database in every confirmation', async () => {
    const { code, screen } = await onTerminal(['disable-partner', 'Fresh Name'], backend.env, [[/\(y\/N\)/, 'n\r']]);
    expect(code, screen).toBe(130);
    expect(screen.replace(/\r?\n/g, '')).toContain(` in ${database()}?`);
  });

  it('asks before removing a webhook, stating the pending deliveries it drops', async () => {
    const id = (await runCli(['webhooks', 'add', '--url', 'https://ops.example.com/hooks', '--json'], backend.env)).json().id as string;
    expect((await runCli(['issue-keys', 'Fresh Name'], backend.env)).code).toBe(0);
    const refused = await onTerminal(['webhooks', 'remove', id], backend.env, [[/\(y\/N\)/, 'n\r']]);
    expect(refused.code, refused.screen).toBe(130);
    expect(refused.screen.replace(/\r?\n/g, '')).toMatch(new RegExp(`Remove webhook ${id} \\(https://ops\\.example\\.com/hooks\\), dropping 1 pending delivery in `));
    expect((await runCli(['webhooks', 'list', '--json'], backend.env)).json().webhooks).toHaveLength(1);
    const confirmed = await onTerminal(['webhooks', 'remove', id], backend.env, [[/\(y\/N\)/, 'y\r']]);
    expect(confirmed.code, confirmed.screen).toBe(0);
    expect(confirmed.screen).toMatch(/Removed webhook wh_\w+ \(.*\); 1 pending delivery dropped\./);
  });
});

describe('notes', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    expect((await runCli(['create-partner', '--name', 'Only Active'], backend.env)).code).toBe(0);
  });
  afterAll(() => backend.dispose());

  it('list-partners --status with none of that status says so', async () => {
    expect((await runCli(['list-partners', '--status', 'disabled'], backend.env)).stdout).toBe('No disabled partners.\n');
    expect((await runCli(['list-partners', '--status', 'active'], backend.env)).stdout).toMatch(/Only Active/);
  });

  it("serve's log is written for a person on a terminal, as JSON lines through a pipe", async () => {
    const { code, screen } = await onTerminal(['serve', '--port', '0'], { ...backend.env, NO_COLOR: '1' }, [[/listening on/, '\u0003']]);
    // Ctrl-C once it is listening: a clean stop.
    expect(code, screen).toBe(0);
    expect(screen).toMatch(/^\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO: serve instance registered$/m);
    expect(screen).not.toContain('{"level"');
    const piped = await serveInProcess(backend.env);
    try {
      // The log is written in batches (every 250 ms): wait for it rather than for a fixed time.
      await vi.waitFor(() => expect(piped.stdout()).toMatch(/^\{"level":30,"time":"[^"]+","instance_id":"srv_\w+"[^\n]*"msg":"serve instance registered"\}$/m), {
        timeout: 5_000,
        interval: 25,
      });
    } finally {
      await piped.stop();
    }
  });

  it('serve without an upstream says on start that data requests will get 503', async () => {
    const { PUBLIC_API_UPSTREAM_URL: _unset, ...env } = backend.env;
    const served = await serveInProcess(env);
    try {
      expect(served.stderr()).toMatch(/partnerctl serve: no upstream engine \(--upstream \/ PUBLIC_API_UPSTREAM_URL\): data requests will get 503 upstream_unavailable/);
    } finally {
      await served.stop();
    }
    const withUpstream = await serveInProcess({ ...env, PUBLIC_API_UPSTREAM_URL: 'http://127.0.0.1:9' });
    try {
      expect(withUpstream.stderr()).not.toMatch(/no upstream/);
    } finally {
      await withUpstream.stop();
    }
  });
});
