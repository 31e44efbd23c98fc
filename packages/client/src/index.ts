// The partner-side client of the public API: the package @partnerctl/client (packages/client). It follows
// the spec's recommended behaviour: exchange the key pair for a token, keep it in memory with its expiry,
// re-exchange in the background about 60 s before it expires, and on a 401 exchange once more and retry the
// request once. It depends on nothing but Node's own fetch and crypto. With a public-key pair
// (private_key_jwt) it signs a fresh client assertion for every exchange, from a PEM or through a signing
// function (so the key can stay in a KMS).
import { createPrivateKey, randomUUID, sign as cryptoSign, type KeyObject } from 'node:crypto';

export type QueryValue = string | number | boolean;

/** What every client takes, whatever its credential. */
export interface PartnerClientCommonOptions {
  /** The API base address including the version segment, e.g. https://api.example.com/public/v1 */
  baseUrl: string;
  accessKey: string;
  /** The key id (its RFC 7638 thumbprint, as issue-keys printed it) put in each assertion's header; optional. */
  kid?: string;
  /** The assertion's aud: the token endpoint's public URL; default `${baseUrl}/auth/token`. */
  audience?: string;
  /** How long before expiry the token is re-exchanged in the background; default 60 s. */
  renewBeforeSeconds?: number;
  /** Per HTTP call; default 30 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** Milliseconds since the epoch; for tests. */
  now?: () => number;
}

/**
 * The pair's credential, exactly one: a shared-secret pair's secret (pctl_sk_…); a public-key pair's private
 * key, PEM (Ed25519, EC P-256 or RSA), each exchange signing a client assertion with it; or a signer for a
 * public-key pair whose private key stays elsewhere (a KMS), signing each assertion's signing input.
 */
export type PartnerClientCredential =
  | { secretKey: string; privateKey?: never; signer?: never }
  | { privateKey: string; secretKey?: never; signer?: never }
  | { signer: AssertionSigner; secretKey?: never; privateKey?: never };

export type PartnerClientOptions = PartnerClientCommonOptions & PartnerClientCredential;

/** The JWS algorithms a public-key pair signs with (the operator's server accepts these only). */
export type AssertionAlgorithm = 'EdDSA' | 'ES256' | 'RS256';

export interface AssertionSigner {
  alg: AssertionAlgorithm;
  /**
   * The JWS signature over `input` (the ASCII of `base64url(header).base64url(payload)`): Ed25519's 64 bytes,
   * ES256's r||s (64 bytes, not DER), or RS256's PKCS#1 v1.5 signature over SHA-256.
   */
  sign(input: Uint8Array): Promise<Uint8Array> | Uint8Array;
}

/** How long each assertion lives (the server accepts at most 300 s). */
const ASSERTION_LIFETIME_SECONDS = 60;

const base64url = (data: Uint8Array | string) => Buffer.from(data).toString('base64url');

/** A signer over a PEM private key, its algorithm read from the key. */
export function pemSigner(pem: string): AssertionSigner {
  const key: KeyObject = createPrivateKey({ key: pem, format: 'pem' });
  const type = key.asymmetricKeyType;
  if (type === 'ed25519') return { alg: 'EdDSA', sign: (input) => cryptoSign(null, input, key) };
  if (type === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') {
    return { alg: 'ES256', sign: (input) => cryptoSign('sha256', input, { key, dsaEncoding: 'ieee-p1363' }) };
  }
  if (type === 'rsa') return { alg: 'RS256', sign: (input) => cryptoSign('sha256', input, key) };
  throw new TypeError('the private key must be Ed25519, EC P-256 or RSA');
}

/**
 * A client assertion (RFC 7523 §2.2): iss and sub the access key, aud the token endpoint, a minute's life
 * from `nowMs`, a fresh jti; signed by `signer`.
 */
export async function signClientAssertion(
  signer: AssertionSigner,
  claims: { accessKey: string; audience: string; nowMs: number; kid?: string },
): Promise<string> {
  const iat = Math.floor(claims.nowMs / 1000);
  const header = { alg: signer.alg, typ: 'JWT', ...(claims.kid ? { kid: claims.kid } : {}) };
  const payload = { iss: claims.accessKey, sub: claims.accessKey, aud: claims.audience, iat, exp: iat + ASSERTION_LIFETIME_SECONDS, jti: randomUUID() };
  const input = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(payload))}`;
  return `${input}.${base64url(await signer.sign(new TextEncoder().encode(input)))}`;
}

export interface RequestOptions {
  query?: Record<string, QueryValue | readonly QueryValue[] | undefined>;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface PartnerResponse<T = unknown> {
  status: number;
  headers: Headers;
  /** Parsed JSON when the response is JSON, the text otherwise (empty for HEAD and 204). */
  data: T;
  requestId: string | null;
}

/** A 4xx/5xx from the API: its error envelope's code, or `http_<status>` when the body is not that envelope. */
export class PartnerApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly requestId: string | null;
  readonly body: unknown;

  constructor(status: number, code: string, message: string, requestId: string | null, body: unknown) {
    super(message);
    this.name = 'PartnerApiError';
    this.status = status;
    this.code = code;
    this.requestId = requestId;
    this.body = body;
  }
}

interface HeldToken {
  value: string;
  expiresAt: number;
  renewAt: number;
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);
const RENEW_RETRY_MS = 5_000;
/** A token this close to expiry is not sent: it could expire on the way. */
const EXPIRY_MARGIN_MS = 5_000;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

async function readBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text === '') return text;
  const type = response.headers.get('content-type') ?? '';
  if (/^application\/([\w.+-]+\+)?json/i.test(type)) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

function apiError(response: Response, body: unknown): PartnerApiError {
  const envelope = isPlainObject(body) && isPlainObject(body.error) ? body.error : undefined;
  const code = typeof envelope?.code === 'string' ? envelope.code : `http_${response.status}`;
  const message = typeof envelope?.message === 'string' ? envelope.message : `the API answered ${response.status}`;
  const requestId = typeof envelope?.request_id === 'string' ? envelope.request_id : response.headers.get('x-request-id');
  return new PartnerApiError(response.status, code, message, requestId, body);
}

export class PartnerClient {
  private readonly baseUrl: string;
  private readonly renewBeforeMs: number;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;
  private readonly now: () => number;
  private held: HeldToken | null = null;
  private exchanging: Promise<HeldToken> | null = null;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;
  /** How many key exchanges this client has made (for monitoring and tests). */
  exchanges = 0;

  private readonly signer: AssertionSigner | null;

  constructor(private readonly options: PartnerClientOptions) {
    const given = [options.secretKey, options.privateKey, options.signer].filter((each) => each !== undefined).length;
    if (!options.accessKey || given !== 1) throw new TypeError('accessKey and exactly one of secretKey, privateKey and signer are required');
    if (options.secretKey === '') throw new TypeError('secretKey must not be empty');
    this.signer = options.privateKey !== undefined ? pemSigner(options.privateKey) : (options.signer ?? null);
    this.baseUrl = new URL(options.baseUrl).href.replace(/\/+$/, '');
    this.renewBeforeMs = (options.renewBeforeSeconds ?? 60) * 1000;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
    this.now = options.now ?? Date.now;
  }

  /** A token valid for now: the cached one, or a fresh exchange. Starts a background renewal when due. */
  async token(): Promise<string> {
    const held = this.held;
    const now = this.now();
    if (held && now < held.expiresAt - EXPIRY_MARGIN_MS) {
      if (now >= held.renewAt) this.renewInBackground();
      return held.value;
    }
    return (await this.exchange()).value;
  }

  get<T = unknown>(path: string, companyId: string, options?: RequestOptions): Promise<PartnerResponse<T>> {
    return this.request<T>('GET', path, companyId, undefined, options);
  }

  delete<T = unknown>(path: string, companyId: string, options?: RequestOptions): Promise<PartnerResponse<T>> {
    return this.request<T>('DELETE', path, companyId, undefined, options);
  }

  post<T = unknown>(path: string, companyId: string, body: Record<string, unknown> = {}, options?: RequestOptions): Promise<PartnerResponse<T>> {
    return this.request<T>('POST', path, companyId, body, options);
  }

  put<T = unknown>(path: string, companyId: string, body: Record<string, unknown> = {}, options?: RequestOptions): Promise<PartnerResponse<T>> {
    return this.request<T>('PUT', path, companyId, body, options);
  }

  patch<T = unknown>(path: string, companyId: string, body: Record<string, unknown> = {}, options?: RequestOptions): Promise<PartnerResponse<T>> {
    return this.request<T>('PATCH', path, companyId, body, options);
  }

  /**
   * A data request. company_id goes in the JSON body for POST, PUT and PATCH and in the query otherwise.
   * On a 401 the keys are exchanged again and the request is retried once.
   */
  async request<T = unknown>(
    method: string,
    path: string,
    companyId: string,
    body?: Record<string, unknown>,
    options: RequestOptions = {},
  ): Promise<PartnerResponse<T>> {
    const upper = method.toUpperCase();
    if (typeof companyId !== 'string' || companyId === '') throw new TypeError('companyId must be a non-empty string');
    if (!path.startsWith('/')) throw new TypeError("path must start with '/'");
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(options.query ?? {})) {
      if (name === 'company_id') throw new TypeError('pass the company as companyId, not in the query');
      if (value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(item));
    }
    let payload: string | undefined;
    if (BODY_METHODS.has(upper)) {
      if (body !== undefined && !isPlainObject(body)) throw new TypeError('the body must be a plain object');
      if (body && Object.hasOwn(body, 'company_id') && body.company_id !== companyId) {
        throw new TypeError('the body names a different company_id than companyId');
      }
      payload = JSON.stringify({ ...body, company_id: companyId });
    } else {
      if (body !== undefined) throw new TypeError(`${upper} requests carry no body`);
      url.searchParams.set('company_id', companyId);
    }
    const send = async (token: string) =>
      this.call(url, {
        method: upper,
        headers: {
          accept: 'application/json',
          ...options.headers,
          authorization: `Bearer ${token}`,
          ...(payload !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(payload !== undefined ? { body: payload } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      });

    const used = await this.token();
    let response = await send(used);
    if (response.status === 401) {
      await response.body?.cancel();
      if (this.held?.value === used) this.held = null;
      response = await send((await this.exchange()).value);
    }
    const data = upper === 'HEAD' ? '' : await readBody(response);
    if (response.status >= 400) throw apiError(response, data);
    return { status: response.status, headers: response.headers, data: data as T, requestId: response.headers.get('x-request-id') };
  }

  /** Stops the background renewal; the client can still be used (it then exchanges on demand). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  private async call(url: URL, init: RequestInit): Promise<Response> {
    const signal = init.signal ? AbortSignal.any([init.signal, AbortSignal.timeout(this.timeoutMs)]) : AbortSignal.timeout(this.timeoutMs);
    return this.fetchImpl(url, { ...init, signal });
  }

  /** One exchange at a time: concurrent callers share it. */
  private exchange(): Promise<HeldToken> {
    this.exchanging ??= (async () => {
      try {
        this.exchanges++;
        const startedAt = this.now();
        const response = await this.call(new URL(`${this.baseUrl}/auth/token`), {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify(await this.credentials(startedAt)),
        });
        const body = await readBody(response);
        if (response.status !== 200) throw apiError(response, body);
        if (!isPlainObject(body) || typeof body.access_token !== 'string' || typeof body.expires_in !== 'number') {
          throw new PartnerApiError(response.status, 'invalid_response', 'the token response is not as documented', response.headers.get('x-request-id'), body);
        }
        // Measured from when the request left, so network time only shortens the token's life here.
        const expiresAt = startedAt + body.expires_in * 1000;
        const held = { value: body.access_token, expiresAt, renewAt: Math.max(startedAt, expiresAt - this.renewBeforeMs) };
        this.held = held;
        this.schedule(held.renewAt - this.now());
        return held;
      } finally {
        this.exchanging = null;
      }
    })();
    return this.exchanging;
  }

  /** The token request's body: the secret pair, or a client assertion signed now (a fresh jti each time). */
  private async credentials(nowMs: number): Promise<Record<string, string>> {
    if (this.signer === null) return { access_key: this.options.accessKey, secret_key: this.options.secretKey as string };
    const audience = this.options.audience ?? `${this.baseUrl}/auth/token`;
    const assertion = await signClientAssertion(this.signer, { accessKey: this.options.accessKey, audience, nowMs, ...(this.options.kid ? { kid: this.options.kid } : {}) });
    return { client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion };
  }

  private renewInBackground(): void {
    if (this.exchanging !== null) return;
    this.exchange().catch(() => {
      // The current token stays in use until it expires; try again shortly.
      const held = this.held;
      if (held && this.now() < held.expiresAt) this.schedule(Math.min(RENEW_RETRY_MS, held.expiresAt - this.now()));
    });
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    if (this.closed) return;
    this.timer = setTimeout(() => this.renewInBackground(), Math.max(0, delayMs));
    this.timer.unref?.();
  }
}
