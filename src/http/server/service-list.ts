import { beforeDeadline } from '../../deadline.js';

/**
 * One part of the server as the composition root sees it: started in the list's order, stopped in reverse.
 * `stop` is given its deadline (a performance.now() instant) and is left behind once it passes: the
 * shutdown's bound is a promise to the operator (docs/server.md), whatever a stop waits on.
 */
export interface Service {
  readonly name: string;
  start?(): Promise<void> | void;
  /** A promise is awaited (until the deadline); anything else is done. */
  stop?(deadline: number): unknown;
  /** The longest this stop may take (default 1 s), within the deadline of the whole stop. */
  readonly stopWithinMs?: number;
}

const STOP_WITHIN_MS = 1_000;

/** Services started in order and stopped in reverse; a failed start stops those begun, then throws. */
export class ServiceList {
  private begun = 0;
  private stopping: Promise<void> | undefined;

  constructor(private readonly services: readonly Service[]) {}

  async start(): Promise<void> {
    for (const service of this.services) {
      // Counted before it starts: one that fails half-way is stopped with the others.
      this.begun++;
      try {
        await service.start?.();
      } catch (error) {
        await this.stop();
        throw error;
      }
    }
  }

  /** Stops what was started, last first, each step by its own deadline and all by `deadline`. Safe to call twice. */
  stop(deadline = Infinity): Promise<void> {
    this.stopping ??= (async () => {
      for (const service of this.services.slice(0, this.begun).reverse()) {
        if (!service.stop) continue;
        const due = Math.min(deadline, performance.now() + (service.stopWithinMs ?? STOP_WITHIN_MS));
        await beforeDeadline(Promise.resolve().then(() => service.stop!(due)).catch(() => {}), due, undefined);
      }
    })();
    return this.stopping;
  }
}
