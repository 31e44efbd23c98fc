// Text that reaches a terminal or a log: control characters made visible, credentials masked. Shared by the
// domain (its error messages) and the CLI (everything it prints); no dependencies.

// C0 (but the line feed), DEL, C1 (U+0080-U+009F: U+009B is a CSI on many terminals), the bidi controls
// (U+061C, U+200E/F, U+202A-U+202E, U+2066-U+2069) and the line/paragraph separators.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's purpose
const CONTROL = /(\u001b\[[0-9;]*m)|[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

function escaped(char: string): string {
  const code = char.codePointAt(0)!;
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * The text with every control and bidi character written as an escape (`\x9b`, `\u202e`); line feeds stay.
 * `keepColour` keeps colour (SGR) sequences, which the CLI's own styling produces when colour is on.
 */
export function terminalSafe(text: string, keepColour = false): string {
  return text.replace(CONTROL, (match, sgr: string | undefined) => (sgr && keepColour ? match : [...match].map(escaped).join('')));
}

/** The same characters as JSON escapes (`\u009b`): the JSON still parses to the same value. */
export function jsonSafe(json: string): string {
  return json.replace(/[\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g, (char) => `\\u${char.codePointAt(0)!.toString(16).padStart(4, '0')}`);
}
