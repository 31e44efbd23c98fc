// `audit --action`: one vocabulary (src/domain/audit-actions.ts), every name outside it refused with the
// nearest ones, and the documents listing exactly it.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_ACTIONS } from '../../src/domain/rules/audit-actions.js';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

describe('audit --action', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    expect((await runCli(['create-partner', '--name', 'Acme'], backend.env)).code).toBe(0);
    expect((await runCli(['set-network', 'Acme', '--allow', '10.0.0.0/8'], backend.env)).code).toBe(0);
  });
  afterAll(() => backend.dispose());

  it('refuses a typo of a real action (exit 2) naming the nearest, instead of answering "No audit events."', async () => {
    const typo = await runCli(['audit', '--action', 'keys.rotate'], backend.env);
    expect(typo.code).toBe(2);
    expect(typo.stdout).toBe('');
    expect(typo.stderr).toMatch(/^partnerctl: invalid_argument: no audit action 'keys\.rotate'; did you mean keys\.rotated[,?]/);
  });

  it('refuses any unknown action with the complete vocabulary, partner.network_set included', async () => {
    const unknown = await runCli(['audit', '--action', 'foo', '--json'], backend.env);
    expect(unknown.code).toBe(2);
    expect(unknown.json().error.hint).toBe(`the actions: ${AUDIT_ACTIONS.join(', ')}`);
    expect(AUDIT_ACTIONS).toContain('partner.network_set');
  });

  it('accepts every action of the vocabulary, and finds what the domain recorded under it', async () => {
    for (const action of AUDIT_ACTIONS) {
      const result = await runCli(['audit', '--action', action, '--json'], backend.env);
      expect(result.code, `${action}: ${result.stderr}`).toBe(0);
    }
    const network = (await runCli(['audit', '--action', 'partner.network_set', '--json'], backend.env)).json();
    expect(network.events.map((event: { action: string }) => event.action)).toEqual(['partner.network_set']);
  });

  it('is listed whole, in order, in the operator guide and in audit --help', async () => {
    const guide = readFileSync(new URL('../../docs/operator-guide.md', import.meta.url), 'utf8');
    const section = guide.slice(guide.indexOf('## Audit actions'), guide.indexOf('\n## ', guide.indexOf('## Audit actions') + 1));
    expect([...section.matchAll(/`([a-z_]+\.[a-z_]+)`/g)].map((match) => match[1])).toEqual([...AUDIT_ACTIONS]);
    const help = (await runCli(['audit', '--help'], backend.env)).stdout.replace(/\s+/g, ' ');
    for (const action of AUDIT_ACTIONS) expect(help).toContain(action);
  });
});
