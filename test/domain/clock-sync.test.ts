import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OffsetClock, systemClock } from '../../src/clock.js';
import type { Database } from '../../src/db/client.js';
import { CLOCK_TOLERANCE_MS, ClockSync } from '../../src/domain/runtime/clock-sync.js';
import { backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';

describe('the database server\'s clock on PostgreSQL', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    let backend: TestBackend;
    let db: Database;

    beforeAll(async () => {
      backend = await createBackend('postgresql');
      db = await openMigrated(backend);
    });
    afterAll(async () => {
      await db?.close();
      await backend?.dispose();
    });

    it('a handle opened without a clock reads the database server\'s: an OffsetClock measured at open', () => {
      expect(db.clock).toBeInstanceOf(OffsetClock);
      // The test's database runs on this host: the offset is the measurement's error only.
      expect(Math.abs(db.clock.now() - Date.now())).toBeLessThan(250);
    });

    it('a host clock a minute fast is corrected, reported skewed, and back within tolerance once fixed', async () => {
      let hostShift = 60_000;
      const host = { now: () => systemClock.now() + hostShift };
      const clock = new OffsetClock(host);
      const changes: Array<[boolean, number]> = [];
      const sync = ClockSync.of({ ...db, clock }, { onChange: (skewed, offsetMs) => changes.push([skewed, offsetMs]) })!;
      expect(sync.skewed).toBe(false);
      await sync.measure();
      expect(Math.abs(sync.offsetMs! - 60_000)).toBeLessThan(250);
      expect(sync.skewed).toBe(true);
      // Corrected: the clock reads the database's time, not the host's.
      expect(Math.abs(clock.now() - Date.now())).toBeLessThan(250);
      hostShift = CLOCK_TOLERANCE_MS - 500;
      await sync.measure();
      expect(sync.skewed).toBe(false);
      expect(Math.abs(clock.now() - Date.now())).toBeLessThan(250);
      expect(changes.map(([skewed]) => skewed)).toEqual([true, false]);
    });

    it('37.1: a step of the wall clock is reported once, even while nothing is measured; the clock counts on, unmoved', async () => {
      const wall = { shift: 0, now: () => systemClock.now() + wall.shift };
      const clock = new OffsetClock(wall);
      const steps: number[] = [];
      const sync = ClockSync.of({ ...db, clock }, { onStep: (stepMs) => steps.push(stepMs) })!;
      await sync.measure();
      expect(clock.lastReading).not.toBeNull();
      wall.shift = -60_000;
      expect(Math.abs(clock.now() - Date.now())).toBeLessThan(250);
      sync.checkStep();
      sync.checkStep();
      expect(steps).toHaveLength(1);
      expect(Math.abs(steps[0]! + 60_000)).toBeLessThan(250);
      // The next reading finds the host a minute behind (skewed), and reports no second step.
      await sync.measure();
      sync.checkStep();
      expect(steps).toHaveLength(1);
      expect(sync.skewed).toBe(true);
      // A step ahead from there is another step.
      wall.shift = 0;
      sync.checkStep();
      expect(steps).toHaveLength(2);
      expect(Math.abs(steps[1]! - 60_000)).toBeLessThan(250);
      expect(clock.bounded()).toBe(false);
      await sync.measure();
      expect(clock.bounded()).toBe(true);
      expect(steps).toHaveLength(2);
    });

    it('an injected clock is the test\'s: nothing is measured or corrected', () => {
      expect(ClockSync.of({ ...db, clock: systemClock })).toBeNull();
    });
  });
});
