import { Command, Option } from 'commander';
import { VERSION } from '../config.js';
import { AppError } from '../errors.js';
import type { Output } from './output.js';
import type { GlobalOptions, Session } from './session.js';

/** What an action gets: the session, the output, and the command's own parsed options. */
type Action = (session: Session, out: Output, command: Command) => Promise<number | void>;

export type Runner = (command: Command, action: Action) => Promise<void>;

const ENVIRONMENT_HELP = `
Database:
  DATABASE_URL or --database-url selects it. Default: an SQLite file in the per-user data folder,
  $XDG_DATA_HOME/partnerctl/partnerctl.db (or ~/.local/share/partnerctl/partnerctl.db), created and
  migrated on first use. file:/path/x.db (or a plain path) for another SQLite file;
  postgresql://user@host:5432/db for PostgreSQL (migrate it once with 'partnerctl db migrate').

Environment:
  PARTNERCTL_SIGNING_KEY_FILE  token signing keys (default: signing-keys.json beside the SQLite file;
                               required on PostgreSQL); created with mode 0600 on first use
  PARTNERCTL_ACTOR             who is acting, for the audit trail (default: the OS user)
  PARTNERCTL_DB_POOL_SIZE      PostgreSQL connections per process (default 10 for serve, 2 otherwise)
  NO_COLOR                     no colour

Exit codes: 0 ok, 1 error, 2 bad usage, 3 not found, 4 conflict with the current state,
            5 database or service unavailable, 130 cancelled.
`;

/**
 * Builds the command tree. Only commander is loaded here; each action imports its own module when it runs,
 * so --help and bad usage stay fast.
 */
export function buildProgram(run: Runner): Command {
  const program = new Command('partnerctl')
    .description('Provision partners of the price-recommendation API, manage their keys, and serve the public API.')
    .version(VERSION, '-V, --version')
    .option('--database-url <url>', 'database URL (default: SQLite file in the per-user data folder; see below)')
    .option('--json', 'print exactly one JSON object on stdout (snake_case keys)')
    .option('--no-color', 'no colour in the output')
    .option('--no-input', 'never prompt; fail naming the missing flag instead')
    .option('-y, --yes', 'confirm destructive actions without asking')
    .option('--actor <name>', 'who is acting, for the audit trail (default: $PARTNERCTL_ACTOR or the OS user)')
    .option('--debug', 'show stack traces of errors')
    .addHelpText('after', ENVIRONMENT_HELP)
    .showSuggestionAfterError(true);

  const partner = '[partner]';
  const partnerHelp = 'partner id, unique name, access key or key-pair id (asked for on a terminal when omitted)';
  const durationHelp = 'a duration: 90d, 12h, 30m or 45s';

  program
    .command('create-partner')
    .description('create a partner account')
    .option('--name <name>', 'unique partner name (1-100 characters)')
    .option('--if-not-exists', 'succeed and return the existing partner when the name is taken')
    .addHelpText('after', '\nExample:\n  partnerctl create-partner --name "Acme Pricing" --json')
    .action((_options, command: Command) =>
      run(command, async (session, out) => {
        const { runCreatePartner } = await import('./commands/partners.js');
        await runCreatePartner(session, out, command.opts());
      }),
    );

  program
    .command('list-partners')
    .description('list partners, oldest first, a page at a time')
    .addOption(new Option('--status <status>', 'only partners with this status').choices(['active', 'disabled']))
    .option('--limit <n>', 'page size, 1-1000', '50')
    .option('--cursor <cursor>', 'continue after this cursor (printed at the end of a page; next_cursor in JSON)')
    .option('--company <company_id>', 'only the partners mapped to this company (support: who can reach it?)')
    .action((_options, command: Command) =>
      run(command, async (session, out) => {
        const { runListPartners } = await import('./commands/partners.js');
        await runListPartners(session, out, command.opts());
      }),
    );

  program
    .command('show-partner')
    .description('show a partner, its key pairs (never secrets), its company count and first 20 companies (list-companies for all)')
    .argument(partner, partnerHelp)
    .action((reference: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runShowPartner } = await import('./commands/partners.js');
        await runShowPartner(session, out, reference);
      }),
    );

  for (const [name, status, description] of [
    ['disable-partner', 'disabled', 'disable a partner: its keys mint nothing and its tokens are refused (asks to confirm)'],
    ['enable-partner', 'active', 'enable a disabled partner again'],
  ] as const) {
    program
      .command(name)
      .description(description)
      .argument(partner, partnerHelp)
      .action((reference: string | undefined, _options, command: Command) =>
        run(command, async (session, out) => {
          const { runSetPartnerStatus } = await import('./commands/partners.js');
          await runSetPartnerStatus(session, out, reference, status);
        }),
      );
  }

  program
    .command('issue-keys')
    .description('issue the first key pair of a partner; the secret is shown once (refused when one is active: use rotate-keys)')
    .argument(partner, partnerHelp)
    .option('--expires-in <duration>', `the pair mints nothing after this long (${durationHelp})`)
    .action((reference: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runIssueKeys } = await import('./commands/keys.js');
        await runIssueKeys(session, out, reference, command.opts());
      }),
    );

  program
    .command('rotate-keys')
    .description(
      'replace the active key pair in one transaction: the old pair mints nothing more, its tokens live out their 15 minutes',
    )
    .argument(partner, partnerHelp)
    .option(
      '--revoke-issued-tokens',
      'leaked key: also revoke the old and every superseded pair and refuse every token the partner holds (test tokens too), at once (asks to confirm)',
    )
    .option('--expires-in <duration>', `the new pair mints nothing after this long (${durationHelp})`)
    .addHelpText(
      'after',
      "\nExample (leaked secret, at 3 a.m.; 'partnerctl lookup <secret>' prints this line):\n  partnerctl rotate-keys ptn_… --revoke-issued-tokens --yes --json",
    )
    .action((reference: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runRotateKeys } = await import('./commands/keys.js');
        await runRotateKeys(session, out, reference, command.opts());
      }),
    );

  program
    .command('revoke-keys')
    .description(
      'revoke the live key pairs of a partner (no active pair is left) and refuse their tokens and its test tokens at once; nothing left to revoke exits 0, changed: false (asks to confirm)',
    )
    .argument(partner, partnerHelp)
    .option('--key-pair <kp_id>', 'revoke exactly this pair (active or superseded); its tokens are refused at once')
    .action((reference: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runRevokeKeys } = await import('./commands/keys.js');
        await runRevokeKeys(session, out, reference, command.opts());
      }),
    );

  program
    .command('revoke-tokens')
    .description(
      "leaked token, keys safe: refuse every token of the partner issued before now (test tokens too); keys untouched, the client re-exchanges once (asks to confirm)",
    )
    .argument(partner, partnerHelp)
    .action((reference: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runRevokeTokens } = await import('./commands/leaks.js');
        await runRevokeTokens(session, out, reference);
      }),
    );

  program
    .command('lookup')
    .description(
      'what a leaked value is and whose (access key, secret key, key-pair id, JWT or token id), whether it is genuine and accepted now, and the command that contains it',
    )
    .argument('[value]', "the leaked value; '-' reads it from stdin (kept out of the shell's history); asked for on a terminal when omitted")
    .addHelpText(
      'after',
      '\nExit codes: 0 found, 2 malformed (a wrong checksum says "checksum"), 3 matches nothing or cannot be traced.\nExample:\n  pbpaste | partnerctl lookup - --json | jq -r .contain',
    )
    .action((value: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runLookup } = await import('./commands/leaks.js');
        await runLookup(session, out, value);
      }),
    );

  program
    .command('list-keys')
    .description('list key pairs across partners (never a secret), oldest first, a page at a time')
    .option('--partner <partner>', 'only this partner (id, name, access key or key-pair id)')
    .addOption(
      new Option('--status <status>', 'only pairs with this status (expired: past --expires-in)').choices(['active', 'superseded', 'revoked', 'expired']),
    )
    .option('--older-than <duration>', `created longer ago than this (${durationHelp})`)
    .option('--expiring-within <duration>', `active and expiring within this, not yet expired (${durationHelp})`)
    .option('--unused-for <duration>', `live and not used for this long (${durationHelp})`)
    .option('--fail-if-any', 'exit 1 when the list is not empty (for a daily cron alert)')
    .option('--limit <n>', 'page size, 1-1000', '50')
    .option('--cursor <cursor>', 'continue after this cursor (next_cursor in JSON)')
    .addHelpText('after', '\nExample (daily cron):\n  partnerctl list-keys --status active --older-than 90d --fail-if-any --json')
    .action((_options, command: Command) =>
      run(command, async (session, out) => {
        const { runListKeys } = await import('./commands/leaks.js');
        return runListKeys(session, out, command.opts());
      }),
    );

  for (const [name, action, description] of [
    ['map-company', 'map', 'let a partner reach companies (succeeds, changing nothing, for those already mapped)'],
    ['unmap-company', 'unmap', 'stop a partner reaching companies (asks to confirm, stating the count; succeeds for those not mapped)'],
  ] as const) {
    program
      .command(name)
      .description(description)
      .argument(partner, partnerHelp)
      .option('--company <company_id>', 'a company id (visible ASCII, 1-128 characters); repeat for more', collect)
      .option('--from-file <path|->', "company ids, one per line ('#' comments and blank lines ignored; a .csv gives its first column, header skipped); '-' reads stdin")
      .addHelpText(
        'after',
        `\nAll ids are checked first: one bad line fails the command (exit 2) naming every bad line, and nothing changes.\nEvery id is ${action === 'map' ? 'mapped' : 'unmapped'} in one transaction.\n\nExample:\n  partnerctl ${name} acme --from-file companies.txt --json${action === 'unmap' ? ' --yes' : ''}`,
      )
      .action((reference: string | undefined, _options, command: Command) =>
        run(command, async (session, out) => {
          const { runMapping } = await import('./commands/companies.js');
          await runMapping(session, out, reference, command.opts(), action);
        }),
      );
  }

  program
    .command('list-companies')
    .description("list a partner's companies by id, a page at a time")
    .argument(partner, partnerHelp)
    .option('--limit <n>', 'page size, 1-1000', '100')
    .option('--cursor <cursor>', 'continue after this cursor (printed at the end of a page; next_cursor in JSON)')
    .action((reference: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runListCompanies } = await import('./commands/companies.js');
        await runListCompanies(session, out, reference, command.opts());
      }),
    );

  program
    .command('apply')
    .description('make the database match a document of partners (name, status, companies): plan, then apply in one transaction')
    .option('-f, --file <file|->', "the document, YAML or JSON ('-' reads stdin)")
    .option('--dry-run', 'print the plan only; change nothing')
    .option('--prune', 'also unmap the companies of the named partners that the document does not list (never removes a partner or a key)')
    .option('--issue-keys-to <file>', 'issue a key pair to each named partner without an active one; secrets go to this new file (mode 0600), never to stdout')
    .addHelpText(
      'after',
      `
The document:
  partners:
    - name: Acme Pricing
      status: active          # optional: absent keeps an existing partner's status; new partners are active
      companies: [company-1, company-2]   # optional: absent leaves the partner's mappings alone

Re-applying the same document changes nothing (exit 0, "changes": 0). Example:
  partnerctl export > partners.yaml && partnerctl apply -f partners.yaml --dry-run`,
    )
    .action((_options, command: Command) =>
      run(command, async (session, out) => {
        const { runApply } = await import('./commands/runbooks.js');
        await runApply(session, out, command.opts());
      }),
    );

  program
    .command('export')
    .description('print partners, their status and companies as a document for apply (YAML; JSON with --json)')
    .option('--partner <partner>', 'only this partner (id or name); repeat for more', collect)
    .action((_options, command: Command) =>
      run(command, async (session, out) => {
        const { runExport } = await import('./commands/runbooks.js');
        await runExport(session, out, command.opts());
      }),
    );

  program
    .command('completion')
    .description('print a shell completion script (commands, options, partner names)')
    .argument('[shell]', 'bash, zsh or fish')
    .addHelpText('after', '\nExamples:\n  eval "$(partnerctl completion bash)"\n  partnerctl completion fish > ~/.config/fish/completions/partnerctl.fish')
    .action((shell: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runCompletion } = await import('./commands/completion.js');
        await runCompletion(session, out, shell, command);
      }),
    );

  program
    .command('__complete-partners', { hidden: true })
    .argument('[prefix]')
    .action((prefix: string | undefined, _options, command: Command) =>
      run(command, async (session) => {
        const { runCompletePartners } = await import('./commands/completion.js');
        await runCompletePartners(session, prefix);
      }),
    );

  program
    .command('set-limits')
    .description("set a partner's data-request limits (the others keep the server's defaults); running servers apply them within a second")
    .argument(partner, partnerHelp)
    .option('--rate <n>/<s|m|h>', 'requests per second, minute or hour, e.g. 50/s')
    .option('--burst <n>', 'requests allowed at once after a quiet spell (default: the rate\'s count)')
    .option('--daily-quota <n>', 'requests per UTC day')
    .option('--clear', "drop the partner's own limits: the server's defaults apply again")
    .addHelpText('after', '\nExample:\n  partnerctl set-limits acme --rate 50/s --burst 100 --daily-quota 1000000')
    .action((reference: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runSetLimits } = await import('./commands/limits.js');
        await runSetLimits(session, out, reference, command.opts());
      }),
    );

  program
    .command('usage')
    .description('data requests counted by the servers, per partner (and company, hour or UTC day); heaviest first')
    .argument(partner, 'only this partner')
    .option('--since <time|duration>', 'hours from this ISO time, or this long ago (2h, 7d); default 24h')
    .option('--by <company|hour|day>', 'one row per partner and company, hour or UTC day (default: per partner)')
    .option('--limit <n>', 'how many rows, 1-1000', '50')
    .addHelpText(
      'after',
      '\nrequests = accepted + client_errors + server_errors; a 429 counts in client_errors and rate_limited.\n' +
        'Servers write their counts at least every 10 s: the newest seconds may not show yet.\n\n' +
        'Example: which partners hit the engines hardest this week, and which company?\n  partnerctl usage --since 7d --by company',
    )
    .action((reference: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runUsage } = await import('./commands/usage.js');
        await runUsage(session, out, reference, command.opts());
      }),
    );

  program
    .command('mint-test-token')
    .description("mint a token for trying the API as a partner (no key pair needed; prints just the token without --json)")
    .argument(partner, partnerHelp)
    .option('--ttl <seconds>', 'lifetime in seconds, at most 900', '900')
    .action((reference: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runMintTestToken } = await import('./commands/keys.js');
        await runMintTestToken(session, out, reference, command.opts());
      }),
    );

  program
    .command('audit')
    .description('show the audit trail, newest first')
    .argument(partner, 'only events of this partner')
    .option('--limit <n>', 'how many events, 1-1000', '50')
    .option('--since <time|duration>', 'only events at or after this ISO time, or this long ago (2h, 7d)')
    .option('--action <name>', 'only this action (keys.revoked, tokens.revoked, company.mapped…; the README lists them)')
    .option('--company <company_id>', 'only events whose details name this company')
    .option('--cursor <cursor>', 'continue after this cursor (next_cursor in JSON)')
    .action((reference: string | undefined, _options, command: Command) =>
      run(command, async (session, out) => {
        const { runAudit } = await import('./commands/audit.js');
        await runAudit(session, out, reference, command.opts());
      }),
    );

  const db = program.command('db').description('database maintenance');
  db.command('migrate')
    .description('apply pending migrations (needed once per release on PostgreSQL; SQLite migrates itself)')
    .action((_options, command: Command) =>
      run(command, async (session, out) => {
        const { runDbMigrate } = await import('./commands/maintenance.js');
        await runDbMigrate(session, out);
      }),
    );
  db.command('status')
    .description('show applied and pending migrations (exit 1 when not up to date)')
    .action((_options, command: Command) =>
      run(command, async (session, out) => {
        const { runDbStatus } = await import('./commands/maintenance.js');
        return runDbStatus(session, out);
      }),
    );

  const signingKey = program.command('signing-key').description('token signing keys');
  signingKey
    .command('rotate')
    .description('add a new current signing key; the previous one verifies its tokens until they expire')
    .option(
      '--new-file',
      'the key file is lost: start a new one although keys recorded in the database have signed tokens (every token they signed is refused from then on)',
    )
    .action((options: { newFile?: boolean }, command: Command) =>
      run(command, async (session, out) => {
        const { runSigningKeyRotate } = await import('./commands/maintenance.js');
        await runSigningKeyRotate(session, out, options);
      }),
    );

  program
    .command('serve')
    .description('run the public partner API (POST /public/v1/auth/token and the data endpoints)')
    .option('--host <host>', 'address to listen on (env HOST, default 127.0.0.1)')
    .option('--port <port>', 'port to listen on (env PORT, default 8080; 0 picks a free one)')
    .option('--upstream <url>', 'recommendation engine base URL (env PUBLIC_API_UPSTREAM_URL)')
    .option('--metrics-port <port>', 'serve GET /metrics (Prometheus) on this port, never the public one (env PUBLIC_API_METRICS_PORT; default off)')
    .option('--metrics-host <host>', 'address of the metrics listener (env PUBLIC_API_METRICS_HOST, default 127.0.0.1)')
    .addHelpText('after', '\nSee the README section "Running the server" for every environment variable.')
    .action((_options, command: Command) =>
      run(command, async (session) => {
        const { runServer } = await import('../http/server/server.js');
        await runServer({ config: session.config, databaseUrl: session.options.databaseUrl }, session.terminal);
      }),
    );

  return program;
}

/** A repeatable option's values, in order. */
function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

export type { GlobalOptions };
