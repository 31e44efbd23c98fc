import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BatchedLines } from '../../src/http/server/log-destination.js';

const ROOT = resolve(import.meta.dirname, '../..');

describe('the request log destination (lines batched in front of pino.destination)', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'partnerctl-log-'));
    file = join(dir, 'log');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const sinkTo = (path: string) => pino.destination({ dest: path, sync: true, mkdir: false });

  it('holds lines until a batch is full, then writes them in order', () => {
    const batch = new BatchedLines(sinkTo(file), 100, 60_000);
    batch.write('a'.repeat(40) + '\n');
    batch.write('b'.repeat(40) + '\n');
    expect(readFileSync(file, 'utf8')).toBe('');
    batch.write('c'.repeat(40) + '\n');
    expect(readFileSync(file, 'utf8')).toBe(`${'a'.repeat(40)}\n${'b'.repeat(40)}\n${'c'.repeat(40)}\n`);
    batch.close();
  });

  it('a line longer than a batch goes out at once, whole, after the lines before it', () => {
    const batch = new BatchedLines(sinkTo(file), 100, 60_000);
    batch.write('short\n');
    const long = `${'x'.repeat(5_000)}\n`;
    batch.write(long);
    expect(readFileSync(file, 'utf8')).toBe(`short\n${long}`);
    batch.close();
  });

  it('writes waiting lines within the flush interval', async () => {
    const batch = new BatchedLines(sinkTo(file), 1_000_000, 50);
    batch.write('one\n');
    expect(readFileSync(file, 'utf8')).toBe('');
    await new Promise((done) => setTimeout(done, 200));
    expect(readFileSync(file, 'utf8')).toBe('one\n');
    batch.close();
  });

  it('keeps pino lines and hand-written lines in the order they were written, multi-byte text intact', () => {
    const batch = new BatchedLines(sinkTo(file), 1_000_000, 60_000);
    const logger = pino({ base: null, timestamp: false }, batch);
    batch.write('{"first":true}\n');
    logger.warn({ name: 'Zoë – 東京' }, 'second');
    batch.write('{"third":true}\n');
    batch.flushSync();
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.map((line) => line.first ?? line.msg ?? line.third)).toEqual([true, 'second', true]);
    expect(lines[1]!.name).toBe('Zoë – 東京');
    batch.close();
  });

  it('close writes what waits and stops the timer', () => {
    const batch = new BatchedLines(sinkTo(file), 1_000_000, 60_000);
    batch.write('last\n');
    batch.close();
    expect(readFileSync(file, 'utf8')).toBe('last\n');
  });

  it('a process that exits without closing still writes its waiting lines', () => {
    // The built module (`npm test` builds first), in a real process that exits with lines still waiting.
    const module = pathToFileURL(join(ROOT, 'dist/http/server/log-destination.js')).href;
    const script = `
      import { openSync } from 'node:fs';
      import { pino } from 'pino';
      const { BatchedLines } = await import(${JSON.stringify(module)});
      // An open descriptor, as serve's stdout is.
      const batch = new BatchedLines(pino.destination({ dest: openSync(${JSON.stringify(file)}, 'w'), sync: false }), 1_000_000, 60_000);
      for (let i = 0; i < 1000; i++) batch.write('line ' + i + '\\n');
      process.exit(0);
    `;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(1000);
    expect(lines[999]).toBe('line 999');
  });
});
