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
import { pathToFileURL } from 'node:url';

const KEY_FILE = join(tmpdir(), 'partnerctl-secret-scanning-key.pem');
export const KEY_ID = 'local-test-key';

/** What GitHub's key list answers: one P-256 public key, current. */
export function keyListBody(publicKey, keyId = KEY_ID) {
  return JSON.stringify({ public_keys: [{ key_identifier: keyId, key: publicKey.export({ type: 'spki', format: 'pem' }).toString(), is_current: true }] });
}

/** The headers GitHub sends with an alert body: its key id and its ECDSA signature (SHA-256, base64 DER). */
export function signedHeaders(body, key, keyId = KEY_ID) {
  return {
    'content-type': 'application/json',
    'github-public-key-identifier': keyId,
    'github-public-key-signature': sign('sha256', Buffer.from(body), { key, dsaEncoding: 'der' }).toString('base64'),
  };
}

function privateKey() {
  if (!existsSync(KEY_FILE)) {
    const { privateKey: key } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    writeFileSync(KEY_FILE, key.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  }
  return createPrivateKey(readFileSync(KEY_FILE));
}

async function main([command, ...rest]) {
  if (command === 'keys') {
    const port = Number(rest[0] ?? 8089);
    const body = keyListBody(createPublicKey(privateKey()));
    createServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end(body)).listen(port, '127.0.0.1', () =>
      process.stderr.write(`key list on http://127.0.0.1:${port}/ (set PUBLIC_API_SECRET_SCANNING_KEYS_URL to it)\n`),
    );
  } else if (command === 'send' && rest.length >= 2) {
    const [server, token, foundAt = 'https://github.com/example/repo/blob/0000000/config.env'] = rest;
    const body = JSON.stringify([{ token, type: 'partnerctl_secret_key', url: foundAt, source: 'content' }]);
    const response = await fetch(new URL('/secret-scanning/github', server), { method: 'POST', headers: signedHeaders(body, privateKey()), body });
    process.stdout.write(`${response.status} ${await response.text()}\n`);
    process.exitCode = response.ok ? 0 : 1;
  } else {
    process.stderr.write('usage: secret-scanning-alert.mjs keys [port] | send <server-url> <token> [found-at-url]\n');
    process.exitCode = 2;
  }
}

// Run as a command; imported (bench/secret-scanning.mjs), it only lends its key list and signature.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main(process.argv.slice(2));
