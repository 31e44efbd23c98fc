import { formatRate, type PartnerLimits } from '../../domain/operations/limits.js';

/** For tables and show-partner: "50/s, burst 100, 10000 a day", or "server defaults". */
export function describeLimits(limits: PartnerLimits): string {
  const parts: string[] = [];
  if (limits.rate) parts.push(formatRate(limits.rate));
  if (limits.burst !== null) parts.push(`burst ${limits.burst}`);
  if (limits.dailyQuota !== null) parts.push(`${limits.dailyQuota} a day`);
  return parts.length === 0 ? 'server defaults' : parts.join(', ');
}
