import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall'] as const;

interface Manifest {
  name: string;
  version: string;
  scripts?: Record<string, string>;
  allowScripts?: Record<string, boolean>;
}

/** Every installed package (nested node_modules included) whose install would run a script of its own. */
function packagesWithInstallScripts(folder: string, found = new Map<string, Manifest>()): Map<string, Manifest> {
  if (!existsSync(folder)) return found;
  for (const entry of readdirSync(folder)) {
    if (entry.startsWith('.')) continue;
    const path = join(folder, entry);
    if (entry.startsWith('@')) {
      packagesWithInstallScripts(path, found);
      continue;
    }
    const manifestPath = join(path, 'package.json');
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as Manifest;
    // npm runs `node-gyp rebuild` for a binding.gyp without an install script of its own.
    const scripted = INSTALL_SCRIPTS.some((name) => manifest.scripts?.[name]) || existsSync(join(path, 'binding.gyp'));
    if (scripted) found.set(`${manifest.name}@${manifest.version}`, manifest);
    packagesWithInstallScripts(join(path, 'node_modules'), found);
  }
  return found;
}

describe('install scripts (npm allowScripts)', () => {
  const project = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Manifest;
  const allowed = project.allowScripts ?? {};

  it('declares every installed dependency that has an install script, approved or denied', () => {
    const undeclared = [...packagesWithInstallScripts(join(ROOT, 'node_modules')).values()]
      .filter((manifest) => allowed[manifest.name] === undefined && allowed[`${manifest.name}@${manifest.version}`] === undefined)
      .map((manifest) => `${manifest.name}@${manifest.version}`);
    expect(undeclared).toEqual([]);
  });

  it('lets the native modules the CLI loads build or fetch their binaries', () => {
    expect([allowed.argon2, allowed['better-sqlite3']]).toEqual([true, true]);
  });
});

describe('37.17: every package the lock installs supports the Node the README names', () => {
  it('no entry of package-lock.json requires a newer Node than engines.node allows (npm ci prints no EBADENGINE)', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
    const oldest = semver.minVersion(manifest.engines.node);
    expect(oldest?.version).toBe('20.19.0');
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { engines?: { node?: string } | string[] }>;
    };
    const refusing = Object.entries(lock.packages)
      .filter(([, entry]) => {
        const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
        return range !== undefined && oldest !== null && !semver.satisfies(oldest, range);
      })
      .map(([path, entry]) => `${path} (${JSON.stringify(entry.engines)})`);
    expect(refusing).toEqual([]);
  });
});
