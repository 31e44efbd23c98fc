// The README's install command and first session, run as written (all but `serve`) on a fresh embedded
// default: each line must succeed where the one before left things, and the partner's side must set what it
// uses.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN } from './support/cli.js';

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** The shell blocks of a section (`## title` up to the next `## `). */
function blocks(title: string): string[] {
  const start = README.indexOf(`## ${title}\n`);
  const section = README.slice(start, README.indexOf('\n## ', start + 1));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);
}

describe("the README's first session", () => {
  const home = mkdtempSync(join(tmpdir(), 'partnerctl-readme-'));
  afterAll(() => rmSync(home, { recursive: true, force: true }));
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_DATA_HOME: join(home, 'data'), XDG_CONFIG_HOME: join(home, 'config'), NO_COLOR: '1' };
  delete env.DATABASE_URL;
  delete env.PARTNERCTL_SIGNING_KEY_FILE;
  const run = (line: string) =>
    spawnSync('bash', ['-c', `partnerctl() { ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} "$@"; }\n${line}`], { env, encoding: 'utf8' });

  it('runs the install command, then every operator line of the first session, each exiting 0', () => {
    const install = blocks('Two commands')[0]!;
    const provisioning = [...install.matchAll(/npx (partnerctl [^&\n]+?)\s*(?:&&|$)/gm)].map((match) => match[1]!);
    expect(provisioning.length).toBeGreaterThan(0);
    const session = blocks('A first session')
      .flatMap((block) => block.split('\n'))
      .map((line) => line.replace(/\s+#.*$/, '').trim())
      .filter((line) => line.startsWith('partnerctl ') && !line.startsWith('partnerctl serve'));
    expect(session.length).toBeGreaterThan(3);
    for (const line of [...provisioning, ...session]) {
      const result = run(`${line} >/dev/null`);
      expect(result.status, `${line}\n${result.stderr}`).toBe(0);
    }
  });

  it("sets every variable the partner's side uses before using it", () => {
    const partner = blocks('A first session').find((block) => block.includes('curl'))!;
    const lines = partner.replace(/\\\n/g, ' ').split('\n');
    for (const [index, line] of lines.entries()) {
      for (const [, name] of line.matchAll(/\$([A-Z_]+)\b/g)) {
        expect(lines.slice(0, index).some((earlier) => new RegExp(`^${name}=`).test(earlier)), `$${name} used before it is set: ${line}`).toBe(true);
      }
    }
  });
});
