// Rates and counts as operators write them (`50/s`, `3000/m`): plain parsing, no database.
import { AppError } from './errors.js';

/** `count` requests per `periodSeconds` (1, 60 or 3600). */
export interface Rate {
  count: number;
  periodSeconds: number;
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600 };
export const MAX_COUNT = 1_000_000_000;

/** `50/s`, `3000/m`, `100000/h`. */
export function parseRate(text: string, field = 'rate'): Rate {
  const match = /^\s*(\d{1,10})\s*\/\s*([smh])\s*$/.exec(text);
  const count = match ? Number(match[1]) : NaN;
  if (!match || count < 1 || count > MAX_COUNT) {
    throw new AppError('invalid_argument', `${field} must look like 50/s, 3000/m or 100000/h (a whole number from 1 to ${MAX_COUNT}), got '${text}'`, { field });
  }
  return { count, periodSeconds: UNITS[match[2]!]! };
}

export function formatRate(rate: Rate): string {
  const unit = Object.keys(UNITS).find((key) => UNITS[key] === rate.periodSeconds) ?? 's';
  return `${rate.count}/${unit}`;
}

export function parseCount(text: string, field: string): number {
  const value = Number(text);
  if (!/^\s*\d+\s*$/.test(text) || value < 1 || value > MAX_COUNT) {
    throw new AppError('invalid_argument', `${field} must be a whole number from 1 to ${MAX_COUNT}, got '${text}'`, { field });
  }
  return value;
}

