import { open, type FileHandle } from 'node:fs/promises';
import { AppError } from '../errors.js';
import { isValidCompanyId } from '../domain/rules/validation.js';
import type { Session } from './session.js';

/** The whole of a file, or of stdin for '-', as UTF-8 text: anything else is refused, naming its first bad line. */
export async function readInput(session: Session, path: string, flag: string): Promise<string> {
  let bytes: Buffer;
  if (path === '-') {
    const parts: Buffer[] = [];
    for await (const chunk of session.terminal.in) parts.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
    bytes = Buffer.concat(parts);
  } else {
    const handle = await openInputFile(path, flag);
    try {
      bytes = await handle.readFile();
    } catch (error) {
      throw unreadable(path, flag, error);
    } finally {
      await handle.close();
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

/** The longest line read: a company id is at most 128 characters (a CSV line may carry more columns); longer is bad. */
const MAX_LINE_BYTES = 64 * 1024;

/**
 * The lines of a byte stream, split at '\n', one at a time: the input is never held whole. A line longer than
 * MAX_LINE_BYTES is cut to that length (and refused by the reader).
 */
async function* linesOf(source: AsyncIterable<Buffer | string>): AsyncGenerator<Buffer> {
  let rest: Buffer = Buffer.alloc(0);
  for await (const chunk of source) {
    const data = Buffer.concat([rest, typeof chunk === 'string' ? Buffer.from(chunk) : chunk]);
    let start = 0;
    for (let end = data.indexOf(0x0a); end >= 0; end = data.indexOf(0x0a, start)) {
      yield data.subarray(start, Math.min(end, start + MAX_LINE_BYTES));
      start = end + 1;
    }
    // Copied, so that the chunk it came from can go.
    rest = Buffer.from(data.subarray(start, start + MAX_LINE_BYTES + 1));
  }
  if (rest.length > 0) yield rest.subarray(0, MAX_LINE_BYTES);
}

/** A file's bytes as a stream, or stdin's for '-'; a file that cannot be opened is refused, naming it. */
async function inputStream(session: Session, path: string, flag: string): Promise<AsyncIterable<Buffer | string>> {
  if (path === '-') return session.terminal.in as AsyncIterable<Buffer | string>;
  return (await openInputFile(path, flag)).createReadStream({ highWaterMark: 1024 * 1024 });
}

function unreadable(path: string, flag: string, error: unknown): AppError {
  const code = (error as NodeJS.ErrnoException).code;
  const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a folder, not a file' : `cannot be read (${code})`;
  return new AppError('invalid_argument', `${flag} ${path}: ${why}`, { hint: `give an existing file, or '-' for stdin`, cause: error });
}

/** The one way an input file is opened: a path that is missing, a folder or unreadable is refused, naming it. */
async function openInputFile(path: string, flag: string): Promise<FileHandle> {
  let handle: FileHandle;
  try {
    handle = await open(path);
  } catch (error) {
    throw unreadable(path, flag, error);
  }
  if ((await handle.stat()).isDirectory()) {
    await handle.close();
    throw unreadable(path, flag, Object.assign(new Error('a folder'), { code: 'EISDIR' }));
  }
  return handle;
}

/**
 * Company ids from a list file, read line by line: one per line, surrounding white space dropped, blank lines
 * and `#` comment lines ignored; a `.csv` file gives its first column, its first line (the header) skipped;
 * UTF-8 (a leading byte-order mark dropped). Every line is checked before anything is returned: one bad line
 * fails the whole input, naming every bad line number. Each id is added to `into` (repeats once).
 */
export async function readCompanyList(source: AsyncIterable<Buffer | string>, name: string, csv: boolean, into: Set<string>): Promise<void> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const bad: number[] = [];
  let headerSkipped = !csv;
  let number = 0;
  for await (const bytes of linesOf(source)) {
    number++;
    if (bytes.length >= MAX_LINE_BYTES) {
      bad.push(number);
      continue;
    }
    let raw: string;
    try {
      raw = decoder.decode(bytes);
    } catch {
      throw new AppError('invalid_argument', `${name}: not valid UTF-8 on line ${number}; nothing was changed`, {
        hint: 'save the file as UTF-8 (iconv -f latin1 -t utf-8 converts Latin-1)',
      });
    }
    const line = (number === 1 ? raw.replace(/^\uFEFF/, '') : raw).replace(/\r$/, '').trim();
    if (line === '' || line.startsWith('#')) continue;
    if (!headerSkipped) {
      headerSkipped = true;
      continue;
    }
    const id = csv ? firstCsvField(line) : line;
    if (isValidCompanyId(id)) into.add(id);
    else bad.push(number);
  }
  if (bad.length > 0) {
    const named = bad.length > 100 ? `${bad.slice(0, 100).join(', ')} and ${bad.length - 100} more` : bad.join(', ');
    throw new AppError(
      'invalid_argument',
      `${name}: invalid company id on line${bad.length > 1 ? 's' : ''} ${named} (ids are 1-128 visible ASCII characters); nothing was changed`,
      { hint: 'fix those lines and run again' },
    );
  }
}

/** The company ids a command was given, without repeats: every --company, then the lines of --from-file. */
export async function companyIdsFromOptions(
  session: Session,
  options: { company?: string[]; fromFile?: string },
): Promise<string[]> {
  const given = options.company ?? [];
  const bad = given.filter((id) => !isValidCompanyId(id));
  if (bad.length > 0) {
    // The one-company message the command always gave, naming the flag.
    const { validateCompanyId } = await import('../domain/rules/validation.js');
    validateCompanyId(bad[0]!);
  }
  const ids = new Set(given);
  if (options.fromFile !== undefined) {
    const name = options.fromFile === '-' ? '--from-file - (stdin)' : `--from-file ${options.fromFile}`;
    await readCompanyList(await inputStream(session, options.fromFile, '--from-file'), name, /\.csv$/i.test(options.fromFile), ids);
  }
  return [...ids];
}
