import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** What `npm run test:durations` measured of a file in a whole run: its wall seconds, and the CPU seconds it and the processes it started spent. */
interface Measured {
  seconds: number;
  cpu: number;
}

/**
 * A file that used less CPU than this share of its wall time mostly waits: on servers, bounds, locks, the
 * product's own timers. A whole run's shares are measured under its contention (a file that only computes
 * gets about a third of a core beside five others on two cores); at a fifth, files with long waiting phases
 * (receipts, faults) still counted as busy, and the cores idled while they waited.
 */
const WAITING_SHARE = 0.3;
/** Workers kept for files that use the CPU, one per core of this project's machines, whatever the waiting files hold. */
const BUSY_WORKERS = 2;

/**
 * The order files start in (each free worker takes the next), from what each took in a whole run
 * (`durations.json` beside this file; `npm run test:durations` writes it again): the longest first, so that the
 * long files overlap the short ones instead of running alone at the end; but never so many files that mostly
 * wait at once that the cores idle. Longest first alone started the six longest files together, every one of
 * them waiting (outage, receipts, webhooks, shutdown bounds), and the cores were a quarter idle for the run's
 * first minute. So the list is laid out as the pool will hand it out, by the measured seconds: a waiting file
 * is next only while fewer than `maxWorkers - BUSY_WORKERS` waiting files run, and the other workers take the
 * longest of the files that use the CPU. A file not in the list (a new one) starts first, as vitest's own
 * order does. Vitest's cache of the last run is not used: a fresh clone has none, and the order must be the
 * same on every machine.
 */
export default class WaitingBesideBusy extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const measured = JSON.parse(readFileSync(new URL('./durations.json', import.meta.url), 'utf8')) as Record<string, Measured>;
    const root = this.ctx.config.root;
    const known = files.map((spec) => ({ spec, measured: measured[relative(root, spec.moduleId)] }));
    const longestFirst = (a: { measured: Measured }, b: { measured: Measured }) => b.measured.seconds - a.measured.seconds;
    const isKnown = (file: (typeof known)[number]): file is { spec: TestSpecification; measured: Measured } => file.measured !== undefined;
    const waits = (file: { measured: Measured }) => file.measured.cpu < WAITING_SHARE * file.measured.seconds;
    const measuredFiles = known.filter(isKnown);
    const waiting = measuredFiles.filter(waits).sort(longestFirst);
    const busy = measuredFiles.filter((file) => !waits(file)).sort(longestFirst);
    const order = known.filter((file) => !isKnown(file)).map((file) => file.spec);
    const workers = this.ctx.config.maxWorkers;
    const waitingAtOnce = Math.max(1, workers - BUSY_WORKERS);
    // The pool's hand-out, replayed on the measured seconds: the files running, with when each ends.
    const running: { ends: number; waits: boolean }[] = [];
    let now = 0;
    while (waiting.length > 0 || busy.length > 0) {
      if (running.length >= workers) {
        const first = running.reduce((earliest, file) => (file.ends < earliest.ends ? file : earliest));
        now = first.ends;
        running.splice(running.indexOf(first), 1);
        continue;
      }
      const waitingRunning = running.filter((file) => file.waits).length;
      const next = waiting.length > 0 && (waitingRunning < waitingAtOnce || busy.length === 0) ? waiting.shift()! : busy.shift()!;
      order.push(next.spec);
      running.push({ ends: now + next.measured.seconds, waits: waits(next) });
    }
    return order;
  }
}
