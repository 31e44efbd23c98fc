// Only JSON is accepted, and only as UTF-8 (RFC 8259): a body that is not valid UTF-8 is refused, since the
// gate and an engine could read different members out of it. The bytes are kept as received so data
// requests forward them byte for byte; the text is what the gate reads. Used by the data path and by
// Fastify's content-type parser alike.
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
