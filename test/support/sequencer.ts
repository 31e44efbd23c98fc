import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The order files start in: longest first, from the seconds each took in a whole run (`durations.json`
 * beside this file), so that the long files, which mostly wait on the product's own bounds, overlap the
 * short ones instead of running alone at the end. A file not in the list (a new one) starts first, as
 * vitest's own order does. Vitest's cache of the last run is not used: a fresh clone has none, and the
 * order must be the same on every machine. `npm run test:durations` writes the list again.
 */
export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seconds = JSON.parse(readFileSync(new URL('./durations.json', import.meta.url), 'utf8')) as Record<string, number>;
    const root = this.ctx.config.root;
    const weight = (spec: TestSpecification) => seconds[relative(root, spec.moduleId)] ?? Number.MAX_VALUE;
    return [...files].sort((a, b) => weight(b) - weight(a));
  }
}
