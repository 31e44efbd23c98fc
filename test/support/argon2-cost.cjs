// Preloaded into the tests' processes (vitest's workers, by execArgv in the vitest configs) and passed on to
// every process they start with their environment (NODE_OPTIONS): argon2id hashes at a test's cost, 1 MiB
// and one pass, instead of the product's 19 MiB and two passes (src/domain/rules/secrets.ts), as Django's
// test settings swap in a fast hasher. About 0.5 ms a hash or verification instead of 20-25 ms, over some
// 1,600 of them a run. What a test checks of a secret is unchanged: a hash carries its own parameters, so
// verification follows them, and a wrong secret is refused the same way.
//
// Never in the product: this file is in test/ and only `--require` loads it. The product's parameters stay
// tested: `atProductCost` (argon2-cost.ts) lets a test run the product's call as it is, and processes
// started with `productCostEnv(env)` never load this file (the end-to-end check of the stored hash, the
// timing of refusals). It also counts the process's verifications, for tests that assert what reached
// argon2 (`argon2Verifications`, argon2-cost.ts) instead of timing it.
//
// argon2 is patched when the process first loads it, not at start: most processes the tests start never hash
// (a read-only command, `--help`), and loading the addon cost each of them 6-8 ms of CPU (some 300 a run). An
// ESM import of argon2 (the bundle's, a test's through vitest) loads it through `Module._load` too, with the
// resolved path of argon2's CommonJS entry.
const Module = require('node:module');
const { sep } = require('node:path');

const PATCHED = Symbol.for('partnerctl.test.argon2Cost');
/** Set by `atProductCost` while a test needs the product's own parameters. */
const PRODUCT_COST = Symbol.for('partnerctl.test.argon2ProductCost');

/** How many argon2 verifications this process has made (read by `argon2Verifications`, argon2-cost.ts). */
const VERIFICATIONS = Symbol.for('partnerctl.test.argon2Verifications');
globalThis[VERIFICATIONS] ??= 0;

function patch(argon2) {
  if (argon2[PATCHED]) return;
  const hash = argon2.hash;
  argon2.hash = (plain, options) => (globalThis[PRODUCT_COST] ? hash(plain, options) : hash(plain, { ...options, memoryCost: 1024, timeCost: 1 }));
  const verify = argon2.verify;
  argon2.verify = (...args) => {
    globalThis[VERIFICATIONS]++;
    return verify(...args);
  };
  argon2[PATCHED] = true;
}

const ENTRY = `${sep}argon2${sep}argon2.cjs`;
const load = Module._load;
Module._load = function loadPatchingArgon2(request, ...rest) {
  const exports = load.call(this, request, ...rest);
  if (request === 'argon2' || request.endsWith(ENTRY)) {
    patch(exports);
    // Patched once: later loads go straight to Node's loader again (unless something wrapped it since).
    if (Module._load === loadPatchingArgon2) Module._load = load;
  }
  return exports;
};

const flag = `--require ${JSON.stringify(__filename)}`;
if (!(process.env.NODE_OPTIONS ?? '').includes(__filename)) {
  process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} ${flag}`.trim();
}
