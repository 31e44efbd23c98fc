import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import type { Output } from '../output.js';
import type { Session } from '../session.js';
import { say } from '../say.js';
import { AppError } from '../../errors.js';
import { PARTNER_ARGUMENT, resolvePartnerArgument } from './common.js';
import { CREDENTIALS_WORDS } from './partners.js';

const SET_CREDENTIALS_OPTIONS = defineOptions([
  { flags: '--allow <kind>', description: 'secret, public-key or both (the default): which key pairs may exchange for tokens' },
]);

export const setCredentialsCommand = defineCommand({
  name: 'set-credentials',
  changes: true,
  group: 'Keys and leaks',
  summary: 'allow a partner shared secrets, public keys or both',
  description:
    "allow a partner's shared-secret pairs, its public-key pairs (private_key_jwt) or both at the token endpoint; the next exchange on every server obeys",
  arguments: [PARTNER_ARGUMENT],
  options: SET_CREDENTIALS_OPTIONS,
  notes:
    'A pair of a kind not allowed is refused like a wrong secret (reason credential_kind_not_allowed, on record: ' +
    "partnerctl explain). Tokens already issued live out their 15 minutes. 'partnerctl list-partners' shows which " +
    'partners still hold an active shared secret.',
  examples: [
    {
      caption: 'migrate a partner off shared secrets, once its public key is registered and used',
      lines: ['partnerctl set-credentials acme --allow public-key', 'partnerctl revoke-keys acme --key-pair kp_…'],
    },
  ],
  run: (session, out, { args, options }) => runSetCredentials(session, out, args[0], options),
});

async function runSetCredentials(session: Session, out: Output, partnerArgument: string | undefined, options: OptionsOf<typeof SET_CREDENTIALS_OPTIONS>) {
  if (options.allow === undefined) throw new AppError('missing_argument', 'give --allow secret, --allow public-key or --allow both', { field: 'allow' });
  const { isCredentialsPolicy, setCredentialsPolicy } = await import('../../domain/operations/credentials-policy.js');
  // A bad value is named before anything is asked of the database (exit 2).
  if (!isCredentialsPolicy(options.allow)) {
    throw new AppError('invalid_argument', `--allow must be secret, public-key or both, got '${options.allow.slice(0, 40)}'`, { field: 'allow' });
  }
  const reference = await resolvePartnerArgument(session, partnerArgument);
  const db = await session.db();
  const result = await setCredentialsPolicy(db, session.who, reference, options.allow);
  if (out.json) {
    out.emitJson({ partner_id: result.partner.id, name: result.partner.name, credentials: result.policy, changed: result.changed });
    return;
  }
  const who = `partner ${result.partner.name} (${result.partner.id})`;
  const words = CREDENTIALS_WORDS[result.policy];
  out.line(result.changed ? say`Credentials of ${who}: ${words}` : say`Credentials of ${who} were already: ${words}; nothing changed`);
}
