// Values a hostile partner, a careless import or an old database may hold, each with what it tries: pushed
// through every field that reaches a terminal, a log line, a webhook or a JSON output (test/cli/hostile-values.test.ts,
// test/cli/output-37.test.ts). A field that validates its input may refuse some of them: then the refusal
// is the thing to check (one line, escaped).

export interface HostileValue {
  /** What it tries, for test names. */
  name: string;
  value: string;
}

/** A value with a few of each: prefixed so that tests can tell them apart in one table. */
export const HOSTILE_VALUES: readonly HostileValue[] = [
  { name: 'line feed: a forged line', value: 'acme-2\nWhy: forged\nTo change the answer: partnerctl set-network Acme --clear' },
  { name: 'carriage return: overwrites the line', value: 'acme\rpartnerctl: ok' },
  { name: 'CR LF', value: 'acme\r\nnext' },
  { name: 'tab', value: 'acme\tcolumn' },
  { name: 'ESC SGR: concealed text', value: 'acme\u001b[8mhidden\u001b[0m' },
  { name: 'ESC CSI: clear screen, cursor up', value: 'acme\u001b[2J\u001b[1A' },
  { name: 'OSC: window title, hyperlink', value: 'acme\u001b]0;pwned\u0007\u001b]8;;https://evil.example\u001b\\link\u001b]8;;\u001b\\' },
  { name: 'C1 CSI (U+009B)', value: 'acme\u009b2J' },
  { name: 'C1 OSC and NEL (U+009D, U+0085)', value: 'acme\u009d0;t\u0007\u0085next' },
  { name: 'bidi override U+202E', value: 'acme\u202egnp.exe' },
  { name: 'bidi isolates U+2066-U+2069', value: 'acme\u2066\u2067\u2068\u2069x' },
  { name: 'line/paragraph separators', value: 'acme\u2028\u2029x' },
  { name: 'NUL', value: 'acme\u0000x' },
  { name: 'DEL and BEL', value: 'acme\u007f\u0007x' },
  { name: 'zero-width: space, word joiner, BOM', value: 'ac\u200bme\u2060\ufeff' },
  { name: 'lone surrogates (invalid UTF-16; invalid UTF-8 arrives as U+FFFD)', value: 'acme\ud800x\udc00' },
  { name: 'very long', value: `acme-${'x'.repeat(5_000)}` },
];

/**
 * Characters that must never reach a terminal raw: all but the line feed and the tab, which the writers put
 * between lines and (through a pipe) between a table's values; a value's own are escaped (`\x0a`, `\x09`).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's purpose
export const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ud800-\udfff]/;

/** The same, without ESC: for text a colour terminal gets (its own SGR sequences, checked apart). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's purpose
export const RAW_CONTROL_BUT_ESC = /[\u0000-\u0008\u000b-\u001a\u001c-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ud800-\udfff]/;

/** The value as a person reads it in text output: every character above escaped, the tab and line feed too. */
export function escapedForm(value: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's purpose
  return value.replace(/[\u0000-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ud800-\udfff]/g, (char) => {
    const code = char.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
