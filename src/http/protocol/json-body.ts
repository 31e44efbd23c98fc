// Only JSON is accepted, and only as UTF-8 (RFC 8259): a body that is not valid UTF-8 is refused, since the
// gate and an engine could read different members out of it. The bytes are kept as received so data
// requests forward them byte for byte; the text is what the gate reads.
import type { IncomingMessage } from 'node:http';
import { AppError } from '../../errors.js';

// ignoreBOM: a byte-order mark stays in the text, so the text and the forwarded bytes say the same.
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A JSON body as the server received it: the parsed value, its text (what the gate reads), its bytes (what is forwarded). */
export interface RequestBody {
  value: unknown;
  text: string;
  bytes: Buffer;
}

/** The body's bytes read as JSON; null for an empty body (no body). */
export function parseJsonBody(bytes: Buffer): RequestBody | null {
  if (bytes.length === 0) return null;
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    throw new AppError('invalid_request', 'the request body is not valid UTF-8');
  }
  try {
    return { value: JSON.parse(text), text, bytes };
  } catch {
    throw new AppError('invalid_request', 'the request body is not valid JSON');
  }
}

/** True when a Content-Type names JSON (`application/json`, with or without parameters). */
export function isJsonMediaType(contentType: string): boolean {
  const end = contentType.indexOf(';');
  return (end < 0 ? contentType : contentType.slice(0, end)).trim().toLowerCase() === 'application/json';
}

function malformed(): AppError {
  return new AppError('invalid_request', 'the request is malformed');
}

function tooLarge(): AppError {
  return new AppError('payload_too_large', 'the request body is too large');
}

/**
 * The body's bytes, whatever they are, up to `limit` (413 past it, without reading further), exactly as many
 * as Content-Length says when it says. The one reader of request bodies: every route reads through it.
 */
export function readBody(request: IncomingMessage, limit: number): Promise<Buffer> {
  const length = request.headers['content-length'];
  const declared = length === undefined ? Number.NaN : Number(length);
  if (declared > limit) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const stop = () => {
      request.off('data', onData);
      request.off('end', onEnd);
      request.off('error', onError);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limit) {
        stop();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      if (!Number.isNaN(declared) && received !== declared) reject(malformed());
      else resolve(Buffer.concat(chunks, received));
    };
    const onError = (error: Error) => {
      stop();
      reject(new AppError('invalid_request', 'the request body could not be read', { cause: error }));
    };
    request.on('data', onData);
    request.on('end', onEnd);
    request.on('error', onError);
  });
}

/**
 * A JSON body as the route reads it: null when the request carries none; 415 unless it says JSON; 413 past
 * `limit`; 400 unless it is UTF-8 JSON.
 */
export async function readJsonBody(request: IncomingMessage, limit: number): Promise<RequestBody | null> {
  const headers = request.headers;
  const type = headers['content-type'];
  const length = headers['content-length'];
  if (type === undefined && headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return null;
  if (type === undefined || !isJsonMediaType(type)) throw new AppError('unsupported_media_type', 'the request body must be application/json');
  return parseJsonBody(await readBody(request, limit));
}

/** True when a Content-Type names a form (`application/x-www-form-urlencoded`, with or without parameters). */
export function isFormMediaType(contentType: string): boolean {
  const end = contentType.indexOf(';');
  return (end < 0 ? contentType : contentType.slice(0, end)).trim().toLowerCase() === 'application/x-www-form-urlencoded';
}

/**
 * A form-encoded body (the token endpoint's OAuth form) as its fields: null when empty; 413 past `limit`;
 * 400 unless UTF-8, or when a field is given twice (ambiguous, as a repeated JSON member).
 */
export async function readFormBody(request: IncomingMessage, limit: number): Promise<Record<string, string> | null> {
  const bytes = await readBody(request, limit);
  if (bytes.length === 0) return null;
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    throw new AppError('invalid_request', 'the request body is not valid UTF-8');
  }
  // No prototype: a field named __proto__ is a field like any other.
  const fields: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [name, value] of new URLSearchParams(text)) {
    if (Object.hasOwn(fields, name)) throw new AppError('invalid_request', `${name.slice(0, 40)} may be given only once`, { reason: 'credentials_malformed' });
    fields[name] = value;
  }
  return fields;
}
