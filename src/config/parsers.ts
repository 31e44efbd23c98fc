// The variables' parsers: plain functions, no schema library, so reading the configuration costs every
// command next to nothing (zod alone was ~55 ms of CPU, a third of a short command).
import { createRequire } from 'node:module';
import { isAppError } from '../errors.js';
import { parseRate, type Rate } from '../rates.js';
import { parseRetryDelays } from '../webhook-delays.js';

/** Reads a variable's text (trimmed, never blank): its value, or a problem reported through `problem`. */
export type Parser<T> = (text: string, problem: (message: string) => void) => T;

/** A URL safe to print: the password, if any, replaced (in the authority or as a query parameter). */
export function redactUrl(url: string): string {
  let shown = url;
  const start = url.indexOf('//');
  if (start >= 0) {
    // The authority runs to the first `/`, `?` or `#`; its userinfo to the LAST `@` in it, as a URL parser
    // (and so the driver) reads it: a password may hold `@` and `:`.
    const rest = url.slice(start + 2);
    const end = rest.search(/[/?#]/);
    const authority = end < 0 ? rest : rest.slice(0, end);
    const at = authority.lastIndexOf('@');
    const colon = authority.indexOf(':');
    if (at >= 0 && colon >= 0 && colon < at) {
      shown = `${url.slice(0, start + 2)}${authority.slice(0, colon)}:***${url.slice(start + 2 + at)}`;
    }
  }
  return shown.replace(/([?&]password=)[^&#]*/gi, '$1***');
}

const quote = (text: string, max: number) => `'${text.slice(0, max)}'`;

export const text: Parser<string> = (value) => value;

export function whole(min: number, max: number): Parser<number> {
  return (value, problem) => {
    const number = Number(value);
    if (!/^\d+$/.test(value) || number < min || number > max) problem(`must be a whole number from ${min} to ${max}, got ${quote(value, 40)}`);
    return number;
  };
}

const ON = ['1', 'on', 'true', 'yes'];
const OFF = ['0', 'off', 'false', 'no'];

export const onOff: Parser<boolean> = (value, problem) => {
  const word = value.toLowerCase();
  if (!ON.includes(word) && !OFF.includes(word)) problem(`must be 1 or 0 (on or off), got ${quote(word, 40)}`);
  return ON.includes(word);
};

export function choice<const T extends string>(values: readonly T[]): Parser<T> {
  return (value, problem) => {
    const word = value.toLowerCase();
    if (!(values as readonly string[]).includes(word)) problem(`must be one of ${values.join(', ')}, got ${quote(word, 40)}`);
    return word as T;
  };
}

export const host: Parser<string> = (value, problem) => {
  if (!/^[A-Za-z0-9.:[\]-]+$/.test(value)) problem(`is not a host name or address: ${quote(value, 80)}`);
  return value;
};

/** An http(s) base URL: no credentials, query or fragment (they would leak into logs or be dropped silently). */
export const httpUrl: Parser<URL> = (value, problem) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problem(`is not a URL: ${quote(value, 200)}`);
    return new URL('http://invalid');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    problem(`must be an http:// or https:// URL, got ${quote(value, 200)}`);
  } else if (url.username || url.password || url.search || url.hash) {
    problem('must not carry credentials, a query or a fragment');
  }
  return url;
};

const entries = (value: string) =>
  value
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean);

export const origins: Parser<readonly string[]> = (value, problem) => {
  const out: string[] = [];
  for (const entry of entries(value)) {
    let origin: string | undefined;
    try {
      origin = new URL(entry).origin;
    } catch {
      origin = undefined;
    }
    if (origin === undefined || origin === 'null' || origin !== entry) {
      problem(`entries must be exact origins such as https://app.example.com, got ${quote(entry, 200)}`);
    } else {
      out.push(origin);
    }
  }
  return Object.freeze(out);
};

/** Addresses and CIDRs in proxy-addr's terms (Fastify's trustProxy reads the list with it): `private` is its `uniquelocal`. */
export const trustedProxies: Parser<readonly string[]> = (value, problem) => {
  // Loaded only when the variable is set.
  const { compile } = createRequire(import.meta.url)('@fastify/proxy-addr') as typeof import('@fastify/proxy-addr');
  const out: string[] = [];
  for (const entry of entries(value)) {
    const word = entry.toLowerCase();
    const address = word === 'private' ? 'uniquelocal' : word === 'loopback' ? 'loopback' : entry;
    try {
      compile([address]);
      out.push(address);
    } catch {
      problem(`entries must be addresses, CIDRs, loopback or private, got ${quote(entry, 80)}`);
    }
  }
  return Object.freeze(out);
};

export const rate: Parser<Rate> = (value, problem) => {
  try {
    return parseRate(value, '');
  } catch (error) {
    problem(isAppError(error) ? error.message.trim() : 'is not a rate');
    return { count: 0, periodSeconds: 1 };
  }
};

export const redisUrl: Parser<string> = (value, problem) => {
  // The second replacement catches a password with no user (redis://:secret@host), which redactUrl leaves.
  if (!/^rediss?:\/\/[^\s]+$/.test(value)) problem(`must be a redis:// or rediss:// URL, got '${redactUrl(value).replace(/:[^:@/]*@/, ':***@')}'`);
  return value;
};

/** `5s,30s,2m`: the delays before each retry, in ms. */
export const delays: Parser<readonly number[]> = (value, problem) => {
  const parsed = parseRetryDelays(value);
  if (typeof parsed === 'string') {
    problem(parsed);
    return [];
  }
  return Object.freeze(parsed);
};

/** Days or hours (`30d`, `12h`), in ms. */
export const retention: Parser<number> = (value, problem) => {
  if (!/^[1-9]\d{0,4}[dh]$/.test(value)) problem(`must be a number of days or hours such as 30d or 12h, got ${quote(value, 40)}`);
  return Number(value.slice(0, -1)) * (value.endsWith('d') ? 86_400_000 : 3_600_000);
};

/** `120s`, `2m`, `500ms`, or `0`, at most an hour, in ms. */
export const budget: Parser<number> = (value, problem) => {
  const match = /^(?:0|(\d{1,7})(ms|s|m))$/.exec(value);
  if (!match) {
    problem(`must be a duration such as 120s, 2m or 0, got ${quote(value, 40)}`);
    return 0;
  }
  const ms = match[1] === undefined ? 0 : Number(match[1]) * (match[2] === 'm' ? 60_000 : match[2] === 's' ? 1_000 : 1);
  if (ms > 3_600_000) problem('must be at most 1h');
  return ms;
};
