// `lookup -` on a terminal asks with the masked prompt (it used to echo the pasted secret and wait for
// Ctrl-D); from a pipe it reads stdin. And no help text or guide puts a secret on the command line.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { onTerminal, runBinary, runCli } from '../support/cli.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe.skipIf(process.platform !== 'linux')('lookup - on a terminal and from a pipe', () => {
  let backend: TestBackend;
  let secret: string;
  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    expect((await runCli(['create-partner', '--name', 'Leaky'], backend.env)).code).toBe(0);
    secret = (await runCli(['issue-keys', 'Leaky', '--json'], backend.env)).json().secret_key as string;
  });
  afterAll(() => backend.dispose());

  it('asks with a masked prompt on a terminal: the pasted secret is never echoed', async () => {
    const { code, screen } = await onTerminal(['lookup', '-'], backend.env, [[/Leaked value/, `${secret}\r`]]);
    expect(code, screen).toBe(0);
    expect(screen).toMatch(/a secret key of Leaky/);
    expect(screen).not.toContain(secret);
    expect(screen).toContain('*'.repeat(20));
  });

  it('exposure - asks the same way on a terminal: what lookup takes, it takes alike', async () => {
    const { code, screen } = await onTerminal(['exposure', '-'], backend.env, [[/Leaked value/, `${secret}\r`]]);
    expect(code, screen).toBe(0);
    expect(screen).not.toContain(secret);
    expect(screen).toContain('*'.repeat(20));
    const piped = await runBinary(['exposure', '-', '--json'], backend.env, { input: `${secret}\n` });
    expect(piped.code, piped.stderr).toBe(0);
  });

  it('reads stdin from a pipe, as before', async () => {
    const piped = await runBinary(['lookup', '-', '--json'], backend.env, { input: `${secret}\n` });
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.json()).toMatchObject({ kind: 'secret_key', genuine: true });
  });
});

/** Every file under `dir` whose name ends with `suffix`. */
function filesUnder(dir: string, suffix: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(suffix))
    .map((entry) => join(entry.parentPath, entry.name));
}

describe('no advice puts a secret on the command line', () => {
  it('no help text, hint or guide runs lookup with the value as an argument', () => {
    const files = [...filesUnder(join(ROOT, 'src/cli'), '.ts'), ...filesUnder(join(ROOT, 'docs'), '.md'), join(ROOT, 'README.md')];
    const offending = files.flatMap((file) =>
      readFileSync(file, 'utf8')
        .split('\n')
        // A key-pair id is no secret (show-partner and audit print it): `lookup kp_…` may be advised.
        .filter((line) => /partnerctl lookup +(?!-(\s|$))(?!kp_|\$\{[\w.]*keyPairId\})["'$<\w]/.test(line))
        .map((line) => `${file}: ${line.trim()}`),
    );
    expect(offending).toEqual([]);
  });

  it('no example relies on pbpaste alone', async () => {
    const lines = (await runCli(['help', 'lookup', '--json'], process.env)).json().examples as string[];
    expect(lines.some((line) => line.includes('pbpaste'))).toBe(true);
    expect(lines.some((line) => /wl-paste|xclip/.test(line))).toBe(true);
    const guide = readFileSync(join(ROOT, 'docs/leaked-credentials.md'), 'utf8');
    expect(guide).toMatch(/wl-paste|xclip/);
  });
});
