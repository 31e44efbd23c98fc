// Work bounded by an instant: what a shutdown step does with a database or a peer that may never answer.

/** What `work` resolves to, or `late` once `deadline` (a performance.now() instant) passes first. */
export async function beforeDeadline<T>(work: Promise<T>, deadline: number, late: T): Promise<T> {
  if (deadline === Number.POSITIVE_INFINITY) return work;
  let timer: NodeJS.Timeout | undefined;
  const passed = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(late), Math.max(0, deadline - performance.now()));
  });
  try {
    return await Promise.race([work, passed]);
  } finally {
    clearTimeout(timer);
  }
}
