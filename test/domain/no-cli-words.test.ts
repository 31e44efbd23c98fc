import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const DOMAIN = fileURLToPath(new URL('../../src/domain/', import.meta.url));
const DB = fileURLToPath(new URL('../../src/db/', import.meta.url));

/** Strings of the domain that name partnerctl without being CLI text. */
const NOT_CLI_TEXT = new Set([
  // The actor the audit trail records for the server's own changes.
  'partnerctl serve',
  // The first line of the SQL script `db roles` prints: a comment of the script, naming what wrote it.
  "-- partnerctl db roles: four roles for ",
]);

/**
 * The text of every string and template literal in a TypeScript source (a template's `${…}` parts left
 * out), comments and regular expressions skipped. A small scanner: the build's compiler (TypeScript 7) has
 * no JavaScript API to parse with.
 */
function stringLiterals(source: string): string[] {
  const found: string[] = [];
  // Brace depth of each open template's `${…}`: a `}` at that depth resumes the template's text.
  const templates: number[] = [];
  let depth = 0;
  let last = ''; // the last significant character, to tell a regular expression from a division
  let i = 0;
  const readString = (quote: string) => {
    let text = '';
    for (i += 1; i < source.length && source[i] !== quote; i += 1) {
      if (source[i] === '\\') i += 1;
      text += source[i];
    }
    i += 1;
    return text;
  };
  const readTemplate = () => {
    let text = '';
    while (i < source.length) {
      const c = source[i]!;
      if (c === '\\') {
        text += source[i + 1];
        i += 2;
      } else if (c === '`') {
        i += 1;
        found.push(text);
        return;
      } else if (c === '$' && source[i + 1] === '{') {
        i += 2;
        found.push(text);
        templates.push(depth);
        depth += 1;
        return;
      } else {
        text += c;
        i += 1;
      }
    }
  };
  while (i < source.length) {
    const c = source[i]!;
    const next = source[i + 1];
    if (c === '/' && next === '/') {
      i = source.indexOf('\n', i);
      if (i < 0) break;
    } else if (c === '/' && next === '*') {
      i = source.indexOf('*/', i + 2) + 2;
      if (i < 2) break;
    } else if (c === '/' && (last === '' || /[(,=:[!&|?{};+\-*%<>~^]/.test(last) || /\breturn\s*$/.test(source.slice(Math.max(0, i - 8), i)))) {
      let inClass = false;
      for (i += 1; i < source.length && (inClass || source[i] !== '/'); i += 1) {
        if (source[i] === '\\') i += 1;
        else if (source[i] === '[') inClass = true;
        else if (source[i] === ']') inClass = false;
      }
      i += 1;
      last = 'x';
    } else if (c === "'" || c === '"') {
      found.push(readString(c));
      last = 'x';
    } else if (c === '`') {
      i += 1;
      readTemplate();
      last = 'x';
    } else if (c === '{') {
      depth += 1;
      i += 1;
      last = c;
    } else if (c === '}') {
      depth -= 1;
      i += 1;
      if (templates.length > 0 && templates.at(-1) === depth) {
        templates.pop();
        readTemplate();
        last = 'x';
      } else last = c;
    } else {
      if (!/\s/.test(c)) last = c;
      i += 1;
    }
  }
  return found;
}

/** What in a string is the CLI's to say: a flag (`--name`) or a command line (`partnerctl …`). */
const CLI_WORDS = /(?:^|[^\w-])--[a-z]|\bpartnerctl /;

describe('the domain leaves the CLI its words', () => {
  it('finds the literals of a source, and only those', () => {
    const source = [
      "const a = 'one --flag'; // 'in a comment --no'",
      '/* "--neither" */ const b = "two";',
      'const c = `three #{x ? `nested --deep` : "four"} five`;',
      "const d = /--regex/.test(s) ? 'six' : x / 2;",
      'if (y) { const e = `seven #{ { k: 1 }.k } eight`; }',
    ]
      .join('\n')
      .replaceAll('#{', '$' + '{');
    expect(stringLiterals(source)).toEqual(['one --flag', 'two', 'three ', 'nested --deep', 'four', ' five', 'six', 'seven ', ' eight']);
  });

  it.each([
    ['src/domain', DOMAIN],
    ['src/db', DB],
  ])('no string in %s names a CLI flag or a partnerctl command line', (_name, folder) => {
    const offending: string[] = [];
    const sources = readdirSync(folder, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts') && !name.startsWith('generated'));
    for (const file of sources.sort()) {
      for (const literal of stringLiterals(readFileSync(join(folder, file), 'utf8'))) {
        if (CLI_WORDS.test(literal) && !NOT_CLI_TEXT.has(literal)) offending.push(`${file}: ${literal}`);
      }
    }
    expect(offending).toEqual([]);
  });
});
