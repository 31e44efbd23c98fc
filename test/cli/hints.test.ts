import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { hintFor, messageFor } from '../../src/cli/hints.js';
import { checkRotationOptions } from '../../src/domain/operations/key-pairs.js';
import { parseWait } from '../../src/domain/runtime/receipts.js';
import { validateCompanyId, validatePartnerName } from '../../src/domain/rules/validation.js';
import { AppError } from '../../src/errors.js';

function thrown(fn: () => unknown): AppError {
  try {
    fn();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected an AppError');
}

describe('CLI hints: the domain names the field, the CLI names the flag', () => {
  it('names the flag of the field a validation error is about, and the domain message names no flag', () => {
    const name = thrown(() => validatePartnerName(''));
    expect(name.field).toBe('name');
    expect(name.message).not.toMatch(/--/);
    expect(hintFor(name)).toBe('--name <name>');
    const company = thrown(() => validateCompanyId('a b'));
    expect(company.message).not.toMatch(/--/);
    expect(hintFor(company)).toBe('--company <company_id>');
  });

  it('suggests the next command for state conflicts, and keeps a hint the error carries itself', () => {
    expect(hintFor(new AppError('no_active_key_pair', 'x'))).toBe("use 'partnerctl issue-keys' to issue one");
    expect(hintFor(new AppError('partner_not_found', 'x'))).toBe("see 'partnerctl list-partners'");
    expect(hintFor(new AppError('database_unavailable', 'x', { hint: 'own hint' }))).toBe('own hint');
    expect(hintFor(new AppError('internal_error', 'x'))).toBeUndefined();
  });

  it('names the flag where the domain message names the field, and leaves other messages as they are', () => {
    const cases: [AppError, string][] = [
      [thrown(() => checkRotationOptions({ overlapMs: 60_000, revokeIssuedTokens: true })), '--overlap cannot be combined with revoking the issued tokens'],
      [thrown(() => checkRotationOptions({ afterSwitchMs: 0 })), '--after-switch needs an overlap'],
      [thrown(() => parseWait('soon')), "--wait must be a duration such as 500ms, 3s or 1m (at most 10m), got 'soon'"],
    ];
    for (const [error, rendered] of cases) {
      expect(error.message, rendered).not.toMatch(/--|partnerctl/);
      expect(messageFor(error)).toContain(rendered);
    }
    expect(messageFor(new AppError('invalid_argument', "events: unknown event 'nope'", { field: 'events' }))).toBe("--events: unknown event 'nope'");
    expect(hintFor(new AppError('invalid_argument', 'url must be https://', { field: 'url' }))).toContain('--insecure');
    // A message that does not open with its field is not rewritten.
    expect(messageFor(new AppError('invalid_argument', 'a limit of 5', { field: 'limit' }))).toBe('a limit of 5');
    expect(messageFor(new AppError('invalid_argument', 'limits must be…', { field: 'limit' }))).toBe('limits must be…');
  });

  it('follows a domain suggestion with where to look, and gives the command lines the domain no longer writes', () => {
    expect(hintFor(new AppError('partner_not_found', 'x', { field: 'partner', hint: "did you mean 'Acme' (ptn_1)?" }))).toBe(
      "did you mean 'Acme' (ptn_1)? see 'partnerctl list-partners'",
    );
    expect(hintFor(new AppError('partner_not_found', 'x', { field: 'partner' }))).toBe("see 'partnerctl list-partners'");
    expect(hintFor(new AppError('not_found', 'x', { field: 'webhook' }))).toBe("see 'partnerctl webhooks list'");
    expect(hintFor(new AppError('invalid_argument', 'x', { field: 'secret_key' }))).toBe("use 'partnerctl lookup' on it");
    expect(hintFor(new AppError('signing_key_unavailable', 'x', { field: 'signing_key_file' }))).toContain("'partnerctl signing-key rotate --new-file'");
    expect(hintFor(new AppError('schema_out_of_date', 'x'))).toBe("run 'partnerctl db migrate' once as the database's owner");
    expect(hintFor(new AppError('database_unavailable', 'x'))).toBe('run again with --debug to see the database error');
  });

  it('gives every field the domain names its CLI words: a flag in the message, or a hint', () => {
    const domain = new URL('../../src/domain/', import.meta.url);
    const fields = new Set<string>();
    for (const file of readdirSync(domain, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'))) {
      for (const match of readFileSync(new URL(file, domain), 'utf8').matchAll(/\bfield: '([a-z_]+)'/g)) fields.add(match[1]!);
    }
    expect(fields.size).toBeGreaterThan(10);
    for (const field of fields) {
      const error = new AppError('invalid_argument', `${field} is wrong`, { field });
      expect(messageFor(error) !== error.message || hintFor(error) !== undefined, field).toBe(true);
    }
  });
});
