import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serve, type Served } from '../support/serve.js';
import { UUID } from './support.js';

describe('a client that never finishes sending its request', () => {
  let backend: TestBackend;
  let server: Served;
  let token: string;

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    await runCli(['create-partner', '--name', 'Slow'], backend.env);
    token = (await runCli(['mint-test-token', 'Slow', '--json'], backend.env)).json().access_token;
    server = await serve({ ...backend.env, PUBLIC_API_REQUEST_TIMEOUT_MS: '500' });
  });
  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    await backend?.dispose();
  });

  it('is answered 408 with an envelope and disconnected once the request timeout passes', async () => {
    const { hostname, port } = new URL(server.url);
    const started = Date.now();
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => {
        socket.write(
          `POST /public/v1/prices HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
            'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"company_id":',
        );
      });
      let data = '';
      socket.setEncoding('utf8').on('data', (chunk) => (data += chunk));
      socket.on('error', reject);
      socket.on('close', () => resolve(data));
      setTimeout(() => socket.destroy(new Error('still open after 10 s')), 10_000);
    });
    expect(Date.now() - started).toBeLessThan(5_000);
    const [head = '', body = ''] = answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 408 /);
    const envelope = JSON.parse(body) as { error: { code: string; request_id: string } };
    expect(envelope.error.code).toBe('request_timeout');
    expect(envelope.error.request_id).toMatch(UUID);
  });

  it('still serves well-formed requests', async () => {
    const response = await fetch(`${server.url}/healthz`);
    expect(response.status).toBe(200);
  });
});
