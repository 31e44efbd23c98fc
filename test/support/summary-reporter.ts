import type { Reporter, TestModule } from 'vitest/node';

/** One plain closing line, "N passed, N failed, N skipped", that any CI log reader understands. */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    const counts = { passed: 0, failed: unhandledErrors.length, skipped: 0 };
    for (const module of testModules) {
      let failedTests = 0;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') counts.passed++;
        else if (state === 'failed') failedTests++;
        else counts.skipped++;
      }
      // A file that failed outside its tests (an import, a beforeAll hook: its tests then count as skipped)
      // counts as one failure, so the closing line never says 0 failed for a red run.
      counts.failed += module.state() === 'failed' && failedTests === 0 ? 1 : failedTests;
    }
    process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`);
  }
}
