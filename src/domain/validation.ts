import { AppError } from '../errors.js';

// C0 and C1 control characters, DEL, and the Unicode line/paragraph separators and bidi controls that
// make a name print differently from what it is.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

export const PARTNER_NAME_MAX = 100;
export const COMPANY_ID_MAX = 128;

export function validatePartnerName(value: string): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new AppError('invalid_argument', 'partner name must not be empty', { field: 'name' });
  }
  if (value !== value.trim()) {
    throw new AppError('invalid_argument', 'partner name must not start or end with white space', { field: 'name' });
  }
  if ([...value].length > PARTNER_NAME_MAX) {
    throw new AppError('invalid_argument', `partner name is longer than ${PARTNER_NAME_MAX} characters`, { field: 'name' });
  }
  if (CONTROL.test(value)) {
    throw new AppError('invalid_argument', 'partner name contains a control character', { field: 'name' });
  }
  if (/^ptn_/i.test(value)) {
    throw new AppError('invalid_argument', "partner name must not start with 'ptn_' (that prefix is for partner ids)", { field: 'name' });
  }
  return value.normalize('NFC');
}

/** Company ids are the engines' identifiers: visible ASCII, no spaces, 1 to 128 characters. */
export function isValidCompanyId(value: unknown): value is string {
  return typeof value === 'string' && /^[\x21-\x7e]{1,128}$/.test(value);
}

export function validateCompanyId(value: string): string {
  if (!isValidCompanyId(value)) {
    const text: string = String(value ?? '');
    const problem =
      text === ''
        ? 'must not be empty'
        : text.length > COMPANY_ID_MAX
          ? `is longer than ${COMPANY_ID_MAX} characters`
          : 'may hold only visible ASCII characters (no spaces or control characters)';
    throw new AppError('invalid_argument', `company id ${problem}`, { field: 'company_id' });
  }
  return value;
}
