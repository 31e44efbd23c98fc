// The request log's destination: one line per request, gathered in memory and handed to pino's own
// destination (sonic-boom) in one write per batch.
//
// Why not sonic-boom's `minLength`, which batches too: its write() measures the byte length of its whole
// pending buffer on every line (`Buffer.byteLength` of a string of up to 16 KiB, flattened each time), which
// cost about 2.5 µs a line on this project's bench machine against about 0.6 µs here (BENCHMARKS.md).

/** What the batch is handed to: sonic-boom as `pino.destination()` builds it. */
export interface LineSink {
  write(chunk: string): boolean;
  flushSync(): void;
  flush(callback?: (error?: Error) => void): void;
}

// Every live batch, flushed when the process exits (as pino.destination() does for its own buffer).
const live = new Set<BatchedLines>();
let exitHookInstalled = false;

function flushAllOnExit(): void {
  for (const batch of live) {
    try {
      batch.flushSync();
    } catch {
      // Nothing more can be done for a log at exit.
    }
  }
}

export class BatchedLines {
  private parts: string[] = [];
  private chars = 0;
  private readonly timer: NodeJS.Timeout;

  /**
   * @param sink where batches go (its own buffering off: minLength 0)
   * @param batchChars a batch goes out once it holds this many characters
   * @param flushMs and at least this often while lines are waiting
   */
  constructor(
    private readonly sink: LineSink,
    private readonly batchChars: number,
    flushMs: number,
  ) {
    this.timer = setInterval(() => this.drain(), flushMs);
    this.timer.unref();
    live.add(this);
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.once('exit', flushAllOnExit);
    }
  }

  /** One line (or several), ending with a newline: pino's stream interface. */
  write(line: string): boolean {
    this.parts.push(line);
    this.chars += line.length;
    if (this.chars >= this.batchChars) this.drain();
    return true;
  }

  /** Hands the waiting lines to the sink (which writes them asynchronously). */
  private drain(): void {
    if (this.parts.length === 0) return;
    const chunk = this.parts.length === 1 ? this.parts[0]! : this.parts.join('');
    this.parts = [];
    this.chars = 0;
    this.sink.write(chunk);
  }

  /** pino's `logger.flush(cb)`. */
  flush(callback?: (error?: Error) => void): void {
    this.drain();
    this.sink.flush(callback);
  }

  /** Everything waiting, written before returning (on close and at exit). */
  flushSync(): void {
    this.drain();
    this.sink.flushSync();
  }

  /** Writes what waits and stops the timer; the sink stays open (it may be stdout). */
  close(): void {
    clearInterval(this.timer);
    live.delete(this);
    this.drain();
  }
}
