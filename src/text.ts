// Text that reaches a terminal or a log (control characters made visible, credentials masked), and partner
// names as they are compared. Shared by the database layer, the domain (its error messages) and the CLI
// (everything it prints); no dependencies.

// C0 (but the tab and the line feed), DEL, C1 (U+0080-U+009F: U+009B is a CSI on many terminals), the bidi controls
// (U+061C, U+200E/F, U+202A-U+202E, U+2066-U+2069) and the line/paragraph separators.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's purpose
const CONTROL = /(\u001b\[[0-9;]*m)|[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

function escaped(char: string): string {
  const code = char.codePointAt(0)!;
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * The text with every control and bidi character written as an escape (`\x9b`, `\u202e`); tabs and line feeds stay.
 * `keepColour` keeps colour (SGR) sequences, which the CLI's own styling produces when colour is on.
 */
export function terminalSafe(text: string, keepColour = false): string {
  return text.replace(CONTROL, (match, sgr: string | undefined) => (sgr && keepColour ? match : [...match].map(escaped).join('')));
}

/** The same characters as JSON escapes (`\u009b`): the JSON still parses to the same value. */
export function jsonSafe(json: string): string {
  return json.replace(/[\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g, (char) => `\\u${char.codePointAt(0)!.toString(16).padStart(4, '0')}`);
}

const PUBLIC_PREFIXES = ['pctl_ak_', 'pctl_sk_', 'kp_', 'ptn_', 'eyJ'];

/**
 * A value that may be a credential, as an error may show it: its known prefix (or at most its first 4
 * characters) and its length, never more: `'pctl_sk_…' (83 characters)`.
 */
export function masked(value: string): string {
  const chars = [...value];
  const prefix = PUBLIC_PREFIXES.find((known) => value.startsWith(known)) ?? chars.slice(0, Math.min(4, Math.floor(chars.length / 4))).join('');
  return `'${terminalSafe(prefix)}…' (${chars.length} characters)`;
}

/** A URL's user information masked: the user kept before a password (`user:***`); a lone user may be a token (`***`). */
function maskedUserInfo(info: string): string {
  const colon = info.indexOf(':');
  return colon > 0 ? `${info.slice(0, colon)}:***` : '***';
}

/**
 * A URL as someone typed it, safe to echo whether it parses or not: everything between its scheme and its
 * last '@' is user information (a password may hold '/', '@' or spaces, and a broken URL has no parser's
 * word on where its host starts).
 */
export function maskedUrl(raw: string): string {
  const at = raw.lastIndexOf('@');
  if (at < 0) return raw;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(raw)?.[0] ?? '';
  return at < scheme.length ? raw : `${scheme}${maskedUserInfo(raw.slice(scheme.length, at))}${raw.slice(at)}`;
}

/**
 * Secret keys, JWTs and private keys (PEM) inside a message, each cut to its prefix, and the passwords of URLs
 * masked: the last guard before a terminal.
 */
export function withoutSecrets(text: string): string {
  return text
    .replace(/-----BEGIN ([A-Z ]*)PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g, '-----BEGIN $1PRIVATE KEY-----…')
    .replace(/pctl_sk_[A-Za-z0-9]+/g, 'pctl_sk_…')
    .replace(/eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g, 'eyJ…')
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#'"]*)@/gi, (_match, scheme: string, info: string) => `${scheme}${maskedUserInfo(info)}@`);
}

/** Levenshtein distance, case-insensitive (for did-you-mean suggestions). */
export function editDistance(a: string, b: string): number {
  const x = [...a.toLowerCase()];
  const y = [...b.toLowerCase()];
  let previous = Array.from({ length: y.length + 1 }, (_v, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const current = [i];
    for (let j = 1; j <= y.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[y.length]!;
}

/**
 * The candidates close to a mistyped value, nearest first: within a third of its length in edits (at least
 * 1, at most 4), or containing it / contained in it case-insensitively.
 */
export function closest(value: string, candidates: readonly string[], limit = 3): string[] {
  const bound = Math.min(4, Math.max(1, Math.floor([...value].length / 3)));
  const lower = value.toLowerCase();
  return candidates
    .map((candidate) => ({ candidate, distance: editDistance(value, candidate) }))
    .filter(({ candidate, distance }) => distance <= bound || (lower.length >= 3 && (candidate.toLowerCase().includes(lower) || lower.includes(candidate.toLowerCase()))))
    .sort((a, b) => a.distance - b.distance)
    .slice(0, limit)
    .map(({ candidate }) => candidate);
}

/**
 * The name as partner names are compared (unique, and found by): NFC, then case folded the way Unicode case
 * mapping does it (upper case, then lower case, so `Straße` and `STRASSE` are one name), then NFC again.
 */
export function nameKey(name: string): string {
  return name.normalize('NFC').toUpperCase().toLowerCase().normalize('NFC');
}
