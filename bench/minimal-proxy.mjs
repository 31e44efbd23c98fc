// A reference point for the gate benchmark, not part of the product: the least a Node proxy can do per
// request (node:http server, undici pool to the upstream, body buffered and passed on), with no framework,
// no gate, no logging. Its ratio to the direct upstream shows what this machine allows any Node proxy.
// Prints {"port":N} on stdout once listening.
import { createServer } from 'node:http';
import { Pool } from 'undici';

const pool = new Pool(process.argv[2], { connections: 128 });
const server = createServer(async (request, response) => {
  try {
    const upstream = await pool.request({
      method: request.method,
      path: request.url.replace('/public/v1', ''),
      headers: { 'x-partner-id': 'reference', 'x-company-id': 'reference', accept: request.headers.accept ?? '*/*' },
    });
    const body = Buffer.from(await upstream.body.arrayBuffer());
    response.writeHead(upstream.statusCode, { 'content-type': upstream.headers['content-type'], 'content-length': body.length });
    response.end(body);
  } catch {
    response.writeHead(502).end();
  }
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)).closeAllConnections());
