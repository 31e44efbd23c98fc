import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A change in force within `boundMs` (the product's promise plus its stated slack), judged by when each
 * request leaves, not when its answer arrives: `attempt` is tried every `intervalMs` until it passes, and
 * only an attempt sent after the bound may fail the test. On a loaded machine a request sent in time can be
 * answered late; the promise is about which state answers it, which the server decides when it takes it.
 * Resolves with the time (ms after the call) at which the passing attempt was sent.
 */
export async function inForceWithin(boundMs: number, attempt: () => Promise<unknown>, intervalMs = 20): Promise<number> {
  const start = performance.now();
  for (;;) {
    const sentAt = performance.now() - start;
    try {
      await attempt();
      return sentAt;
    } catch (error) {
      if (sentAt >= boundMs) throw error;
    }
    await sleep(intervalMs);
  }
}
