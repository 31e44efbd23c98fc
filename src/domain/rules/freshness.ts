// How far the state an instance decides from may be trusted: the one freshness rule, written once. The
// access state (access.ts) keeps it up to date; the gate, readiness, the metrics and the token endpoint read
// its verdict.

/**
 * `fresh`: the revision was confirmed within the staleness bound, decide from what is held or read.
 * `held`: the database does not answer and the staleness budget holds: decide from what is held, read
 * nothing. `stale`: neither: confirm the revision before deciding, or answer 503.
 */
export type Freshness = 'fresh' | 'held' | 'stale';

export class FreshnessRule {
  /** When the revision was last confirmed (epoch ms; 0 before the first). */
  confirmedAt = 0;
  /** When a read of the revision first failed, while they keep failing (null: the database answers). */
  unreachableSince: number | null = null;
  /** When this instance's heartbeat was last written (null: none, the budget counts from the last read). */
  private heartbeatAt: number | null = null;

  constructor(
    readonly stalenessBoundMs: number,
    /** How long what is held keeps deciding while the database does not answer (0: never). */
    readonly staleBudgetMs: number,
  ) {}

  /**
   * `now` on the instance's clock (on PostgreSQL counted on the monotonic clock from the database's, so no
   * step of the host's wall clock lengthens the bound or the budget). `bounded` false: the clock cannot say
   * how much time passed since it last read the database's (clock.ts `bounded`): nothing held may decide.
   */
  judge(now: number, bounded = true): Freshness {
    if (!bounded) return 'stale';
    if (now - this.confirmedAt <= this.stalenessBoundMs) return 'fresh';
    return this.unreachableSince !== null && now <= this.servingUntil() ? 'held' : 'stale';
  }

  /**
   * The instant until which what is held may decide while the database does not answer: the budget from the
   * last confirmed read or the last heartbeat, whichever is older (so that no receipt reading the heartbeat
   * can think this instance is done sooner). 0 with no budget.
   */
  servingUntil(): number {
    if (this.staleBudgetMs <= 0) return 0;
    return Math.min(this.confirmedAt, this.heartbeatAt ?? this.confirmedAt) + this.staleBudgetMs;
  }

  heartbeatWritten(lastSeenAt: number): void {
    if (this.heartbeatAt === null || lastSeenAt > this.heartbeatAt) this.heartbeatAt = lastSeenAt;
  }
}
