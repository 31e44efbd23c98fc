import type { Command } from 'commander';
import { AppError } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { terminalSafe } from '../../text.js';
import type { Session } from '../session.js';

export const completionCommand = defineCommand({
  name: 'completion',
  group: 'Setup',
  summary: 'print a shell completion script',
  description: 'print a shell completion script (commands, options, partner names)',
  arguments: [{ name: '[shell]', description: 'bash, zsh or fish' }],
  examples: [{ lines: ['eval "$(partnerctl completion bash)"', 'partnerctl completion fish > ~/.config/fish/completions/partnerctl.fish'] }],
  run: (session, _out, { args, command }) => runCompletion(session, args[0], command),
});

async function runCompletion(session: Session, shell: string | undefined, command: Command): Promise<void> {
  let root = command;
  while (root.parent) root = root.parent;
  const scripts = await import('./completion-scripts.js');
  const make = { bash: scripts.bash, zsh: scripts.zsh, fish: scripts.fish }[shell as 'bash' | 'zsh' | 'fish'];
  if (!make) {
    throw new AppError('invalid_argument', `completion needs a shell: bash, zsh or fish${shell ? `, got '${shell}'` : ''}`, {
      hint: 'partnerctl completion bash',
    });
  }
  session.terminal.out.write(make(root));
}

export const completePartnersCommand = defineCommand({
  name: '__complete-partners',
  description: '',
  hidden: true,
  arguments: [{ name: '[prefix]' }],
  run: (session, _out, { args }) => runCompletePartners(session, args[0]),
});

/** For the completion scripts: partner names starting with what was typed (up to 200), one per line. */
async function runCompletePartners(session: Session, prefix: string | undefined): Promise<void> {
  const [{ searchPartners }, db] = await Promise.all([import('../../domain/operations/partners.js'), session.db()]);
  const partners = await searchPartners(db, '', 1000);
  const typed = (prefix ?? '').toLowerCase();
  const names = partners.map((partner) => partner.name).filter((name) => name.toLowerCase().startsWith(typed) && terminalSafe(name) === name);
  session.terminal.out.write(names.slice(0, 200).map((name) => `${name}\n`).join(''));
}
