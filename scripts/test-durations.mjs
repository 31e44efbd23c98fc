#!/usr/bin/env node
// npm run test:durations: runs the whole suite once (vitest, as `npm test` runs it) and writes how long each
// file took, in seconds, to test/support/durations.json, the order files start in (test/support/sequencer.ts).
// Run it on a quiet machine after adding or much changing a long file; the figures only order the files.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

const dir = mkdtempSync(join(tmpdir(), 'partnerctl-durations-'));
const report = join(dir, 'report.json');
const run = spawnSync('npx', ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`], { stdio: 'inherit' });
if (run.status !== 0) {
  process.stderr.write(`test:durations: the suite failed (exit ${run.status ?? run.signal}); durations.json is unchanged\n`);
  process.exit(1);
}
const { testResults } = JSON.parse(readFileSync(report, 'utf8'));
rmSync(dir, { recursive: true, force: true });
const seconds = testResults
  .map((file) => [relative(process.cwd(), file.name), Math.round((file.endTime - file.startTime) / 100) / 10])
  .sort((a, b) => b[1] - a[1]);
writeFileSync('test/support/durations.json', `${JSON.stringify(Object.fromEntries(seconds), null, 2)}\n`);
process.stdout.write(`test:durations: ${seconds.length} files written to test/support/durations.json\n`);
