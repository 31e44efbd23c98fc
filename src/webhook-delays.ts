// PARTNERCTL_WEBHOOK_RETRY_DELAYS, read by src/config.ts (kept apart so the configuration loads nothing more).

const DAY_MS = 86_400_000;

/** Delays before the 2nd, 3rd, … attempt: about 25.7 hours in all, then the delivery is given up. */
export const DEFAULT_RETRY_DELAYS = '5s,30s,2m,10m,30m,1h,2h,4h,8h,10h';

/** Parses PARTNERCTL_WEBHOOK_RETRY_DELAYS: a comma list of durations (`1s,2s,4s`); a problem is a message. */
export function parseRetryDelays(raw: string): number[] | string {
  const parts = raw.split(',').map((part) => part.trim());
  const delays: number[] = [];
  for (const part of parts) {
    const match = /^(\d{1,6})(ms|s|m|h|d)$/.exec(part);
    const unit = match ? { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: DAY_MS }[match[2]!]! : 0;
    const ms = match ? Number(match[1]) * unit : 0;
    if (!match || ms <= 0) return `must be a comma list of positive durations such as 5s,1m,1h, got '${part.slice(0, 40)}'`;
    delays.push(ms);
  }
  if (delays.length > 100) return 'must list at most 100 delays';
  return delays;
}

