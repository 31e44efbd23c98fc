import { AppError } from '../errors.js';
import { say } from './say.js';
import type { Session } from './session.js';

/**
 * A missing value: asked for on a terminal, otherwise an error naming the flag. Never prompts in scripts.
 */
export async function requireValue(
  session: Session,
  value: string | undefined,
  flag: string,
  ask: () => Promise<string>,
): Promise<string> {
  if (value !== undefined) return value;
  if (!session.interactive) {
    throw new AppError('missing_argument', `missing ${flag}`, { hint: `pass ${flag} (no prompts without a terminal or with --no-input)` });
  }
  return ask();
}

export async function askText(
  session: Session,
  message: string,
  validate?: (value: string) => string | true | Promise<string | true>,
): Promise<string> {
  const { input } = await import('@inquirer/prompts');
  return input({ message, validate: validate ?? ((value) => (value.trim() === '' ? 'required' : true)) }, promptContext(session));
}

/** A partner picked from the database, searching by name as the person types; each shown with its status. */
export async function askPartner(session: Session, message = 'Partner (type to filter by name)'): Promise<string> {
  const [{ search }, { searchPartners }, db] = await Promise.all([
    import('@inquirer/prompts'),
    import('../domain/operations/partners.js'),
    session.db(),
  ]);
  return search({
    message,
    source: async (term) => {
      const partners = await searchPartners(db, term ?? '', 20);
      return partners.map((partner) => ({
        name: say`${partner.name} (${partner.id}, ${partner.status})`.text,
        value: partner.id,
      }));
    },
  }, promptContext(session));
}

/** A value that may be a secret: typed or pasted without being echoed. */
export async function askSecret(session: Session, message: string): Promise<string> {
  const { password } = await import('@inquirer/prompts');
  return password({ message, mask: '*', validate: (value) => (value.trim() === '' ? 'required' : true) }, promptContext(session));
}

/** Destructive commands: --yes, or a person who says yes to a question naming the database it changes. */
export async function confirmDestructive(session: Session, action: string): Promise<void> {
  if (session.options.yes) return;
  if (!session.interactive) {
    throw new AppError('confirmation_required', `${action}: needs confirmation`, {
      hint: 'pass --yes to confirm (no prompts without a terminal or with --no-input)',
    });
  }
  const { confirm } = await import('@inquirer/prompts');
  const message = say`${action} in ${session.databaseName}?`.text;
  if (!(await confirm({ message, default: false }, promptContext(session)))) {
    throw new AppError('cancelled', 'nothing changed');
  }
}

/** Prompts read and draw on the session's terminal, not on the process's. */
function promptContext(session: Session): { input: NodeJS.ReadableStream; output: NodeJS.WritableStream } {
  return { input: session.terminal.in, output: session.terminal.out };
}
