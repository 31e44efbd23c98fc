import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';

/**
 * The unit lane's guard (setupFiles of vitest.unit.config.ts): a file of the lane that starts a process
 * fails at once, naming what it started, instead of quietly making the lane slow or dependent on a build.
 * Such a file belongs to the whole suite only (docs/development.md, "Test lanes").
 */
const refuse = (name: string) =>
  function refused(command: unknown) {
    throw new Error(`the unit lane starts no process (${name} ${String(command)}): move this file out of vitest.unit.config.ts`);
  };
const writable = childProcess as unknown as Record<string, unknown>;
for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork']) writable[name] = refuse(name);
syncBuiltinESMExports();
