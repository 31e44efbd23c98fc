// Pieces several command modules share: the partner argument, page sizes, durations. Light on purpose:
// every command module imports this at start-up.
import { AppError } from '../../errors.js';
import type { ArgumentDefinition } from '../definition.js';
import { askPartner, requireValue } from '../prompts.js';
import type { Session } from '../session.js';

/** The optional partner argument most commands take. */
export const PARTNER_ARGUMENT: ArgumentDefinition = {
  name: '[partner]',
  description: 'partner id, unique name, access key or key-pair id (asked for on a terminal when omitted)',
};

export const DURATION_HELP = 'a duration: 90d, 12h, 30m or 45s';

/** The partner named on the command line, or picked on a terminal; otherwise an error naming it. */
export async function resolvePartnerArgument(session: Session, partner: string | undefined): Promise<string> {
  return requireValue(session, partner, '<partner> (a partner id or name)', () => askPartner(session));
}

/** `--key-pair <kp_id>` (revoke-keys, rotate-keys): a key-pair id, checked before anything is asked or changed. */
export async function checkKeyPairOption(value: string | undefined): Promise<void> {
  if (value === undefined) return;
  const { KEY_PAIR_ID_PATTERN } = await import('../../domain/rules/identifiers.js');
  if (!KEY_PAIR_ID_PATTERN.test(value)) {
    throw new AppError('invalid_argument', `--key-pair must be a key-pair id (kp_…), got '${value.slice(0, 40)}'`);
  }
}

export function parseLimit(value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const limit = Number(value);
  if (!/^\d+$/.test(value) || limit < 1 || limit > 1000) {
    throw new AppError('invalid_argument', `--limit must be a whole number from 1 to 1000, got '${value}'`);
  }
  return limit;
}
