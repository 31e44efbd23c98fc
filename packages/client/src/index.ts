// The partner-side client of the public API: the package @partnerctl/client (packages/client). It follows
// the spec's recommended behaviour: exchange the key pair for a token, keep it in memory with its expiry,
// re-exchange in the background about 60 s before it expires, and on a 401 exchange once more and retry the
// request once. It depends on nothing but Node's own fetch.

export type QueryValue = string | number | boolean;

export interface PartnerClientOptions {
  /** The API base address including the version segment, e.g. https://api.example.com/public/v1 */
  baseUrl: string;
  accessKey: string;
  secretKey: string;
  /** How long before expiry the token is re-exchanged in the background; default 60 s. */
  renewBeforeSeconds?: number;
  /** Per HTTP call; default 30 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** Milliseconds since the epoch; for tests. */
  now?: () => number;
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

  constructor(private readonly options: PartnerClientOptions) {
    if (!options.accessKey || !options.secretKey) throw new TypeError('accessKey and secretKey are required');
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
          body: JSON.stringify({ access_key: this.options.accessKey, secret_key: this.options.secretKey }),
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
