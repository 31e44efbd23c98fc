// Tries the secret-scanning receiver without GitHub: plays GitHub's key list and signs a sample alert with a
// local ECDSA P-256 key, exactly as GitHub signs (SHA-256 over the raw body, base64 DER).
//
//   node scripts/secret-scanning-alert.mjs keys [port]          # serves the key list (default port 8089) until Ctrl-C
//   PUBLIC_API_SECRET_SCANNING=github \
//   PUBLIC_API_SECRET_SCANNING_KEYS_URL=http://127.0.0.1:8089/ partnerctl serve
//   node scripts/secret-scanning-alert.mjs send http://127.0.0.1:8080 <token> [found-at-url]
//
// The private key is kept in $TMPDIR/partnerctl-secret-scanning-key.pem (made on first use).
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const KEY_FILE = join(tmpdir(), 'partnerctl-secret-scanning-key.pem');
const KEY_ID = 'local-test-key';

function privateKey() {
  if (!existsSync(KEY_FILE)) {
    const { privateKey: key } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    writeFileSync(KEY_FILE, key.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  }
  return createPrivateKey(readFileSync(KEY_FILE));
}

const [command, ...rest] = process.argv.slice(2);
if (command === 'keys') {
  const port = Number(rest[0] ?? 8089);
  const pem = createPublicKey(privateKey()).export({ type: 'spki', format: 'pem' }).toString();
  const body = JSON.stringify({ public_keys: [{ key_identifier: KEY_ID, key: pem, is_current: true }] });
  createServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end(body)).listen(port, '127.0.0.1', () =>
    process.stderr.write(`key list on http://127.0.0.1:${port}/ (set PUBLIC_API_SECRET_SCANNING_KEYS_URL to it)\n`),
  );
} else if (command === 'send' && rest.length >= 2) {
  const [server, token, foundAt = 'https://github.com/example/repo/blob/0000000/config.env'] = rest;
  const body = JSON.stringify([{ token, type: 'partnerctl_secret_key', url: foundAt, source: 'content' }]);
  const signature = sign('sha256', Buffer.from(body), { key: privateKey(), dsaEncoding: 'der' }).toString('base64');
  const response = await fetch(new URL('/secret-scanning/github', server), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'github-public-key-identifier': KEY_ID, 'github-public-key-signature': signature },
    body,
  });
  process.stdout.write(`${response.status} ${await response.text()}\n`);
  process.exitCode = response.ok ? 0 : 1;
} else {
  process.stderr.write('usage: secret-scanning-alert.mjs keys [port] | send <server-url> <token> [found-at-url]\n');
  process.exitCode = 2;
}
