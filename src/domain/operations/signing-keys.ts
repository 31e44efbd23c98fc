import { createPrivateKey, createPublicKey, generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto';
import { closeSync, linkSync, mkdirSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync, type Stats } from 'node:fs';
import { dirname } from 'node:path';
import type { Clock } from '../../clock.js';
import { AppError } from '../../errors.js';

// Tokens are signed with Ed25519 (JWS alg EdDSA): the key file holds private keys, but the public halves
// could be published for anyone to verify without being able to mint; signatures are deterministic and
// small; and pinning the one asymmetric algorithm closes the HS256/RS256 confusion door.
export const SIGNING_ALGORITHM = 'EdDSA';

/** A retired key still verifies for a token's lifetime plus this margin, then it is pruned. */
export const RETIRED_KEY_OVERLAP_SECONDS = 900 + 60;

interface StoredKey {
  kid: string;
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  d: string;
  alg: typeof SIGNING_ALGORITHM;
  use: 'sig';
  created_at: string;
  retired_at?: string;
}

interface KeyFile {
  keys: StoredKey[];
}

function newStoredKey(now: Date): StoredKey {
  const { privateKey } = generateKeyPairSync('ed25519');
  const jwk = privateKey.export({ format: 'jwk' }) as { x: string; d: string };
  return {
    kid: randomUUID(),
    kty: 'OKP',
    crv: 'Ed25519',
    x: jwk.x,
    d: jwk.d,
    alg: SIGNING_ALGORITHM,
    use: 'sig',
    created_at: now.toISOString(),
  };
}

function unreadable(path: string, why: string, cause?: unknown): AppError {
  return new AppError('signing_key_unavailable', `signing-key file ${path} ${why}`, {
    hint: 'check PARTNERCTL_SIGNING_KEY_FILE; every serve instance and the CLI must share the same file',
    cause,
  });
}

function parseKeyFile(path: string, text: string): KeyFile {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw unreadable(path, 'is not valid JSON', error);
  }
  const keys = (parsed as KeyFile)?.keys;
  if (!Array.isArray(keys) || keys.length === 0 || !keys.every((key) => key?.kty === 'OKP' && key.crv === 'Ed25519' && key.kid && key.d)) {
    throw unreadable(path, 'holds no Ed25519 signing key');
  }
  return { keys };
}

/** Writes the whole file under a new name, then moves it into place: readers never see half a file. */
function writeKeyFile(path: string, file: KeyFile, exclusive: boolean): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.${randomUUID()}.tmp`;
  const fd = openSync(temporary, 'wx', 0o600);
  try {
    writeSync(fd, `${JSON.stringify(file, null, 2)}\n`);
  } finally {
    closeSync(fd);
  }
  try {
    if (exclusive) linkSync(temporary, path);
    else renameSync(temporary, path);
  } finally {
    if (exclusive) unlinkSync(temporary);
  }
}

/** What tells one version of the file from another: a different file moved into place can carry any time. */
function signatureOf(stat: Stats): string {
  return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeMs}`;
}

export class SigningKeys {
  private file: KeyFile;
  private signature: string;
  private readonly privateKeys = new Map<string, KeyObject>();
  private readonly publicKeys = new Map<string, KeyObject>();

  private constructor(
    readonly path: string,
    private readonly clock: Clock,
    file: KeyFile,
    signature: string,
  ) {
    this.file = file;
    this.signature = signature;
  }

  /** Loads the key file, creating it (mode 0600) with a first key when it does not exist; `clock` says which keys still verify. */
  static open(path: string, clock: Clock): SigningKeys {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw unreadable(path, 'cannot be read', error);
      try {
        writeKeyFile(path, { keys: [newStoredKey(new Date(clock.now()))] }, true);
      } catch (createError) {
        // Another process created it first: use theirs.
        if ((createError as NodeJS.ErrnoException).code !== 'EEXIST') throw unreadable(path, 'cannot be created', createError);
      }
      text = readFileSync(path, 'utf8');
    }
    const stat = statSync(path);
    return new SigningKeys(path, clock, parseKeyFile(path, text), signatureOf(stat));
  }

  /**
   * Looks at the file: unchanged, reloaded (a rotation, or another file put in its place), or missing (the
   * keys in memory are kept). `lost` names the keys that still verified tokens here and that the reloaded
   * file no longer holds: tokens they signed are refused from now on.
   */
  poll(now = this.clock.now()): { state: 'unchanged' | 'reloaded' | 'missing'; lost: string[] } {
    let signature: string;
    try {
      signature = signatureOf(statSync(this.path));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { state: 'missing', lost: [] };
      throw unreadable(this.path, 'cannot be read', error);
    }
    if (signature === this.signature) return { state: 'unchanged', lost: [] };
    const previous = this.file.keys.filter((key) => stillVerifies(key, now)).map((key) => key.kid);
    this.file = parseKeyFile(this.path, readFileSync(this.path, 'utf8'));
    this.signature = signature;
    this.privateKeys.clear();
    this.publicKeys.clear();
    const kept = new Set(this.kids());
    return { state: 'reloaded', lost: previous.filter((kid) => !kept.has(kid)) };
  }

  /** Every key id in the file, current and retired. */
  kids(): string[] {
    return this.file.keys.map((key) => key.kid);
  }

  current(): { kid: string; key: KeyObject } {
    const stored = this.file.keys.filter((key) => !key.retired_at).at(-1);
    if (!stored) throw unreadable(this.path, 'has no current (unretired) key');
    let key = this.privateKeys.get(stored.kid);
    if (!key) {
      key = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', x: stored.x, d: stored.d }, format: 'jwk' });
      this.privateKeys.set(stored.kid, key);
    }
    return { kid: stored.kid, key };
  }

  /** The public key for a kid, while it is current or within its overlap after retirement. */
  verificationKey(kid: string | undefined, now = this.clock.now()): KeyObject | undefined {
    if (!kid) return undefined;
    const stored = this.file.keys.find((key) => key.kid === kid);
    if (!stored || !stillVerifies(stored, now)) return undefined;
    let key = this.publicKeys.get(kid);
    if (!key) {
      key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: stored.x }, format: 'jwk' });
      this.publicKeys.set(kid, key);
    }
    return key;
  }

  /** The public keys, as a JWK set: what a verifier that must not mint would be given. */
  publicJwks(): { keys: object[] } {
    return { keys: this.file.keys.map(({ kid, kty, crv, x, alg, use }) => ({ kid, kty, crv, x, alg, use })) };
  }

  /** When the key was retired (ms since the epoch), or null while it is current or unknown. */
  retiredAt(kid: string | undefined): number | null {
    const retired = this.file.keys.find((key) => key.kid === kid)?.retired_at;
    return retired ? Date.parse(retired) : null;
  }
}

function stillVerifies(key: StoredKey, now: number): boolean {
  return !key.retired_at || Date.parse(key.retired_at) + RETIRED_KEY_OVERLAP_SECONDS * 1000 > now;
}

/**
 * Adds a new current key; the previous one is retired but still verifies the tokens it signed until they
 * have expired. Keys retired longer ago than that are dropped from the file.
 */
export function rotateSigningKey(path: string, now: Date): { kid: string; retiredKid: string | null; pruned: number } {
  const existing = SigningKeys.open(path, { now: () => now.getTime() });
  const file = parseKeyFile(path, readFileSync(path, 'utf8'));
  const kept = file.keys.filter((key) => stillVerifies(key, now.getTime()));
  const retiredKid = existing.current().kid;
  const next = newStoredKey(now);
  const keys = kept.map((key) => (key.retired_at ? key : { ...key, retired_at: now.toISOString() }));
  writeKeyFile(path, { keys: [...keys, next] }, false);
  return { kid: next.kid, retiredKid, pruned: file.keys.length - kept.length };
}
