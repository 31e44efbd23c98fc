// `partnerctl context`: named databases (and actors) per user, as kubectl and gh have them. The store and the
// order in which the database is chosen live in ../contexts.ts; this module adds, lists and explains them.
import { resolve } from 'node:path';
import { redactUrl, resolveDatabase } from '../../config.js';
import { dialectOf } from '../../db/dialect.js';
import { AppError } from '../../errors.js';
import { checkContextName, contextsFile, readContexts, writeContexts, type DatabaseChoice } from '../contexts.js';
import { defineCommand } from '../definition.js';
import type { Output } from '../output.js';
import type { Session } from '../session.js';
import { say } from '../say.js';

const NAME_ARGUMENT = { name: '<name>', description: 'the context: letters, digits, ".", "_" or "-"' };

export const contextCommand = defineCommand({
  name: 'context',
  group: 'Setup',
  summary: 'named databases and actors: add, use, list, show, remove',
  description: 'named databases and actors per user (add, use, list, show, remove); --context NAME picks one per command',
  notes: `Stored in $XDG_CONFIG_HOME/partnerctl/contexts.json (or ~/.config/partnerctl),
mode 0600 in a 0700 folder. The database is chosen in this order:
--database-url, then DATABASE_URL, then --context NAME, else the current
context, else the embedded default. A context's actor applies when its
database is the one in effect (--actor and PARTNERCTL_ACTOR still win).
Passwords are never printed: prefer ~/.pgpass or PGPASSWORD to a password in
the URL.`,
  subcommands: [
    defineCommand({
      name: 'add',
      changes: true,
      description: 'add a context (or replace one of that name): --database-url is required, --actor optional',
      arguments: [NAME_ARGUMENT],
      examples: [
        {
          lines: ['partnerctl context add prod --actor alice \\', '  --database-url postgresql://alice@db.internal/partnerctl', 'partnerctl context use prod'],
        },
      ],
      run: (session, out, { args }) => runAdd(session, out, args[0]!),
    }),
    defineCommand({
      name: 'use',
      changes: true,
      description: 'make a context the current one (every command then uses its database, unless told otherwise)',
      arguments: [NAME_ARGUMENT],
      run: (session, out, { args }) => runUse(session, out, args[0]!),
    }),
    defineCommand({
      name: 'list',
      description: 'list the contexts (databases without their passwords), the current one marked',
      run: (session, out) => runList(session, out),
    }),
    defineCommand({
      name: 'show',
      description: 'the database and actor in effect, which setting chose each and why, and who the database says you are',
      notes: 'On PostgreSQL the login (session_user) and its partnerctl roles are read from the database itself; SQLite has no logins.',
      run: (session, out) => runShow(session, out),
    }),
    defineCommand({
      name: 'remove',
      changes: true,
      description: 'remove a context (an unknown one exits 0, changed: false)',
      arguments: [NAME_ARGUMENT],
      run: (session, out, { args }) => runRemove(session, out, args[0]!),
    }),
  ],
});

async function runAdd(session: Session, out: Output, nameArgument: string): Promise<void> {
  const name = checkContextName(nameArgument);
  const given = session.options.databaseUrl?.trim();
  if (!given) throw new AppError('missing_argument', 'context add needs --database-url <url>', { hint: `partnerctl context add ${name} --database-url postgresql://user@host/db` });
  const config = resolveDatabase(given, {});
  // A relative SQLite path means the folder it was typed in, not wherever a later command runs.
  const databaseUrl = dialectOf(config.provider).isFile ? resolve(config.url) : given;
  const actor = session.options.actor?.trim() || undefined;
  const stored = readContexts(session.config.env);
  const before = stored.contexts[name];
  const changed = before?.databaseUrl !== databaseUrl || before?.actor !== actor;
  if (changed) {
    writeContexts(session.config.env, { current: stored.current, contexts: { ...stored.contexts, [name]: { databaseUrl, ...(actor ? { actor } : {}) } } });
  }
  if (out.json) {
    out.emitJson({ name, database_url: redactUrl(databaseUrl), actor: actor ?? null, current: stored.current === name, changed, file: contextsFile(session.config.env) });
    return;
  }
  out.line(
    !changed
      ? say`Context ${name} already holds these settings; nothing changed.`
      : say`${before ? 'Replaced' : 'Added'} context ${name}: ${redactUrl(databaseUrl)}${actor ? `, actor ${actor}` : ''} (in ${contextsFile(session.config.env)}).`,
  );
  if (stored.current !== name) out.line(say`Use it with 'partnerctl context use ${name}', or per command with --context ${name}.`);
}

async function runUse(session: Session, out: Output, nameArgument: string): Promise<void> {
  const name = checkContextName(nameArgument);
  const stored = readContexts(session.config.env);
  const entry = stored.contexts[name];
  if (!entry) throw new AppError('not_found', `no context '${name}' in ${contextsFile(session.config.env)}`, { hint: "see 'partnerctl context list'" });
  const changed = stored.current !== name;
  if (changed) writeContexts(session.config.env, { ...stored, current: name });
  const overridden = session.config.env.DATABASE_URL ? 'DATABASE_URL is set in this shell and still wins over it' : undefined;
  if (out.json) {
    out.emitJson({ current: name, database_url: redactUrl(entry.databaseUrl), changed, ...(overridden ? { note: overridden } : {}) });
    return;
  }
  out.line(changed ? say`Current context: ${name} (${redactUrl(entry.databaseUrl)}).` : say`Context ${name} is already the current one; nothing changed.`);
  if (overridden) out.note(say`partnerctl: note: ${overridden}.`);
}

async function runList(session: Session, out: Output): Promise<void> {
  const stored = readContexts(session.config.env);
  const entries = Object.entries(stored.contexts).sort(([a], [b]) => a.localeCompare(b));
  if (out.json) {
    out.emitJson({
      current: stored.current,
      contexts: entries.map(([name, entry]) => ({ name, current: name === stored.current, database_url: redactUrl(entry.databaseUrl), actor: entry.actor ?? null })),
    });
    return;
  }
  if (entries.length === 0) {
    out.line(say`No contexts. Add one: 'partnerctl context add NAME --database-url URL'.`);
    return;
  }
  out.line(
    await out.table(
      [{ title: 'CURRENT' }, { title: 'NAME' }, { title: 'DATABASE' }, { title: 'ACTOR', cut: 'end', min: 6, optional: true }],
      entries.map(([name, entry]) => [name === stored.current ? '*' : '', name, redactUrl(entry.databaseUrl), entry.actor ?? null]),
    ),
  );
}

const DATABASE_WHY: Record<DatabaseChoice['source'], (choice: DatabaseChoice) => string> = {
  flag: (choice) => `--database-url wins over DATABASE_URL and any context${choice.context ? ` (context ${choice.context.name} not used)` : ''}`,
  env: (choice) => `DATABASE_URL is set and wins over the current context${choice.context ? ` (context ${choice.context.name} not used)` : ''}`,
  context: (choice) =>
    choice.context!.chosenBy === 'flag'
      ? `context ${choice.context!.name}, named by --context: a flag wins over DATABASE_URL${choice.envOverridden ? ' (set, not used)' : ''}; --database-url is not given`
      : `context ${choice.context!.name}, the current one; neither --database-url nor DATABASE_URL is set`,
  default: () => 'no --database-url, DATABASE_URL or current context: the embedded default',
};

async function runShow(session: Session, out: Output): Promise<void> {
  const chosen = session.databaseChoice;
  // A URL that wins skips reading the contexts; show still names the current one it overrides.
  const current = chosen.context === null ? readContexts(session.config.env).current : null;
  const stored = current === null ? undefined : readContexts(session.config.env).contexts[current];
  const choice: DatabaseChoice =
    current !== null && stored ? { ...chosen, context: { name: current, chosenBy: 'current', entry: stored } } : chosen;
  const config = session.databaseConfig;
  const dialect = dialectOf(config.provider);
  const actorSource = session.options.actor ? '--actor' : session.config.defaultActor ? 'PARTNERCTL_ACTOR' : session.contextActor ? `context ${choice.context!.name}` : 'the OS user';
  const actor = session.who.actor;
  const database = redactUrl(config.url);
  let principal: import('../../db/roles.js').Principal | null = null;
  let problem: string | null = null;
  try {
    if (dialect.hasLogins) {
      principal = await verifiedPrincipal(config);
    } else if (session.requireDatabase()) {
      // Checked without opening: `show` must not create or migrate the database it describes.
      problem = 'not created yet (the first command on it creates it)';
    }
  } catch (error) {
    problem = error instanceof AppError ? `${error.code}: ${error.message}` : (error as Error).message;
  }
  const why = DATABASE_WHY[choice.source](choice);
  if (out.json) {
    out.emitJson({
      context: choice.context ? { name: choice.context.name, chosen_by: choice.context.chosenBy, in_effect: choice.source === 'context' } : null,
      database: { provider: config.provider, url: database, source: choice.source, why },
      actor: { name: actor, source: actorSource },
      principal: principal && { login: principal.login, roles: principal.roles, superuser: principal.superuser },
      verified: problem === null,
      problem,
    });
    return;
  }
  const role = principal
    ? principal.superuser
      ? 'superuser (every role)'
      : principal.roles.length > 0
        ? principal.roles.join(', ')
        : "none of the partnerctl roles (see 'partnerctl db roles')"
    : null;
  out.line(
    await out.fields([
      ['context', choice.context ? `${choice.context.name}${choice.source === 'context' ? '' : ' (not in effect)'}` : 'none'],
      ['database', `${config.provider} ${database}`],
      ['why', why],
      ['actor', `${actor} (from ${actorSource})`],
      ...(principal ? ([['login', `${principal.login} (verified by the database)`], ['role', role]] as [string, string | null][]) : []),
      ...(!dialect.hasLogins ? ([['login', 'none: SQLite has no logins (the file permissions decide)']] as [string, string][]) : []),
      ...(problem ? ([['problem', problem]] as [string, string][]) : []),
    ]),
  );
}

async function verifiedPrincipal(config: Session['databaseConfig']): Promise<import('../../db/roles.js').Principal> {
  const [{ openDatabase }, { sessionPrincipal }] = await Promise.all([import('../../db/client.js'), import('../../db/roles.js')]);
  const db = await openDatabase(config);
  try {
    return await sessionPrincipal(db);
  } finally {
    await db.close().catch(() => {});
  }
}

async function runRemove(session: Session, out: Output, nameArgument: string): Promise<void> {
  const name = checkContextName(nameArgument);
  const stored = readContexts(session.config.env);
  const changed = stored.contexts[name] !== undefined;
  if (changed) {
    const { [name]: _removed, ...rest } = stored.contexts;
    writeContexts(session.config.env, { current: stored.current === name ? null : stored.current, contexts: rest });
  }
  if (out.json) {
    out.emitJson({ name, removed: changed, changed });
    return;
  }
  out.line(
    changed
      ? say`Removed context ${name}${stored.current === name ? '; no context is current now (commands use DATABASE_URL or the embedded default)' : ''}.`
      : say`No context ${name}; nothing changed.`,
  );
}
