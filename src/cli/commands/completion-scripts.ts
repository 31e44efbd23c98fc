// The completion scripts of `partnerctl completion`, made from the command tree. Loaded only when that
// command runs.
import type { Command } from 'commander';

interface Spec {
  name: string;
  description: string;
  options: { flags: string[]; description: string; takesValue: boolean }[];
  takesPartner: boolean;
}

/** The command tree as the completion scripts need it (nested commands as 'db migrate'). */
function specs(root: Command): { commands: Spec[]; global: Spec['options'] } {
  const optionsOf = (command: Command) =>
    command.options
      .filter((option) => !option.hidden)
      .map((option) => ({
        flags: [option.long, option.short].filter((flag): flag is string => Boolean(flag)),
        description: option.description,
        takesValue: option.required || option.optional,
      }));
  const commands: Spec[] = [];
  const visit = (command: Command, prefix: string) => {
    for (const child of command.commands) {
      if ((child as unknown as { _hidden?: boolean })._hidden) continue;
      const name = `${prefix}${child.name()}`;
      if (child.commands.length > 0) {
        commands.push({ name, description: child.description(), options: [], takesPartner: false });
        visit(child, `${name} `);
        continue;
      }
      const takesPartner = child.registeredArguments.some((argument) => argument.name() === 'partner');
      commands.push({ name, description: child.description(), options: optionsOf(child), takesPartner });
    }
  };
  visit(root, '');
  return { commands, global: optionsOf(root) };
}

/** The commands that have subcommands (db, webhooks, context…): the word after one names its subcommand. */
function parents(commands: Spec[]): string {
  return [...new Set(commands.filter((command) => command.name.includes(' ')).map((command) => command.name.split(' ')[0]!))].join(' ');
}

const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

export function bash(root: Command): string {
  const { commands, global } = specs(root);
  const top = commands.filter((command) => !command.name.includes(' ')).map((command) => command.name);
  const cases = commands
    .filter((command) => command.options.length || command.takesPartner || command.name.includes(' ') === false)
    .map((command) => {
      const key = command.name.includes(' ') ? command.name.replace(' ', '_') : command.name;
      const sub = commands.filter((other) => other.name.startsWith(`${command.name} `)).map((other) => other.name.split(' ')[1]!);
      return `    ${key}) opts=${quote(command.options.flatMap((option) => option.flags).join(' '))}; partner=${command.takesPartner ? 1 : 0}; subs=${quote(sub.join(' '))} ;;`;
    })
    .join('\n');
  return `# partnerctl completion for bash: eval "$(partnerctl completion bash)" (e.g. in ~/.bashrc)
_partnerctl() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" cmd="" i word opts="" partner=0 subs=""
  local global=${quote(global.flatMap((option) => option.flags).join(' '))}
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    [[ $word == -* ]] && continue
    if [[ -z $cmd ]]; then cmd=$word; elif [[ ${quote(` ${parents(commands)} `)} == *" $cmd "* ]]; then cmd="\${cmd}_$word"; break; else break; fi
  done
  if [[ -z $cmd ]]; then
    COMPREPLY=($(compgen -W ${quote(top.join(' '))} -- "$cur"))
    [[ $cur == -* ]] && COMPREPLY=($(compgen -W "$global" -- "$cur"))
    return
  fi
  case $cmd in
${cases}
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts $global" -- "$cur"))
  elif [[ -n $subs ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  elif [[ $partner == 1 ]]; then
    # The word as the shell will read it (Runbook\\ A, "Runbook A): escapes and quotes undone, so that a
    # name with spaces matches; replies escaped the same way, a quoted word's left inside its quotes.
    local IFS=$'\\n' name typed="" quote="" c j
    for ((j = 0; j < \${#cur}; j++)); do
      c=\${cur:j:1}
      if [[ -z $quote && $c == '\\' ]]; then ((j++)); typed+=\${cur:j:1}
      elif [[ -z $quote && ( $c == "'" || $c == '"' ) ]]; then quote=$c
      elif [[ -n $quote && $c == "$quote" ]]; then quote=""
      else typed+=$c; fi
    done
    COMPREPLY=()
    for name in $(partnerctl __complete-partners "$typed" 2>/dev/null); do
      if [[ -n $quote ]]; then COMPREPLY+=("$name"); else COMPREPLY+=("$(printf '%q' "$name")"); fi
    done
  fi
}
complete -F _partnerctl partnerctl
`;
}

export function zsh(root: Command): string {
  const { commands, global } = specs(root);
  const top = commands.filter((command) => !command.name.includes(' '));
  const describe = (text: string) => text.replace(/[:\\]/g, '\\$&').split('\n')[0]!;
  const cases = commands
    .map((command) => {
      const key = command.name.replace(' ', '_');
      const sub = commands.filter((other) => other.name.startsWith(`${command.name} `)).map((other) => other.name.split(' ')[1]!);
      return `    ${quote(key)}) opts=(${command.options.flatMap((option) => option.flags).map(quote).join(' ')}); partner=${command.takesPartner ? 1 : 0}; subs=(${sub.map(quote).join(' ')}) ;;`;
    })
    .join('\n');
  return `#compdef partnerctl
# partnerctl completion for zsh: partnerctl completion zsh > "\${fpath[1]}/_partnerctl" (or eval it in ~/.zshrc)
_partnerctl() {
  local -a commands opts subs global
  local cmd="" partner=0 i
  commands=(${top.map((command) => quote(`${command.name}:${describe(command.description)}`)).join(' ')})
  global=(${global.flatMap((option) => option.flags).map(quote).join(' ')})
  for ((i = 2; i < CURRENT; i++)); do
    [[ $words[i] == -* ]] && continue
    if [[ -z $cmd ]]; then cmd=$words[i]; elif [[ ${quote(` ${parents(commands)} `)} == *" $cmd "* ]]; then cmd="\${cmd}_$words[i]"; break; else break; fi
  done
  if [[ -z $cmd ]]; then
    if [[ $PREFIX == -* ]]; then compadd -- $global; else _describe 'command' commands; fi
    return
  fi
  case $cmd in
${cases}
  esac
  if [[ $PREFIX == -* ]]; then
    compadd -- $opts $global
  elif (( \${#subs} )); then
    compadd -- $subs
  elif (( partner )); then
    # \${(Q)PREFIX}: the word without its escapes (Runbook\\ A is Runbook A); compadd quotes what it inserts.
    compadd -- \${(f)"$(partnerctl __complete-partners "\${(Q)PREFIX}" 2>/dev/null)"}
  fi
}
if [[ \${zsh_eval_context[-1]} == loadautofunc ]]; then _partnerctl "$@"; else compdef _partnerctl partnerctl; fi
`;
}

export function fish(root: Command): string {
  const { commands, global } = specs(root);
  const lines = [
    '# partnerctl completion for fish: partnerctl completion fish > ~/.config/fish/completions/partnerctl.fish',
    'complete -c partnerctl -f',
  ];
  const optionLine = (condition: string, option: Spec['options'][number]) => {
    const parts = [`complete -c partnerctl -n ${quote(condition)}`];
    for (const flag of option.flags) parts.push(flag.startsWith('--') ? `-l ${flag.slice(2)}` : `-s ${flag.slice(1)}`);
    if (option.takesValue) parts.push('-r');
    parts.push(`-d ${quote(option.description)}`);
    return parts.join(' ');
  };
  for (const option of global) lines.push(optionLine('true', option));
  for (const command of commands) {
    const [first, second] = command.name.split(' ');
    if (second === undefined) {
      lines.push(`complete -c partnerctl -n __fish_use_subcommand -a ${first} -d ${quote(command.description.split('\n')[0]!)}`);
    } else {
      lines.push(
        `complete -c partnerctl -n ${quote(`__fish_seen_subcommand_from ${first}; and not __fish_seen_subcommand_from ${second}`)} -a ${second} -d ${quote(command.description)}`,
      );
    }
    const condition = second === undefined ? `__fish_seen_subcommand_from ${first}` : `__fish_seen_subcommand_from ${second}`;
    for (const option of command.options) lines.push(optionLine(condition, option));
    if (command.takesPartner) {
      // The token without its escapes and quotes (Runbook\\ A, "Runbook A): fish quotes what it inserts.
      lines.push(`complete -c partnerctl -n ${quote(condition)} -a '(partnerctl __complete-partners (commandline -ct | string unescape) 2>/dev/null)'`);
    }
  }
  return `${lines.join('\n')}\n`;
}
