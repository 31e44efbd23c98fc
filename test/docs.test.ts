import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
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

  it('link only to files and headings that exist (every relative link of README.md and docs/*.md)', () => {
    const documents = ['README.md', ...readdirSync('docs').filter((name) => name.endsWith('.md')).map((name) => join('docs', name))];
    const broken = documents.flatMap((document) => {
      const text = readFileSync(document, 'utf8').replace(/```[\s\S]*?```/g, '');
      return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
        .map((match) => match[1]!)
        .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target))
        .filter((target) => {
          const [path = '', anchor] = target.split('#');
          const file = path === '' ? document : normalize(join(dirname(document), path));
          if (!existsSync(file)) return true;
          return anchor !== undefined && file.endsWith('.md') && !headingSlugs(file).has(anchor);
        })
        .map((target) => `${document}: ${target}`);
    });
    expect(broken).toEqual([]);
  });
});

/** The anchors GitHub gives a Markdown file's headings (lower case, punctuation dropped, spaces to hyphens). */
function headingSlugs(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  const slugs = new Set<string>();
  for (const [, title] of text.matchAll(/^#{1,6} +(.+)$/gm)) {
    const base = title!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    let slug = base;
    for (let n = 1; slugs.has(slug); n++) slug = `${base}-${n}`;
    slugs.add(slug);
  }
  return slugs;
}
