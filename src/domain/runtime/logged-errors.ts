// Errors as the log may show them: names, codes and first lines, never anything shaped like a key or a
// token. Every log line of the server and its background work writes errors through this.
import { ACCESS_KEY_PREFIX, SECRET_KEY_PREFIX } from '../rules/identifiers.js';

const LOGGED_MESSAGE_MAX = 200;
const LOGGED_CAUSES_MAX = 3;
// Anything shaped like a key or a compact JWS, in case a dependency's message quotes one.
const SECRET_LOOKING = new RegExp(`(?:${ACCESS_KEY_PREFIX}|${SECRET_KEY_PREFIX})[0-9A-Za-z]*|eyJ[A-Za-z0-9_-]*\\.[A-Za-z0-9_-]*\\.[A-Za-z0-9_-]*`, 'g');

export interface LoggedError {
  name?: string;
  code?: string;
  message?: string;
}

/**
 * One error of a chain, fit for the log: its name, its code, and the first line of its message (cut short,
 * anything shaped like a key or a token replaced). A SyntaxError's message is left out: JSON.parse quotes
 * the text it failed on, which may be a key file.
 */
function loggable(error: unknown): LoggedError {
  if (typeof error !== 'object' || error === null) return { name: typeof error };
  const { name, code, message } = error as { name?: unknown; code?: unknown; message?: unknown };
  const out: LoggedError = {};
  if (typeof name === 'string') out.name = name;
  if (typeof code === 'string' || typeof code === 'number') out.code = String(code);
  if (typeof message === 'string' && !(error instanceof SyntaxError)) {
    out.message = message.split('\n', 1)[0]!.slice(0, LOGGED_MESSAGE_MAX).replace(SECRET_LOOKING, '[redacted]');
  }
  return out;
}

/** An error and up to three of its causes, each as `loggable` says. */
export function loggableChain(error: unknown): LoggedError[] {
  const chain: LoggedError[] = [];
  for (let current = error; current !== undefined && current !== null && chain.length <= LOGGED_CAUSES_MAX; ) {
    chain.push(loggable(current));
    current = typeof current === 'object' ? (current as { cause?: unknown }).cause : undefined;
  }
  return chain;
}
