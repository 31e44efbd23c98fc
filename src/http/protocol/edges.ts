// HTTP edge cases refused at the door (README "Hardening"): what RFC 9110/9112 forbids or leaves ambiguous,
// and what a gate and an engine could read differently. Plain functions, called from app.ts and gate.ts.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { AppError } from '../../errors.js';
import { envelope } from './errors.js';

// A host name (letters, digits, `.`, `-`, `_`, `~`), an IPv4 address or an IP literal in brackets, with an
// optional port. Narrower than RFC 3986's reg-name on purpose: no sub-delimiters (`,` is how two Host
// values look once joined), no userinfo, no percent-escapes.
const HOST = /^(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9._~-]{1,253})(?::(\d{1,5}))?$/;
// Request headers that must appear at most once: two of them and the gate and an engine could read
// different ones.
// (Two Authorization headers are the gate's to refuse, with 401.)
const SINGLE_REQUEST_HEADERS = new Set(['host', 'content-type', 'content-encoding', 'transfer-encoding', 'expect']);

function invalid(message: string): AppError {
  return new AppError('invalid_request', message);
}

/**
 * Why the request's head is refused, or null: exactly one valid Host on HTTP/1.1 (RFC 9112 §3.2), no
 * repeated single-valued header, no transfer coding but `chunked`, no content coding on a body (415).
 */
export function requestHeadProblem(request: IncomingMessage): AppError | null {
  const raw = request.rawHeaders;
  let hosts = 0;
  let seen: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const length = raw[i]!.length;
    // Only names as long as one of the set's (host, expect, content-type, content-encoding, transfer-encoding).
    if (length !== 4 && length !== 6 && length !== 12 && length !== 16 && length !== 17) continue;
    const name = raw[i]!.toLowerCase();
    if (!SINGLE_REQUEST_HEADERS.has(name)) continue;
    if (name === 'host') hosts++;
    seen ??= new Set();
    if (seen.has(name)) return invalid(`the ${name} header is given more than once`);
    seen.add(name);
  }
  const host = request.headers.host;
  if (hosts === 0 && request.httpVersion === '1.1') return invalid('an HTTP/1.1 request needs a Host header');
  if (host !== undefined) {
    const match = HOST.exec(host);
    if (!match || (match[1] !== undefined && Number(match[1]) > 65_535)) return invalid('the Host header is not a valid host');
  }
  const transfer = request.headers['transfer-encoding'];
  if (transfer !== undefined && transfer.trim().toLowerCase() !== 'chunked') {
    return invalid('only the chunked transfer coding is accepted');
  }
  const hasBody = transfer !== undefined || (request.headers['content-length'] !== undefined && request.headers['content-length'] !== '0');
  // JSON is UTF-8 (RFC 8259): a body labelled otherwise could be read by an engine as other characters.
  const type = request.headers['content-type'];
  if (hasBody && type !== undefined && /charset/i.test(type)) {
    const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(type)?.[1]?.toLowerCase();
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      return new AppError('unsupported_media_type', 'JSON bodies are accepted in UTF-8 only');
    }
  }
  const coding = request.headers['content-encoding'];
  if (hasBody && coding !== undefined && coding.trim().toLowerCase() !== 'identity') {
    return new AppError('unsupported_media_type', 'request bodies are accepted without a content coding only');
  }
  return null;
}

/**
 * `Expect` (RFC 9110 §10.1.1): `100-continue`, exactly, gets its interim answer and the request goes on;
 * any other expectation is answered 417 `expectation_failed`, as an envelope, and never served.
 */
export function installExpectHandling(server: Server): void {
  const refuse = (response: ServerResponse) => {
    const id = randomUUID();
    const body = JSON.stringify(envelope('expectation_failed', 'only the expectation 100-continue is supported', id));
    response.shouldKeepAlive = false;
    response.writeHead(417, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'x-request-id': id,
      connection: 'close',
    });
    response.end(body);
  };
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    if ((request.headers.expect ?? '').trim().toLowerCase() !== '100-continue') {
      refuse(response);
      return;
    }
    response.writeContinue();
    server.emit('request', request, response);
  });
  server.on('checkExpectation', (_request: IncomingMessage, response: ServerResponse) => refuse(response));
}

// What a parameter name becomes once an engine has decoded it: percent-escapes and `+` decoded, lower case,
// cut at `[` (PHP, Rails and qs read `company_id[]`, `company_id[0]` as company_id) or NUL, and every other
// run of non-alphanumerics folded to `_` (PHP turns `.` and ` ` into `_`; CGI-style readers fold `-`).
function normalisedName(name: string): string {
  let decoded = name.replace(/\+/g, ' ');
  try {
    decoded = decodeURIComponent(decoded);
  } catch {
    // A broken escape is read as is.
  }
  decoded = decoded.toLowerCase();
  // biome-ignore lint/suspicious/noControlCharactersInRegex: a parameter name is cut at `[` or NUL, as engines read it
  const cut = decoded.search(/[[\u0000]/);
  if (cut >= 0) decoded = decoded.slice(0, cut);
  return decoded.replace(/[^a-z0-9]+/g, '_');
}

/**
 * Refuses a query in which company_id could be read in more than one way: a second company_id after `;`
 * (an old separator some engines still split on), or any other parameter whose name an engine could
 * decode, fold or index into `company_id` (`company%5Fid`, `Company_Id`, `company-id`, `company_id[]`).
 */
export function refuseCompanyIdAliases(url: string): void {
  const queryStart = url.indexOf('?');
  if (queryStart < 0) return;
  const query = url.slice(queryStart + 1);
  // The usual data request: company_id alone.
  if (query.startsWith('company_id=') && !/[&;]/.test(query)) return;
  // The common case: nothing that could spell it differently.
  if (!/%|\+|;|\[|c\W*o\W*m\W*p\W*a\W*n\W*y/i.test(query.replace(/(^|&)company_id=/g, '$1'))) return;
  let exact = 0;
  for (const part of query.split(/[&;]/)) {
    const equals = part.indexOf('=');
    const name = equals < 0 ? part : part.slice(0, equals);
    if (name === 'company_id') {
      exact++;
      if (exact > 1) throw invalid('company_id is given more than once');
      continue;
    }
    if (normalisedName(name) === 'company_id') {
      throw invalid(`a query parameter spelled ${JSON.stringify(name.slice(0, 64))} could be read as company_id; spell it company_id, once`);
    }
  }
}
