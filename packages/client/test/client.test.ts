// The client as a partner uses it, against the real `partnerctl serve` (the root package's built binary) on a
// fresh SQLite file, in front of a fake engine on loopback. The operator's side of each scenario (disable a
// partner, refuse its tokens) is done with the real CLI.
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { PartnerApiError, PartnerClient, type PartnerClientCommonOptions } from '@partnerctl/client';
import { createOperator, sleep, startEngine, startServe, UUID, type FakeEngine, type Operator, type Partner, type Served } from './support.js';

/** Past the server's staleness bound: it applies the operator's changes within a second. */
const STALENESS_MS = 1_200;

describe('partner client against the real partnerctl serve (SQLite)', () => {
  let operator: Operator;
  let engine: FakeEngine;
  let server: Served;
  let partner: Partner;
  const clients: PartnerClient[] = [];

  /** A client of the given partner that also records the status of every HTTP answer it gets. */
  const clientFor = (who: Partner, options: Partial<PartnerClientCommonOptions> = {}) => {
    const statuses: number[] = [];
    const counting: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      statuses.push(response.status);
      return response;
    };
    const client = new PartnerClient({ baseUrl: `${server.url}/public/v1`, accessKey: who.accessKey, secretKey: who.secretKey, fetch: counting, ...options });
    clients.push(client);
    return { client, statuses };
  };

  beforeAll(async () => {
    operator = createOperator();
    engine = await startEngine();
    partner = await operator.partner(['acme']);
    server = await startServe(operator, engine);
  });
  beforeEach(() => {
    engine.received.length = 0;
    engine.respond = () => ({});
  });
  afterAll(async () => {
    for (const client of clients) client.close();
    await server?.stop();
    await engine?.close();
    operator?.dispose();
  });

  it('exchanges once, caches the token, and puts company_id where the method wants it', async () => {
    const { client } = clientFor(partner);
    const got = await client.get<{ engine: string }>('/prices', 'acme', { query: { sku: ['a', 'b'] } });
    expect(got.status).toBe(200);
    expect(got.data.engine).toBe('ok');
    expect(got.requestId).toMatch(UUID);
    await client.post('/prices', 'acme', { items: [1] });
    await client.put('/prices/1', 'acme', { price: 2 });
    await client.delete('/prices/1', 'acme');
    expect(client.exchanges).toBe(1);
    const [get, post, put, del] = engine.received;
    expect(get!.url).toBe('/prices?sku=a&sku=b&company_id=acme');
    expect(post!.url).toBe('/prices');
    expect(JSON.parse(post!.body)).toEqual({ items: [1], company_id: 'acme' });
    expect(put!.method).toBe('PUT');
    expect(JSON.parse(put!.body)).toEqual({ price: 2, company_id: 'acme' });
    expect(del!.url).toBe('/prices/1?company_id=acme');
    expect(new Set(engine.received.map((seen) => seen.headers['x-partner-id']))).toEqual(new Set([partner.partnerId]));
  });

  it('shares one exchange between concurrent first requests', async () => {
    const { client } = clientFor(partner);
    const answers = await Promise.all(Array.from({ length: 5 }, () => client.get('/prices', 'acme')));
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200]);
    expect(client.exchanges).toBe(1);
  });

  it('re-exchanges in the background before expiry', async () => {
    // expires_in is 900 s; renewing 899 s before expiry puts the renewal 1 s after the first exchange.
    const { client } = clientFor(partner, { renewBeforeSeconds: 899 });
    const first = await client.token();
    expect(client.exchanges).toBe(1);
    // The renewal comes 1 s after each exchange, without a request asking for it. It is waited for, not slept
    // for: on a loaded machine a fixed sleep can end past the next renewal too.
    // With a renewal every second, how many a later moment sees is the machine's pace: at least two.
    await vi.waitFor(() => expect(client.exchanges).toBeGreaterThanOrEqual(2), { timeout: 10_000, interval: 25 });
    // Counted when it starts: the renewed token is held once its answer is in.
    await vi.waitFor(async () => expect(await client.token()).not.toBe(first), { timeout: 10_000, interval: 25 });
    expect((await client.get('/prices', 'acme')).status).toBe(200);
  });

  it('close() stops the background renewal; the client still exchanges on demand', async () => {
    const { client } = clientFor(partner, { renewBeforeSeconds: 899 });
    await client.token();
    client.close();
    await sleep(1_600);
    expect(client.exchanges).toBe(1);
    expect((await client.get('/prices', 'acme')).status).toBe(200);
  });

  it('on a 401 (tokens revoked, keys safe) exchanges once more and retries the request once', async () => {
    const own = await operator.partner(['acme']);
    const { client, statuses } = clientFor(own);
    expect((await client.get('/prices', 'acme')).status).toBe(200);
    expect((await operator.cli('revoke-tokens', own.partnerId)).changed).toBe(true);
    await sleep(STALENESS_MS);
    statuses.length = 0;
    engine.received.length = 0;
    const response = await client.get('/prices', 'acme');
    expect(response.status).toBe(200);
    // The refused request, the exchange, the retry.
    expect(statuses).toEqual([401, 200, 200]);
    expect(client.exchanges).toBe(2);
    expect(engine.received).toHaveLength(1);
    // Later requests ride on the new token.
    expect((await client.get('/prices', 'acme')).status).toBe(200);
    expect(client.exchanges).toBe(2);
  });

  it('retries only once: a refused re-exchange surfaces as invalid_credentials', async () => {
    const disabled = await operator.partner(['acme']);
    const { client, statuses } = clientFor(disabled);
    await client.get('/prices', 'acme');
    await operator.cli('disable-partner', disabled.partnerId);
    await sleep(STALENESS_MS);
    statuses.length = 0;
    const failure = await client.get('/prices', 'acme').catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(PartnerApiError);
    expect((failure as PartnerApiError).status).toBe(401);
    expect((failure as PartnerApiError).code).toBe('invalid_credentials');
    expect(client.exchanges).toBe(2);
    // The refused request and the refused exchange; no retry of the request.
    expect(statuses).toEqual([401, 401]);
  });

  it('reports API errors with their code and request id, and bad arguments as TypeError', async () => {
    const { client } = clientFor(partner);
    const failure = (await client.get('/prices', 'not-mine').catch((error: unknown) => error)) as PartnerApiError;
    expect(failure).toBeInstanceOf(PartnerApiError);
    expect(failure.name).toBe('PartnerApiError');
    expect(failure.status).toBe(404);
    expect(failure.code).toBe('not_found');
    expect(failure.requestId).toMatch(UUID);
    expect(failure.body).toMatchObject({ error: { code: 'not_found' } });

    const wrongKeys = new PartnerClient({ baseUrl: `${server.url}/public/v1`, accessKey: partner.accessKey, secretKey: 'pctl_sk_wrong' });
    await expect(wrongKeys.token()).rejects.toMatchObject({ status: 401, code: 'invalid_credentials' });

    await expect(client.get('/x', '')).rejects.toThrow(TypeError);
    await expect(client.get('x', 'acme')).rejects.toThrow(TypeError);
    await expect(client.get('/x', 'acme', { query: { company_id: 'other' } })).rejects.toThrow(TypeError);
    await expect(client.post('/x', 'acme', { company_id: 'other' })).rejects.toThrow(TypeError);
    expect(() => new PartnerClient({ baseUrl: server.url, accessKey: '', secretKey: '' })).toThrow(TypeError);
  });

  it("reports the engine's errors as the API's envelope: its own code kept, a stable one otherwise", async () => {
    const { client } = clientFor(partner);
    engine.respond = () => ({ status: 503, body: JSON.stringify({ engine: 'busy' }) });
    const busy = (await client.get('/prices', 'acme').catch((error: unknown) => error)) as PartnerApiError;
    expect(busy).toBeInstanceOf(PartnerApiError);
    expect(busy.status).toBe(503);
    expect(busy.code).toBe('engine_unavailable');
    expect(busy.requestId).toMatch(UUID);
    engine.respond = () => ({ status: 422, body: JSON.stringify({ error: { code: 'sku_unknown', message: 'no such sku' } }) });
    const own = (await client.post('/prices', 'acme', { sku: 'x' }).catch((error: unknown) => error)) as PartnerApiError;
    expect(own.status).toBe(422);
    expect(own.code).toBe('sku_unknown');
    expect(own.message).toBe('no such sku');
    expect(engine.received).toHaveLength(2);
    expect(client.exchanges).toBe(1);
  });

  it('reports a body that is not the envelope as http_<status>, and a malformed token answer as invalid_response', async () => {
    // Something other than partnerctl serve at the base address (a proxy in front of it, say): the fake
    // engine plays it.
    const client = new PartnerClient({ baseUrl: `${engine.url}/public/v1`, accessKey: 'pctl_ak_x', secretKey: 'pctl_sk_x' });
    clients.push(client);
    engine.respond = (seen) =>
      seen.url === '/public/v1/auth/token'
        ? { body: JSON.stringify({ access_token: 'opaque', token_type: 'Bearer', expires_in: 900 }) }
        : { status: 502, headers: { 'content-type': 'text/html' }, body: '<html>bad gateway</html>' };
    const proxied = (await client.get('/prices', 'acme').catch((error: unknown) => error)) as PartnerApiError;
    expect(proxied).toBeInstanceOf(PartnerApiError);
    expect(proxied.status).toBe(502);
    expect(proxied.code).toBe('http_502');
    expect(proxied.message).toBe('the API answered 502');
    expect(proxied.body).toBe('<html>bad gateway</html>');
    expect(proxied.requestId).toBeNull();

    const malformed = new PartnerClient({ baseUrl: `${engine.url}/public/v1`, accessKey: 'pctl_ak_x', secretKey: 'pctl_sk_x' });
    clients.push(malformed);
    engine.respond = () => ({ body: JSON.stringify({ token: 'no expiry' }) });
    await expect(malformed.token()).rejects.toMatchObject({ name: 'PartnerApiError', status: 200, code: 'invalid_response' });
  });
});
