// Named contexts (as kubectl and gh have them): a database URL and an actor under a name, one of them current.
// Stored per user in $XDG_CONFIG_HOME/partnerctl/contexts.json (folder 0700, file 0600), read by the session
// when --context names one, or when neither --database-url nor DATABASE_URL names the database.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { configDirectory, type DatabaseEnvironment } from '../config.js';
import { AppError } from '../errors.js';

export interface Context {
  /** As `--database-url` takes it: a path, file:…, or postgresql://…. */
  readonly databaseUrl: string;
  readonly actor?: string;
}

export interface Contexts {
  readonly current: string | null;
  readonly contexts: Readonly<Record<string, Context>>;
}

/** Which setting chose the database, in the order they win. */
export type DatabaseSource = 'flag' | 'env' | 'context' | 'default';

export interface DatabaseChoice {
  /** The URL to open; undefined for the embedded default. */
  readonly url: string | undefined;
  readonly source: DatabaseSource;
  /** The context asked for (--context, else the current one), whether or not it is the one in effect. */
  readonly context: { readonly name: string; readonly chosenBy: 'flag' | 'current'; readonly entry: Context } | null;
  /** DATABASE_URL was set and a flag (--context) won over it: said on stderr, never silently. */
  readonly envOverridden: boolean;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

export function contextsFile(env: DatabaseEnvironment): string {
  return join(configDirectory(env), 'contexts.json');
}

export function checkContextName(name: string): string {
  if (!NAME.test(name)) {
    throw new AppError('invalid_argument', `a context name is 1 to 63 letters, digits, '.', '_' or '-' (starting with a letter or digit), got '${name.slice(0, 80)}'`);
  }
  return name;
}

export function readContexts(env: DatabaseEnvironment): Contexts {
  const file = contextsFile(env);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { current: null, contexts: {} };
    throw new AppError('invalid_argument', `cannot read ${file}: ${(error as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as { current?: unknown; contexts?: Record<string, { database_url?: unknown; actor?: unknown }> };
    const contexts: Record<string, Context> = {};
    for (const [name, entry] of Object.entries(parsed.contexts ?? {})) {
      if (typeof entry?.database_url !== 'string') throw new Error(`context '${name}' has no database_url`);
      contexts[name] = { databaseUrl: entry.database_url, ...(typeof entry.actor === 'string' ? { actor: entry.actor } : {}) };
    }
    const current = typeof parsed.current === 'string' && contexts[parsed.current] ? parsed.current : null;
    return { current, contexts };
  } catch (error) {
    throw new AppError('invalid_argument', `${file} is not a contexts file: ${(error as Error).message}`, {
      hint: `fix or remove ${file}`,
    });
  }
}

/** Writes the whole file at once (a new file renamed over the old): folder 0700, file 0600, whatever the umask. */
export function writeContexts(env: DatabaseEnvironment, contexts: Contexts): void {
  const folder = configDirectory(env);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  chmodSync(folder, 0o700);
  const file = contextsFile(env);
  const body = {
    current: contexts.current,
    contexts: Object.fromEntries(
      Object.entries(contexts.contexts).map(([name, entry]) => [name, { database_url: entry.databaseUrl, ...(entry.actor ? { actor: entry.actor } : {}) }]),
    ),
  };
  const temporary = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  chmodSync(temporary, 0o600);
  renameSync(temporary, file);
}

/**
 * The one order in which the database is chosen: the flags (--database-url, then --context NAME), then the
 * environment (DATABASE_URL), then the current context, then the embedded default: a flag beats the
 * environment, as kubectl's --context does. A --context naming no context is an error even when
 * --database-url wins over it: a typo there must not go unnoticed.
 */
export function chooseDatabase(flagUrl: string | undefined, env: DatabaseEnvironment, contextFlag: string | undefined): DatabaseChoice {
  const flag = flagUrl?.trim() ? flagUrl : undefined;
  const fromEnv = env.DATABASE_URL?.trim() ? env.DATABASE_URL : undefined;
  let context: DatabaseChoice['context'] = null;
  if (contextFlag !== undefined || (flag === undefined && fromEnv === undefined)) {
    const stored = readContexts(env);
    const name = contextFlag ?? stored.current;
    if (name !== null) {
      const entry = stored.contexts[name];
      if (!entry) {
        throw new AppError('not_found', `no context '${name}' in ${contextsFile(env)}`, { hint: "see 'partnerctl context list'" });
      }
      context = { name, chosenBy: contextFlag !== undefined ? 'flag' : 'current', entry };
    }
  }
  if (flag !== undefined) return { url: flag, source: 'flag', context, envOverridden: false };
  if (context?.chosenBy === 'flag') return { url: context.entry.databaseUrl, source: 'context', context, envOverridden: fromEnv !== undefined };
  if (fromEnv !== undefined) return { url: fromEnv, source: 'env', context, envOverridden: false };
  if (context) return { url: context.entry.databaseUrl, source: 'context', context, envOverridden: false };
  return { url: undefined, source: 'default', context, envOverridden: false };
}
