import { fileURLToPath } from 'node:url';

/** The preload that gives the tests' processes argon2 at a test's cost (argon2-cost.cjs says why and how). */
export const ARGON2_TEST_COST = fileURLToPath(new URL('./argon2-cost.cjs', import.meta.url));

const PRODUCT_COST = Symbol.for('partnerctl.test.argon2ProductCost');

/** Runs `fn` with argon2 hashing at the product's own parameters in this process (one file at a time runs in a worker). */
export async function atProductCost<T>(fn: () => Promise<T>): Promise<T> {
  const global = globalThis as Record<symbol, unknown>;
  global[PRODUCT_COST] = true;
  try {
    return await fn();
  } finally {
    delete global[PRODUCT_COST];
  }
}

const VERIFICATIONS = Symbol.for('partnerctl.test.argon2Verifications');

/**
 * How many argon2 verifications this process has made so far (counted by argon2-cost.cjs): a server run by
 * `serveInProcess` verifies in the test's process, so a test asserts what reached argon2 by the difference,
 * whatever the machine's speed.
 */
export function argon2Verifications(): number {
  const count = (globalThis as Record<symbol, unknown>)[VERIFICATIONS];
  if (typeof count !== 'number') throw new Error('argon2 verifications are counted only with test/support/argon2-cost.cjs preloaded');
  return count;
}

/** `env` for a process that must hash at the product's cost: without the test-cost preload in NODE_OPTIONS. */
export function productCostEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  // Whatever form the flag was given in (quoted, as the preload passes itself on, or bare).
  const options = (env.NODE_OPTIONS ?? '')
    .split(/\s+(?=--)/)
    .filter((flag) => !flag.includes(ARGON2_TEST_COST))
    .join(' ')
    .trim();
  const { NODE_OPTIONS: _, ...rest } = env;
  return options === '' ? rest : { ...rest, NODE_OPTIONS: options };
}
