#!/usr/bin/env node
// npm run test:stress [-- --runs N] [-- FILE...]: the suite under load, N times in a row (default 5).
// Two busy loops hold both cores (one per core of a 2-core machine; --loops N for more) for the whole
// run, as when other work shares the machine; each run is `npm test` (build, typecheck, lint, every suite),
// or `vitest run FILE...` when files are given (to try one file under load). It prints each run's exit code
// and wall time, then a summary, and exits 1 if any run failed. docs/development.md, "Test lanes".
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';

const usage = (message) => {
  process.stderr.write(`test:stress: ${message} (usage: npm run test:stress -- [--runs N] [--loops N] [FILE...])\n`);
  process.exit(2);
};
let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: { runs: { type: 'string', default: '5' }, loops: { type: 'string', default: String(Math.min(2, availableParallelism())) } },
  });
} catch (error) {
  usage(error.message);
}
const { values, positionals } = parsed;
const runs = Number(values.runs);
const loops = Number(values.loops);
if (!Number.isInteger(runs) || runs < 1) usage(`--runs must be a whole number from 1, not '${values.runs}'`);
if (!Number.isInteger(loops) || loops < 0) usage(`--loops must be a whole number from 0, not '${values.loops}'`);

const busy = Array.from({ length: loops }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
const stopBusy = () => {
  for (const child of busy) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
};
process.on('exit', stopBusy);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(130));

const command = positionals.length > 0 ? ['npx', ['vitest', 'run', ...positionals]] : ['npm', ['test']];
const results = [];
for (let run = 1; run <= runs; run++) {
  const started = Date.now();
  const code = await new Promise((resolve) => {
    const child = spawn(command[0], command[1], { stdio: 'inherit' });
    child.on('close', (exitCode, signal) => resolve(exitCode ?? signal));
  });
  const seconds = (Date.now() - started) / 1000;
  results.push({ run, code, seconds });
  process.stdout.write(`\nstress: run ${run}/${runs}: exit ${code}, ${seconds.toFixed(1)} s (${loops} busy loops)\n`);
}
stopBusy();
const failed = results.filter((result) => result.code !== 0);
const times = results.map((result) => result.seconds);
process.stdout.write(
  `\nstress: ${runs - failed.length} of ${runs} runs passed` +
    (failed.length ? ` (failed: run ${failed.map((result) => result.run).join(', ')})` : '') +
    `; wall ${Math.min(...times).toFixed(1)}–${Math.max(...times).toFixed(1)} s, mean ${(times.reduce((a, b) => a + b, 0) / runs).toFixed(1)} s\n`,
);
process.exitCode = failed.length ? 1 : 0;
