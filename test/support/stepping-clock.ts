import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The preload (`node --import`) that makes a spawned process's wall clock step and drift. */
export const STEP_CLOCK_PRELOAD = fileURLToPath(new URL('./shift-clock.mjs', import.meta.url));

/**
 * The test's side of the stepping clock (shift-clock.mjs): a control file the spawned process re-reads.
 * `env` and `nodeArgs` go to the process; `set` steps its wall clock (and sets a drift) from the moment the
 * process next reads the clock (within 5 ms of monotonic time); its monotonic clock is never touched.
 */
export class SteppingClock {
  private readonly dir = mkdtempSync(join(tmpdir(), 'partnerctl-clock-'));
  readonly file = join(this.dir, 'clock.json');
  readonly nodeArgs = ['--import', STEP_CLOCK_PRELOAD];
  private writes = 0;

  /** The process starts `offsetMs` off the host's clock (default: on time). */
  constructor(offsetMs = 0) {
    this.set({ offsetMs });
  }

  get env(): NodeJS.ProcessEnv {
    return { STEP_CLOCK_FILE: this.file };
  }

  /** The process's wall clock is the host's + offsetMs, + driftMsPerS for every second from then. */
  set({ offsetMs, driftMsPerS = 0 }: { offsetMs: number; driftMsPerS?: number }): void {
    // Written whole and renamed, so the process never reads half a file.
    const next = join(this.dir, `clock.${++this.writes}.json`);
    writeFileSync(next, JSON.stringify({ offset_ms: offsetMs, drift_ms_per_s: driftMsPerS, seq: this.writes }));
    renameSync(next, this.file);
  }

  dispose(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
