// A command's options declared once: the definitions give commander its options (program.ts) and, through
// OptionsOf, the type of what commander parses from them.
import type { OptionValues } from 'commander';

export interface OptionDefinition {
  /** As commander spells it: '-f, --file <file|->', '--dry-run'. */
  readonly flags: string;
  readonly description: string;
  /** A global option's line in the program's help (`help global` and every other place show the description). */
  readonly summary?: string;
  /** The value when the option is not given (shown in the help as "(default: …)"). */
  readonly default?: string;
  /** The only values accepted. */
  readonly choices?: readonly string[];
  /** May be given more than once: the values are collected, in order, into a list. */
  readonly repeatable?: boolean;
}

/** A command's option definitions, their flags and choices kept as written so that OptionsOf can read them. */
export function defineOptions<const Definitions extends readonly OptionDefinition[]>(definitions: Definitions): Definitions {
  return definitions;
}

// What commander makes of a flag, in types: the key it stores the value under and the value's type.
type LongName<Flags extends string> = Flags extends `${string}--${infer Rest}` ? (Rest extends `${infer Name} ${string}` ? Name : Rest) : never;
type CamelCase<Words extends string> = Words extends `${infer Head}-${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : Words;
type IsNegated<D extends OptionDefinition> = LongName<D['flags']> extends `no-${string}` ? true : false;
/** '--dry-run' -> 'dryRun', '-f, --file <file|->' -> 'file', '--no-wait' -> 'wait'. */
type KeyOf<D extends OptionDefinition> = D extends OptionDefinition
  ? CamelCase<LongName<D['flags']> extends `no-${infer Name}` ? Name : LongName<D['flags']>>
  : never;
type Negated<All extends readonly OptionDefinition[]> = Extract<All[number], { flags: `${string}--no-${string}` }>;
type Positive<All extends readonly OptionDefinition[]> = Exclude<All[number], Negated<All>>;
/** Keys always present: a default, or a lone --no-x (commander then defaults x to true). */
type PresentKeys<All extends readonly OptionDefinition[]> =
  | KeyOf<Extract<All[number], { default: string }>>
  | Exclude<KeyOf<Negated<All>>, KeyOf<Positive<All>>>;
type ArgumentOf<D extends OptionDefinition> = D extends { choices: readonly (infer Choice)[] }
  ? Choice
  : D['flags'] extends `${string}<${string}`
    ? string
    : D['flags'] extends `${string}[${string}`
      ? string | true
      : true;
/** Distributes: where two definitions share a key ('--wait <d>', '--no-wait'), the mapped type passes both. */
type ValueOf<D extends OptionDefinition, All extends readonly OptionDefinition[]> = D extends OptionDefinition
  ? IsNegated<D> extends true
    ? KeyOf<D> extends KeyOf<Positive<All>>
      ? false
      : boolean
    : D extends { repeatable: true }
      ? ArgumentOf<D>[]
      : ArgumentOf<D>
  : never;

/**
 * The parsed options of a command, derived from its option definitions: '--dry-run' gives `dryRun?: true`,
 * '--limit <n>' `limit?: string`, a repeatable option a list, choices their union, a default (or a lone
 * '--no-x') a key always present, '--wait <d>' with '--no-wait' `wait: string | false`.
 */
export type OptionsOf<All extends readonly OptionDefinition[]> = OneObject<
  { [D in All[number] as KeyOf<D> extends PresentKeys<All> ? KeyOf<D> : never]: ValueOf<D, All> } & {
    [D in All[number] as KeyOf<D> extends PresentKeys<All> ? never : KeyOf<D>]?: ValueOf<D, All>;
  }
>;

/** The two halves as one object type (what an editor shows, and what a type error names). */
type OneObject<T> = { [K in keyof T]: T[K] };

/**
 * Commander's record of parsed options as the type their definitions derive: the one place where the untyped
 * record becomes typed. True by construction: program.ts hands commander exactly these definitions (toOption),
 * and OptionsOf spells out what commander makes of each flag.
 */
export function parsedOptions<Definitions extends readonly OptionDefinition[]>(values: OptionValues): OptionsOf<Definitions> {
  return values as OptionsOf<Definitions>;
}
