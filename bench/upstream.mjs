// The stand-in recommendation engine: a plain node:http server on loopback answering every request with the
// same small JSON 200 (GET /__count: how many it answered). Prints {"port":N} on stdout once listening; exits on SIGTERM.
import { createServer } from 'node:http';

const body = JSON.stringify({
  company_id: 'company-0000001',
  recommendations: [
    { sku: 'SKU-1001', price: 19.99, currency: 'EUR' },
    { sku: 'SKU-1002', price: 4.5, currency: 'EUR' },
  ],
});
let served = 0;
const server = createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    // What reached the engine, for bench/soak.mjs to compare with the usage the servers wrote.
    if (request.url === '/__count') return response.end(String(served));
    served++;
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    response.end(body);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)).closeAllConnections());
