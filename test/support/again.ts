/**
 * A request taken again when it is answered 503 (a query past its 2 s bound, or the gate's read past its 1 s
 * bound, on a loaded machine: the product keeps its promise by refusing), at most five times, as a partner's
 * client does. For a test whose subject is what comes after, or what the answer decides, not availability:
 * a test of the 503 itself sends once. Each retry is printed, so a run that needed them says so.
 */
export async function againOn503<T>(send: () => Promise<T>, statusOf: (answer: T) => number, what = 'a request'): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const answer = await send();
    if (statusOf(answer) !== 503 || attempt === 5) return answer;
    console.log(`${what} was answered 503 (attempt ${attempt}), taken again`);
  }
}
