// The command tree: the global options, and the commands in the order the help lists them. Each command's
// flags, help and run function live in its own module under commands/; this file only lists them.
import { Command, CommanderError, Option } from 'commander';
import { VERSION } from '../config.js';
import { applyCommand, exportCommand } from './commands/runbooks.js';
import { auditCommand } from './commands/audit.js';
import { completePartnersCommand, completionCommand } from './commands/completion.js';
import { contextCommand } from './commands/context.js';
import { listCompaniesCommand, mapCompanyCommand, unmapCompanyCommand } from './commands/companies.js';
import { issueKeysCommand, mintTestTokenCommand, revokeKeysCommand, rotateKeysCommand } from './commands/keys.js';
import { listKeysCommand, lookupCommand, revokeTokensCommand } from './commands/leaks.js';
import { setLimitsCommand } from './commands/limits.js';
import { dbCommand, signingKeyCommand } from './commands/maintenance.js';
import { setNetworkCommand } from './commands/networks.js';
import { recordCommand } from './commands/recording.js';
import { setCredentialsCommand } from './commands/credentials.js';
import {
  createPartnerCommand,
  disablePartnerCommand,
  enablePartnerCommand,
  listPartnersCommand,
  showPartnerCommand,
} from './commands/partners.js';
import { instancesCommand } from './commands/instances.js';
import { receiptCommand } from './commands/receipt.js';
import { serveCommand } from './commands/serve.js';
import { usageCommand } from './commands/usage.js';
import { explainCommand } from './commands/explain.js';
import { exposureCommand } from './commands/exposure.js';
import { refusalsCommand } from './commands/refusals.js';
import { requestsCommand } from './commands/requests.js';
import { webhooksCommand } from './commands/webhooks.js';
import { defineCommand, type CommandDefinition } from './definition.js';
import { GLOBAL_OPTIONS } from './global-options.js';
import { configureHelp, showHelp } from './help.js';
import type { OptionDefinition } from './options.js';

/** Runs a command's definition once commander has parsed its command line. */
export type Runner = (command: Command, definition: CommandDefinition) => Promise<void>;

/** The program itself: the options every command accepts, and what its help says after the commands. */
export const PROGRAM = defineCommand({
  name: 'partnerctl',
  description: 'Provision partners of the price-recommendation API and serve its public API.',
  options: GLOBAL_OPTIONS,
  notes: `Database:
  --database-url, else --context, else DATABASE_URL, else the current context
  ('partnerctl context use') selects it: a flag wins over DATABASE_URL, and
  a note on stderr says so. Default: an SQLite file
  in the per-user data folder, $XDG_DATA_HOME/partnerctl/partnerctl.db (or
  ~/.local/share/partnerctl/partnerctl.db), created and migrated on first use.
  file:/path/x.db (or a plain path) for another SQLite file, which must exist
  ('partnerctl db migrate' creates it); postgresql://user@host:5432/db for
  PostgreSQL (migrate it once with 'partnerctl db migrate').

Environment:
  PARTNERCTL_SIGNING_KEY_FILE  token signing keys (default: signing-keys.json
                               beside the SQLite file; required on
                               PostgreSQL); created with mode 0600 on first use
  PARTNERCTL_ACTOR             who is acting, for the audit trail (default:
                               the OS user)
  PARTNERCTL_DB_POOL_SIZE      PostgreSQL connections per process (default 10
                               for serve, 2 otherwise)
  NO_COLOR                     no colour

Exit codes: 0 ok, 1 error, 2 bad usage, 3 not found (a partner, or the SQLite
            file named), 4 conflict with the current state, 5 database or
            service unavailable, 6 committed but not confirmed by every
            running server (a receipt), 7 permission denied (the database
            role lacks the privilege), 130 cancelled.`,
  subcommands: [
    createPartnerCommand,
    listPartnersCommand,
    showPartnerCommand,
    disablePartnerCommand,
    enablePartnerCommand,
    issueKeysCommand,
    rotateKeysCommand,
    revokeKeysCommand,
    revokeTokensCommand,
    lookupCommand,
    listKeysCommand,
    mapCompanyCommand,
    unmapCompanyCommand,
    listCompaniesCommand,
    applyCommand,
    exportCommand,
    completionCommand,
    completePartnersCommand,
    setLimitsCommand,
    setNetworkCommand,
    setCredentialsCommand,
    usageCommand,
    explainCommand,
    refusalsCommand,
    requestsCommand,
    recordCommand,
    exposureCommand,
    mintTestTokenCommand,
    auditCommand,
    webhooksCommand,
    contextCommand,
    dbCommand,
    signingKeyCommand,
    serveCommand,
    instancesCommand,
    receiptCommand,
  ],
});

/**
 * Builds the command tree from the definitions. Only commander and the definitions are loaded here; a
 * command's run function imports what it needs when it runs, so --help and bad usage stay fast.
 *
 * `argv` is the command line about to be parsed (as process.argv): `--version --json` prints JSON.
 */
export function buildProgram(run: Runner, argv: readonly string[] = []): Command {
  const program = new Command(PROGRAM.name).description(PROGRAM.description).showSuggestionAfterError(true);
  configureHelp(program, PROGRAM);
  for (const option of PROGRAM.options ?? []) program.addOption(toOption(option));
  // Like commander's .version(), and with --json anywhere before '--', one JSON object.
  program.on('option:version', () => {
    const end = argv.indexOf('--');
    const json = argv.slice(2, end === -1 ? undefined : end).includes('--json');
    program.configureOutput().writeOut?.(json ? `${JSON.stringify({ version: VERSION }, null, 2)}\n` : `${VERSION}\n`);
    throw new CommanderError(0, 'commander.version', VERSION);
  });
  for (const definition of PROGRAM.subcommands ?? []) addCommand(program, definition, run);
  // The program's own help command: it follows a path of subcommands and refuses a name that is no command.
  program.helpCommand(false);
  program
    .command('help')
    .helpGroup('Setup')
    .summary("'help <command>': its options, notes, examples; 'help global'")
    .description("show a command's help (its options, notes and examples); 'help global': the global options, the database, the environment and exit codes")
    .argument('[command...]', 'a command, and a subcommand of it')
    .action((words: string[]) => showHelp(program, words));
  return program;
}

function addCommand(parent: Command, definition: CommandDefinition, run: Runner): void {
  const command = parent.command(definition.name, { hidden: definition.hidden === true }).description(definition.description);
  if (definition.group) command.helpGroup(definition.group);
  configureHelp(command, definition);
  for (const argument of definition.arguments ?? []) command.argument(argument.name, argument.description);
  for (const option of definition.options ?? []) command.addOption(toOption(option));
  for (const subcommand of definition.subcommands ?? []) addCommand(command, subcommand, run);
  if (definition.run) command.action((...args: unknown[]) => run(args.at(-1) as Command, definition));
}

function toOption(definition: OptionDefinition): Option {
  const option = new Option(definition.flags, definition.description);
  if (definition.default !== undefined) option.default(definition.default);
  if (definition.choices) option.choices(definition.choices);
  if (definition.repeatable) option.argParser(collect);
  return option;
}

/** A repeatable option's values, in order. */
function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

