import type { LimitsChange } from '../../domain/operations/limits.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import type { Output } from '../output.js';
import type { Session } from '../session.js';
import { PARTNER_ARGUMENT, resolvePartnerArgument } from './common.js';
import { say } from '../say.js';

const SET_LIMITS_OPTIONS = defineOptions([
  { flags: '--rate <n>/<s|m|h>', description: 'requests per second, minute or hour, e.g. 50/s' },
  { flags: '--burst <n>', description: "requests allowed at once after a quiet spell (default: the rate's count)" },
  { flags: '--daily-quota <n>', description: 'requests per UTC day' },
  { flags: '--clear', description: "drop the partner's own limits: the server's defaults apply again" },
]);

export const setLimitsCommand = defineCommand({
  name: 'set-limits',
  changes: true,
  group: 'Limits and usage',
  summary: "set a partner's data-request limits",
  description: "set a partner's data-request limits (the others keep the server's defaults); running servers apply them within a second",
  arguments: [PARTNER_ARGUMENT],
  options: SET_LIMITS_OPTIONS,
  examples: [{ lines: ['partnerctl set-limits acme --rate 50/s --burst 100 --daily-quota 1000000'] }],
  run: (session, out, { args, options }) => runSetLimits(session, out, args[0], options),
});

async function runSetLimits(session: Session, out: Output, partnerArgument: string | undefined, options: OptionsOf<typeof SET_LIMITS_OPTIONS>): Promise<void> {
  const [{ limitsJson, parseCount, parseRate, setLimits }, { describeLimits }] = await Promise.all([
    import('../../domain/operations/limits.js'),
    import('./describe-limits.js'),
  ]);
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
      ? say`Limits of partner ${partner.name} (${partner.id}): ${describeLimits(limits)}`
      : say`Limits of partner ${partner.name} (${partner.id}) were already ${describeLimits(limits)}; nothing changed`,
  );
  if (changed) out.line(say`Running servers apply them within a second.`);
}

