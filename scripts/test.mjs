#!/usr/bin/env node
// npm test, after the build: the typecheck and the lint run beside the whole suite instead of before it (the
// suite leaves some of the two cores idle while its files wait; the two checks take about 5 s alone). They run
// at the lowest priority (nice 19), on what the suite leaves idle: at normal priority they took their CPU while
// the suite's workers were importing, and vitest's summed transform and import times rose by about half.
// A check still running when the suite ends is stopped and run again at the suite's priority: at the lowest
// one it waits on whatever else holds the CPU (beside two busy loops a typecheck took 80 s after the suite).
// The suite's output goes straight through; a check's output is held and printed whole, so it never
// interleaves with the suite's. Exits with the first failure's code: the suite's, then the typecheck's, then the lint's.
// Extra arguments go to vitest (`npm test -- FILE`).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { setPriority } from 'node:os';
import { dirname, join } from 'node:path';

/** Every check's process group still running, stopped if this process is interrupted. */
const groups = new Set();
const stopGroup = (pid) => {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone, or a platform without process groups.
  }
};

function run(command, args, { hold, lowPriority = false }) {
  // A check runs in a process group of its own, so that it can be stopped whole (npm, its shell, the tool).
  const child = spawn(command, args, { stdio: hold ? ['ignore', 'pipe', 'pipe'] : 'inherit', detached: hold });
  if (hold && child.pid !== undefined) groups.add(child.pid);
  // Before npm has started the check's own process, which inherits the priority.
  if (lowPriority && child.pid !== undefined) {
    try {
      setPriority(child.pid, 19);
    } catch {
      // A platform that refuses: the check runs at the suite's priority, as before.
    }
  }
  const held = [];
  if (hold) {
    child.stdout.on('data', (chunk) => held.push(chunk));
    child.stderr.on('data', (chunk) => held.push(chunk));
  }
  let finished = false;
  let stopped = false;
  const done = new Promise((resolve) => {
    const end = (result) => {
      finished = true;
      resolve({ ...result, stopped });
    };
    child.on('error', (error) => end({ code: 1, output: `${command}: ${error.message}\n` }));
    child.on('close', (code, signal) => {
      groups.delete(child.pid);
      end({ code: code ?? (signal ? 1 : 0), output: Buffer.concat(held).toString() });
    });
  });
  return {
    done,
    /** Stops it, unless it has ended; its result then says `stopped`. */
    stop: () => {
      if (!finished && child.pid !== undefined) {
        stopped = true;
        stopGroup(child.pid);
      }
      return done;
    },
  };
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const pid of groups) stopGroup(pid);
    process.exit(signal === 'SIGINT' ? 130 : 143);
  });
}

/** A check's verdict, with its output if it failed. */
const verdict = (name, { code, output }) => {
  process.stdout.write(code === 0 ? `${name}: passed\n` : `\n${name}: FAILED (exit ${code})\n${output}\n`);
  return code;
};
// The checks are package.json's own scripts, so each command is written in one place.
const start = (name, lowPriority) => run('npm', ['run', '--silent', name], { hold: true, lowPriority });
// Each verdict is printed when its check ends. In a whole run the checks end long before the suite (files
// waiting leave them idle CPU), so the suite's closing line stays the last; a run of one file may end before
// them, and their verdicts follow it.
const checks = ['typecheck', 'lint'].map((name) => {
  const check = start(name, true);
  return { name, check, reported: check.done.then((result) => (result.stopped ? null : verdict(name, result))) };
});
// vitest's own bin, started by this node: npx would first spend about 0.4 s starting npm.
const vitestPackage = createRequire(import.meta.url).resolve('vitest/package.json');
const vitestBin = join(dirname(vitestPackage), JSON.parse(readFileSync(vitestPackage, 'utf8')).bin.vitest);
const suite = await run(process.execPath, [vitestBin, 'run', ...process.argv.slice(2)], { hold: false }).done;
const checked = await Promise.all(
  checks.map(async ({ name, check, reported }) => {
    if (!(await check.stop()).stopped) return reported;
    process.stdout.write(`${name}: still running when the suite ended; run again at the suite's priority\n`);
    return verdict(name, await start(name, false).done);
  }),
);
const codes = [suite.code, ...checked];
process.exit(codes.find((code) => code !== 0) ?? 0);
