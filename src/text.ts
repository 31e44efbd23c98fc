// Text that reaches a terminal or a log (control characters made visible, credentials masked), and partner
// names as they are compared. Shared by the database layer, the domain (its error messages) and the CLI
// (everything it prints); no dependencies.

// Characters a terminal acts on or that hide what a value is, beyond C0 (which JSON escapes by itself): DEL,
// C1 (U+0080-U+009F: U+009B is a CSI on many terminals), the bidi controls (U+061C, U+200E/F, U+202A-U+202E,
// U+2066-U+2069), the line/paragraph separators, and the invisible characters that join nothing (U+200B,
// U+2060-U+2064, U+FEFF: a name that looks like another's). ZWJ and ZWNJ stay: scripts and emoji need them.
const HIDDEN = '\\u007f-\\u009f\\u061c\\u200b\\u200e\\u200f\\u2028-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff';
// Those, all of C0 (the tab, line feed and carriage return included: a value never starts a line of its own),
// and a lone UTF-16 surrogate (written as U+FFFD otherwise, hiding what was there).
const CONTROL = new RegExp(`[\\u0000-\\u001f${HIDDEN}]|[\\ud800-\\udbff](?![\\udc00-\\udfff])|(?<![\\ud800-\\udbff])[\\udc00-\\udfff]`, 'g');
const JSON_UNSAFE = new RegExp(`[${HIDDEN}]`, 'g');

function escaped(char: string): string {
  const code = char.codePointAt(0)!;
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * A value as a terminal or a log line for people may show it: every control, bidi and invisible character
 * written as an escape (`\x0a`, `\x1b`, `\x9b`, `\u202e`), so a value is always one visible run of text. The
 * CLI applies it to each value it prints (src/cli/say.ts), never to its own words and styling.
 */
export function terminalSafe(text: string): string {
  return text.replace(CONTROL, escaped);
}

/** The same characters as JSON escapes (`\u009b`): the JSON still parses to the same value. */
export function jsonSafe(json: string): string {
  return json.replace(JSON_UNSAFE, (char) => `\\u${char.codePointAt(0)!.toString(16).padStart(4, '0')}`);
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
