#!/usr/bin/env node
// npm run test:durations: runs the whole suite once (vitest, as `npm test` runs it) and writes, for each file,
// how long it took and the CPU it and the processes it started spent, in seconds, to
// test/support/durations.json: what the order files start in is made from (test/support/sequencer.ts).
// Run it on a quiet machine after adding or much changing a long file; the figures only order the files.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

const dir = mkdtempSync(join(tmpdir(), 'partnerctl-durations-'));
const report = join(dir, 'report.json');
const cpuLog = join(dir, 'cpu.jsonl');
const run = spawnSync('npx', ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`], {
  stdio: 'inherit',
  // Each file's CPU (test/support/file-cpu.ts, loaded by vitest.config.ts when this is set).
  env: { ...process.env, PARTNERCTL_TEST_CPU_LOG: cpuLog },
});
if (run.status !== 0) {
  process.stderr.write(`test:durations: the suite failed (exit ${run.status ?? run.signal}); durations.json is unchanged\n`);
  process.exit(1);
}
const { testResults } = JSON.parse(readFileSync(report, 'utf8'));
const cpu = new Map(
  readFileSync(cpuLog, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line))
    .map(({ file, cpu }) => [file, cpu]),
);
rmSync(dir, { recursive: true, force: true });
const files = testResults
  .map((file) => {
    const name = relative(process.cwd(), file.name);
    return [name, { seconds: Math.round((file.endTime - file.startTime) / 100) / 10, cpu: cpu.get(name) ?? 0 }];
  })
  .sort((a, b) => b[1].seconds - a[1].seconds);
writeFileSync('test/support/durations.json', `${JSON.stringify(Object.fromEntries(files), null, 2)}\n`);
process.stdout.write(`test:durations: ${files.length} files written to test/support/durations.json\n`);
