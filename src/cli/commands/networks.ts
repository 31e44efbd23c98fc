import { AppError } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import type { Output } from '../output.js';
import type { Session } from '../session.js';
import { PARTNER_ARGUMENT, resolvePartnerArgument } from './common.js';
import { say } from '../say.js';

const SET_NETWORK_OPTIONS = defineOptions([
  { flags: '--allow <cidr>', description: 'an address or CIDR, IPv4 or IPv6 (repeat for more); replaces the rules', repeatable: true },
  { flags: '--clear', description: 'drop the rules: any client address again' },
]);

export const setNetworkCommand = defineCommand({
  name: 'set-network',
  changes: true,
  group: 'Limits and usage',
  summary: "allow a partner's credentials only from these addresses",
  description:
    "allow a partner's keys and tokens only from these client addresses (CIDRs), or --clear for anywhere; running servers apply it within a second",
  arguments: [PARTNER_ARGUMENT],
  options: SET_NETWORK_OPTIONS,
  notes:
    'From any other address the token exchange and data requests get 403 address_not_allowed. An exchange ' +
    "refused so with the pair's genuine secret is recorded: lookup and list-keys show it " +
    '(refused_from_unlisted_address_at). Client addresses behind a balancer: PUBLIC_API_TRUSTED_PROXIES.',
  examples: [{ lines: ['partnerctl set-network acme --allow 203.0.113.0/24 --allow 2001:db8::/48', 'partnerctl set-network acme --clear'] }],
  run: (session, out, { args, options }) => runSetNetwork(session, out, args[0], options),
});

async function runSetNetwork(session: Session, out: Output, partnerArgument: string | undefined, options: OptionsOf<typeof SET_NETWORK_OPTIONS>): Promise<void> {
  const allow = options.allow ?? [];
  if (options.clear && allow.length > 0) {
    throw new AppError('invalid_argument', '--clear drops every rule; it is not combined with --allow', { field: 'clear' });
  }
  if (!options.clear && allow.length === 0) throw new AppError('missing_argument', 'give --allow <cidr> (one or more) or --clear', { field: 'allow' });
  const { canonicalRules, setNetwork } = await import('../../domain/operations/networks.js');
  // A bad CIDR is named before anything is asked of the database (exit 2).
  canonicalRules(allow);
  const reference = await resolvePartnerArgument(session, partnerArgument);
  const db = await session.db();
  const result = await setNetwork(db, session.who, reference, options.clear ? [] : allow);
  if (out.json) {
    out.emitJson({ partner_id: result.partner.id, name: result.partner.name, network: { allow: result.allow }, changed: result.changed });
    return;
  }
  const rules = result.allow.length === 0 ? 'any client address' : result.allow.join(', ');
  const who = `partner ${result.partner.name} (${result.partner.id})`;
  out.line(result.changed ? say`Network of ${who}: ${rules}` : say`Network of ${who} was already: ${rules}; nothing changed`);
  if (result.changed) out.line(say`Running servers apply it within a second.`);
}
