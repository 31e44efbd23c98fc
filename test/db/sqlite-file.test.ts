import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SqlDatabase, SqliteFileEvent } from '../../src/db/sql.js';
import { openSqlite } from '../../src/db/sqlite.js';

describe('the SQLite module: a watched file is the one at the path, or nothing', () => {
  let dir: string;
  let path: string;
  let db: SqlDatabase | undefined;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'partnerctl-sqlite-file-'));
    path = join(dir, 'partnerctl.db');
  });
  afterEach(async () => {
    await db?.close();
    db = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  /** A database with one row, its WAL folded into the file, and a copy of it beside. */
  async function withRow(options: Parameters<typeof openSqlite>[1]): Promise<{ db: SqlDatabase; copy: string }> {
    const opened = await openSqlite(path, options);
    db = opened;
    await opened.transaction(async (tx) => {
      await tx.run('CREATE TABLE t (x TEXT)');
      await tx.run('INSERT INTO t (x) VALUES ($1)', ['kept']);
    }, { timeoutMs: 5_000 });
    await opened.query('PRAGMA wal_checkpoint(TRUNCATE)');
    const copy = join(dir, 'copy.db');
    copyFileSync(path, copy);
    return { db: opened, copy };
  }

  it('refuses every use once the file is deleted, says so once, and reopens a database put back (epoch + 1)', async () => {
    const events: SqliteFileEvent[] = [];
    const { db, copy } = await withRow({ watchFile: true, onFileEvent: (event) => events.push(event) });
    expect(db.epoch).toBe(0);

    rmSync(path);
    await expect(db.verify()).rejects.toMatchObject({ code: 'SQLITE_FILE_UNAVAILABLE' });
    await expect(db.verify()).rejects.toMatchObject({ code: 'SQLITE_FILE_UNAVAILABLE' });
    await expect(db.query('SELECT x FROM t')).rejects.toMatchObject({ code: 'SQLITE_FILE_UNAVAILABLE' });
    expect(events).toEqual([{ kind: 'unavailable', path, reason: expect.stringMatching(/missing/) }]);

    copyFileSync(copy, path);
    await db.verify();
    expect(events.at(-1)).toEqual({ kind: 'reopened', path });
    expect(db.epoch).toBe(1);
    expect(await db.query('SELECT x FROM t')).toEqual([{ x: 'kept' }]);
  });

  it('refuses a file overwritten by something that is not a database', async () => {
    const events: SqliteFileEvent[] = [];
    const { db } = await withRow({ watchFile: true, onFileEvent: (event) => events.push(event) });
    rmSync(path);
    writeFileSync(path, 'not a database at all');
    await expect(db.verify()).rejects.toMatchObject({ code: 'SQLITE_FILE_UNAVAILABLE' });
    expect(events).toEqual([{ kind: 'unavailable', path, reason: expect.stringMatching(/not a SQLite database/) }]);
    expect(db.epoch).toBe(0);
  });

  it('unwatched, keeps the connection it opened whatever happens at the path', async () => {
    const { db } = await withRow({});
    rmSync(path);
    await db.verify();
    expect(await db.query('SELECT x FROM t')).toEqual([{ x: 'kept' }]);
    expect(db.epoch).toBe(0);
  });

  it('opens with WAL, foreign keys on and writes that start with the write lock', async () => {
    const { db } = await withRow({});
    expect(await db.query('PRAGMA journal_mode')).toEqual([{ journal_mode: 'wal' }]);
    expect(await db.query('PRAGMA foreign_keys')).toEqual([{ foreign_keys: 1 }]);
    const other = await openSqlite(path);
    try {
      let release!: () => void;
      const held = db.transaction(() => new Promise<void>((resolve) => (release = resolve)), { timeoutMs: 5_000 });
      // Another connection's write waits for the lock, here no longer than asked, before failing.
      await expect(other.transaction((tx) => tx.run('INSERT INTO t (x) VALUES ($1)', ['late']), { timeoutMs: 5_000, lockWaitMs: 50 })).rejects.toMatchObject({
        code: 'SQLITE_BUSY',
      });
      release();
      await held;
    } finally {
      await other.close();
    }
  });
});
