#!/usr/bin/env node
// npm test, after the build: the typecheck and the lint run beside the whole suite instead of before it (the
// suite leaves some of the two cores idle while its files wait; the two checks take about 5 s alone). They run
// at the lowest priority (nice 19), on what the suite leaves idle: at normal priority they took their CPU while
// the suite's workers were importing, and vitest's summed transform and import times rose by about half.
// The suite's output goes straight through; a check's output is held and printed whole, so it never
// interleaves with the suite's. Exits with the first failure's code: the suite's, then the typecheck's, then the lint's.
// Extra arguments go to vitest (`npm test -- FILE`).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { setPriority } from 'node:os';
import { dirname, join } from 'node:path';

function run(command, args, { hold, lowPriority = false }) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: hold ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
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
    child.on('error', (error) => resolve({ code: 1, output: `${command}: ${error.message}\n` }));
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), output: Buffer.concat(held).toString() }));
  });
}

// Each check's verdict is printed when it ends, with its output if it failed. In a whole run the checks end
// long before the suite (files waiting leave them idle CPU), so the suite's closing line stays the last; a
// run of one file may end before them, and their verdicts follow it.
const check = (name, command, args) =>
  run(command, args, { hold: true, lowPriority: true }).then(({ code, output }) => {
    process.stdout.write(code === 0 ? `${name}: passed\n` : `\n${name}: FAILED (exit ${code})\n${output}\n`);
    return code;
  });
// The checks are package.json's own scripts, so each command is written in one place.
const checks = ['typecheck', 'lint'].map((name) => check(name, 'npm', ['run', '--silent', name]));
// vitest's own bin, started by this node: npx would first spend about 0.4 s starting npm.
const vitestPackage = createRequire(import.meta.url).resolve('vitest/package.json');
const vitestBin = join(dirname(vitestPackage), JSON.parse(readFileSync(vitestPackage, 'utf8')).bin.vitest);
const suite = await run(process.execPath, [vitestBin, 'run', ...process.argv.slice(2)], { hold: false });
const codes = [suite.code, ...(await Promise.all(checks))];
process.exit(codes.find((code) => code !== 0) ?? 0);
