import { describe, expect, it } from 'vitest';
import { hintFor } from '../../src/cli/hints.js';
import { validateCompanyId, validatePartnerName } from '../../src/domain/validation.js';
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
});
