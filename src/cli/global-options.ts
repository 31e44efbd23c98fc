import { defineOptions, type OptionsOf } from './options.js';

/** The options every command accepts (on the program: program.ts). */
export const GLOBAL_OPTIONS = defineOptions([
  { flags: '-V, --version', description: 'output the version number', summary: 'the version' },
  {
    flags: '--database-url <url>',
    description: 'database URL (default: SQLite file in the per-user data folder; see below)',
    summary: 'the database (default: an SQLite file of your own)',
  },
  {
    flags: '--context <name>',
    description: "use this context's database and actor (see 'partnerctl context'); wins over DATABASE_URL, saying so on stderr",
    summary: "a named database and actor ('partnerctl context')",
  },
  { flags: '--json', description: 'print exactly one JSON object on stdout (snake_case keys)', summary: 'one JSON object on stdout' },
  { flags: '--no-color', description: 'no colour in the output', summary: 'no colour' },
  { flags: '--no-input', description: 'never prompt; fail naming the missing flag instead', summary: 'never prompt; fail naming the missing flag' },
  { flags: '-y, --yes', description: 'confirm destructive actions without asking', summary: 'confirm destructive actions without asking' },
  {
    flags: '--actor <name>',
    description: 'who is acting, for the audit trail (default: $PARTNERCTL_ACTOR or the OS user)',
    summary: 'who is acting, for the audit trail',
  },
  { flags: '--debug', description: 'show stack traces of errors', summary: 'stack traces of errors' },
]);

export type GlobalOptions = OptionsOf<typeof GLOBAL_OPTIONS>;
