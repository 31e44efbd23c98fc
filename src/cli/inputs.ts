import { readFile } from 'node:fs/promises';
import { AppError } from '../errors.js';
import { isValidCompanyId } from '../domain/validation.js';
import type { Session } from './session.js';

/** The whole of a file, or of stdin for '-', as UTF-8 text: anything else is refused, naming its first bad line. */
export async function readInput(session: Session, path: string, flag: string): Promise<string> {
  let bytes: Buffer;
  if (path === '-') {
    const parts: Buffer[] = [];
    for await (const chunk of session.terminal.in) parts.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
    bytes = Buffer.concat(parts);
  } else {
    try {
      bytes = await readFile(path);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      throw new AppError('invalid_argument', `${flag} ${path}: ${code === 'ENOENT' ? 'no such file' : `cannot be read (${code})`}`, {
        hint: `give an existing file, or '-' for stdin`,
        cause: error,
      });
    }
  }
  return decodeUtf8(bytes, path === '-' ? `${flag} - (stdin)` : `${flag} ${path}`);
}

/** UTF-8 text (a leading byte-order mark dropped); bytes that are not UTF-8 fail, naming the first such line. */
export function decodeUtf8(bytes: Buffer, source: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    let line = 1;
    let start = 0;
    const strict = new TextDecoder('utf-8', { fatal: true });
    for (let i = 0; i <= bytes.length; i++) {
      if (i === bytes.length || bytes[i] === 0x0a) {
        try {
          strict.decode(bytes.subarray(start, i));
        } catch {
          break;
        }
        line++;
        start = i + 1;
      }
    }
    throw new AppError('invalid_argument', `${source}: not valid UTF-8 on line ${line}; nothing was changed`, {
      hint: 'save the file as UTF-8 (iconv -f latin1 -t utf-8 converts Latin-1)',
    });
  }
}

/** The first field of a CSV line ("quoted" fields may hold commas and "" for a quote). */
function firstCsvField(line: string): string {
  if (!line.startsWith('"')) return line.split(',')[0]!.trim();
  let value = '';
  for (let i = 1; i < line.length; i++) {
    if (line[i] === '"') {
      if (line[i + 1] === '"') {
        value += '"';
        i++;
      } else break;
    } else value += line[i];
  }
  return value;
}

/**
 * Company ids from a list file: one per line, surrounding white space dropped, blank lines and `#` comment
 * lines ignored; a `.csv` file gives its first column, its first line (the header) skipped. Every line is
 * checked before anything is returned: one bad line fails the whole input, naming every bad line number.
 */
export function parseCompanyList(text: string, source: string, csv: boolean): string[] {
  const ids: string[] = [];
  const bad: number[] = [];
  let headerSkipped = !csv;
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  lines.forEach((raw, index) => {
    const line = raw.replace(/\r$/, '').trim();
    if (line === '' || line.startsWith('#')) return;
    if (!headerSkipped) {
      headerSkipped = true;
      return;
    }
    const id = csv ? firstCsvField(line) : line;
    if (isValidCompanyId(id)) ids.push(id);
    else bad.push(index + 1);
  });
  if (bad.length > 0) {
    throw new AppError(
      'invalid_argument',
      `${source}: invalid company id on line${bad.length > 1 ? 's' : ''} ${bad.join(', ')} (ids are 1-128 visible ASCII characters); nothing was changed`,
      { hint: 'fix those lines and run again' },
    );
  }
  return ids;
}

/** The company ids a command was given: every --company, then the lines of --from-file. */
export async function companyIdsFromOptions(
  session: Session,
  options: { company?: string[]; fromFile?: string },
): Promise<string[]> {
  const ids: string[] = [];
  const given = options.company ?? [];
  const bad = given.filter((id) => !isValidCompanyId(id));
  if (bad.length > 0) {
    // The one-company message the command always gave, naming the flag.
    const { validateCompanyId } = await import('../domain/validation.js');
    validateCompanyId(bad[0]!);
  }
  ids.push(...given);
  if (options.fromFile !== undefined) {
    const text = await readInput(session, options.fromFile, '--from-file');
    const source = options.fromFile === '-' ? '--from-file - (stdin)' : `--from-file ${options.fromFile}`;
    ids.push(...parseCompanyList(text, source, /\.csv$/i.test(options.fromFile)));
  }
  return ids;
}
