import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/** The project's own docs and help texts describe the API in its own words and never point outside the repository. */
function files(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path).flatMap((name) => files(join(path, name)));
}

describe('the docs', () => {
  it('never point at ../shared (README, docs/, BENCHMARKS.md, sources and scripts, --help texts included)', () => {
    const offenders = ['README.md', 'BENCHMARKS.md', 'docs', 'src', 'scripts', 'bench']
      .flatMap((path) => files(path))
      .filter((file) => /\.(md|ts|mjs|js)$/.test(file))
      .filter((file) => /\.\.\/shared|shared\/spec|partner-api-spec/.test(readFileSync(file, 'utf8')));
    expect(offenders).toEqual([]);
  });

  it('link docs/api.md from the README, and docs/api.md names the OpenAPI document', () => {
    expect(readFileSync('README.md', 'utf8')).toContain('](docs/api.md)');
    expect(readFileSync('docs/api.md', 'utf8')).toContain('/public/v1/openapi.json');
  });
});
