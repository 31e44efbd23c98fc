// Shell completion as a person gets it: each shell started for real in tmux with partnerctl's completion script
// loaded, keys typed, the screen read. Partner names with spaces must complete whole, whether the word is
// typed with backslashes (Runbook\ A) or in quotes ("Run).
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { BIN, runCli } from '../support/cli.js';

const has = (program: string) => spawnSync('sh', ['-c', `command -v ${program}`]).status === 0;
const SHELLS = [
  { shell: 'bash', start: ['bash', '--norc', '--noprofile'], load: (script: string) => `source ${script}` },
  { shell: 'zsh', start: ['zsh', '-f'], load: (script: string) => `autoload -U compinit && compinit -u && source ${script}` },
  { shell: 'fish', start: ['fish', '--no-config'], load: (script: string) => `source ${script}` },
] as const;

for (const { shell } of SHELLS) {
  if (!has('tmux') || !has(shell)) {
    console.warn(`[completion] SKIPPED for ${shell}: ${has('tmux') ? shell : 'tmux'} is not installed (apt-get install -y tmux zsh fish)`);
  }
}

describe.each(SHELLS)('completion in a real $shell (tmux)', ({ shell, start, load }) => {
  describe.skipIf(!has('tmux') || !has(shell))('', () => {
    let backend: TestBackend;
    const socket = `partnerctl-test-${process.pid}-${shell}`;
    const tmux = (...args: string[]) => spawnSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
    const screen = () => tmux('capture-pane', '-p', '-t', 'test').stdout;
    /** Waits until the screen shows `pattern` (each Tab runs partnerctl, a node process). */
    const until = async (pattern: RegExp): Promise<string> => {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const shown = screen();
        if (pattern.test(shown)) return shown;
        if (Date.now() > deadline) throw new Error(`${shell}: the screen never showed ${pattern}:\n${shown}`);
        await sleep(100);
      }
    };
    const type = (text: string) => tmux('send-keys', '-t', 'test', '-l', text);
    const key = (name: string) => tmux('send-keys', '-t', 'test', name);

    beforeAll(async () => {
      backend = await createBackend('sqlite', { migrated: true });
      for (const name of ['Runbook Alpha', 'Runbook Beta', 'Acme Pricing']) {
        expect((await runCli(['create-partner', '--name', name], backend.env)).code).toBe(0);
      }
      const binDir = join(backend.dir, 'bin');
      mkdirSync(binDir, { recursive: true });
      writeFileSync(join(binDir, 'partnerctl'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} "$@"\n`);
      chmodSync(join(binDir, 'partnerctl'), 0o755);
      const script = join(backend.dir, `completion.${shell}`);
      writeFileSync(script, (await runCli(['completion', shell], backend.env)).stdout);
      const env = { ...backend.env, PATH: `${binDir}:${process.env.PATH}`, PS1: '$ ', TERM: 'xterm', HOME: backend.dir, HISTFILE: '/dev/null' };
      const started = spawnSync('tmux', ['-L', socket, 'new-session', '-d', '-s', 'test', '-x', '160', '-y', '40', ...start], { env, encoding: 'utf8' });
      expect(started.status, started.stderr).toBe(0);
      await sleep(500);
      type(load(script));
      key('Enter');
      await sleep(1_000);
    });
    afterAll(async () => {
      tmux('kill-server');
      // A shell may still be writing its history or variables under the folder removed next.
      await sleep(300);
      await backend?.dispose();
    });

    it('completes a name with a space typed with a backslash, whole', async () => {
      key('C-u');
      type('partnerctl show-partner R');
      key('Tab');
      // Two names start so: the common part first, then the one chosen.
      await until(/show-partner Runbook\\/);
      type('A');
      key('Tab');
      await until(/show-partner Runbook\\ Alpha/);
    });

    it('completes a name inside quotes, whole', async () => {
      key('C-u');
      await sleep(200);
      type('partnerctl show-partner "Runbook B');
      key('Tab');
      await until(/show-partner "Runbook Beta"/);
    });

    it('completes a unique prefix to the whole name at once', async () => {
      key('C-u');
      await sleep(200);
      type('partnerctl show-partner Ac');
      key('Tab');
      await until(/show-partner Acme\\ Pricing/);
    });
  });
});
