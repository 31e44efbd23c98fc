import { setTimeout as sleep } from 'node:timers/promises';

const HOUR_MS = 3_600_000;

/**
 * Usage is counted per UTC hour (and quotas per UTC day) by a server's own clock, which a test of a real
 * process cannot set. A test whose requests and readings must fall in one hour calls this first: with less
 * than `marginMs` left of the hour, it waits for the next one (at most `marginMs`, rarely).
 */
export async function clearOfHourBoundary(marginMs = 20_000): Promise<void> {
  const left = HOUR_MS - (Date.now() % HOUR_MS);
  if (left < marginMs) await sleep(left + 100);
}
