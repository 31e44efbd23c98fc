import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

/**
 * `lookup` given forged tokens whose time claims no Date can hold (or that no token of ours carries): a
 * proper answer (forged, genuine false), never internal_error "Invalid time value".
 */

const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
const forge = (claims: Record<string, unknown>) =>
  `${b64({ alg: 'EdDSA', kid: 'k-made-up', typ: 'JWT' })}.${b64(claims)}.${Buffer.from('not a signature of ours').toString('base64url')}`;

describe('lookup of forged tokens with absurd dates (sqlite)', () => {
  let backend: TestBackend;
  let partnerId: string;
  let keyPairId: string;

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    const created = await runCli(['--json', 'create-partner', '--name', 'Dated'], backend.env);
    expect(created.code, created.stderr).toBe(0);
    partnerId = created.json<{ partner_id: string }>().partner_id;
    const keys = await runCli(['--json', 'issue-keys', 'Dated'], backend.env);
    expect(keys.code, keys.stderr).toBe(0);
    keyPairId = keys.json<{ key_pair_id: string }>().key_pair_id;
  });
  afterAll(async () => {
    await backend?.dispose();
  });

  const now = Math.floor(Date.now() / 1000);
  const cases: [string, Record<string, unknown>][] = [
    ['iat 1e20, exp 1e300', { iat: 1e20, exp: 1e300 }],
    ['negative iat', { iat: -5, exp: now + 60 }],
    ['iat -1e20', { iat: -1e20, exp: now + 60 }],
    ['exp 1e300 only', { iat: now, exp: 1e300 }],
    ['iat 1e20 only', { iat: 1e20, exp: now + 60 }],
  ];

  it.each(cases)('%s: exit 0, forged, genuine false, in JSON and in the table', async (_label, times) => {
    const token = forge({ sub: partnerId, kp: keyPairId, iss: 'partnerctl', aud: 'public-api', jti: 'x', ...times });
    const json = await runCli(['--json', 'lookup', token], backend.env);
    expect(json.code, json.stderr).toBe(0);
    expect(json.json()).toMatchObject({ kind: 'token', partner_id: partnerId, genuine: false, accepted: false, status: 'forged' });
    const table = await runCli(['lookup', token], backend.env);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stderr).not.toMatch(/internal_error|Invalid time value/);
    expect(table.stdout).toMatch(/NO/);
  });
});
