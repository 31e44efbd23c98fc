import { formatRate, limitsJson, parseCount, parseRate, setLimits, type LimitsChange, type PartnerLimits } from '../../domain/limits.js';
import type { Output } from '../output.js';
import type { Session } from '../session.js';
import { resolvePartnerArgument } from './partners.js';

export interface SetLimitsOptions {
  rate?: string;
  burst?: string;
  dailyQuota?: string;
  clear?: boolean;
}

/** For tables and show-partner: "50/s, burst 100, 10000 a day", or "server defaults". */
export function describeLimits(limits: PartnerLimits): string {
  const parts: string[] = [];
  if (limits.rate) parts.push(formatRate(limits.rate));
  if (limits.burst !== null) parts.push(`burst ${limits.burst}`);
  if (limits.dailyQuota !== null) parts.push(`${limits.dailyQuota} a day`);
  return parts.length === 0 ? 'server defaults' : parts.join(', ');
}

export async function runSetLimits(session: Session, out: Output, partnerArgument: string | undefined, options: SetLimitsOptions): Promise<void> {
  const change: LimitsChange = {
    ...(options.rate !== undefined ? { rate: parseRate(options.rate) } : {}),
    ...(options.burst !== undefined ? { burst: parseCount(options.burst, 'burst') } : {}),
    ...(options.dailyQuota !== undefined ? { dailyQuota: parseCount(options.dailyQuota, 'daily_quota') } : {}),
    ...(options.clear ? { clear: true } : {}),
  };
  const reference = await resolvePartnerArgument(session, partnerArgument);
  const db = await session.db();
  const { partner, limits, changed } = await setLimits(db, session.who, reference, change);
  if (out.json) {
    out.emitJson({ partner_id: partner.id, name: partner.name, limits: limitsJson(limits), changed });
    return;
  }
  out.line(
    changed
      ? `Limits of partner ${partner.name} (${partner.id}): ${describeLimits(limits)}`
      : `Limits of partner ${partner.name} (${partner.id}) were already ${describeLimits(limits)}; nothing changed`,
  );
  if (changed) out.line('Running servers apply them within a second.');
}

