import { defineOptions, type OptionsOf } from './options.js';

/** The options every command accepts (on the program: program.ts). */
export const GLOBAL_OPTIONS = defineOptions([
  { flags: '-V, --version', description: 'output the version number' },
  { flags: '--database-url <url>', description: 'database URL (default: SQLite file in the per-user data folder; see below)' },
  { flags: '--context <name>', description: "use this context's database and actor (see 'partnerctl context')" },
  { flags: '--json', description: 'print exactly one JSON object on stdout (snake_case keys)' },
  { flags: '--no-color', description: 'no colour in the output' },
  { flags: '--no-input', description: 'never prompt; fail naming the missing flag instead' },
  { flags: '-y, --yes', description: 'confirm destructive actions without asking' },
  { flags: '--actor <name>', description: 'who is acting, for the audit trail (default: $PARTNERCTL_ACTOR or the OS user)' },
  { flags: '--debug', description: 'show stack traces of errors' },
]);

export type GlobalOptions = OptionsOf<typeof GLOBAL_OPTIONS>;
