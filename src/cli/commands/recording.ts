import { AppError } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import type { Output } from '../output.js';
import type { Session } from '../session.js';
import { PARTNER_ARGUMENT, resolvePartnerArgument } from './common.js';
import { say } from '../say.js';

const RECORD_OPTIONS = defineOptions([
  { flags: '--for <duration>', description: 'open a window this long from now (15m, 2h; at most 24h)' },
  { flags: '--company <id>', description: 'with --for: only requests naming this company' },
  { flags: '--stop', description: "close the partner's open windows now" },
  { flags: '--list', description: 'list the open windows (every partner)' },
]);

export const recordCommand = defineCommand({
  name: 'record',
  changes: (options) => options.list !== true,
  group: 'Audit and webhooks',
  summary: "record every answer of a partner for a while (successes too)",
  description:
    "open a recording window: every answer of the partner (with --company, only requests naming it), successes included, is on record for explain and requests until it ends; --stop ends it, --list lists the open ones",
  arguments: [PARTNER_ARGUMENT],
  options: RECORD_OPTIONS,
  notes:
    'A window lasts at most 24 hours; running servers learn it within a second. Recorded: method, path, company, ' +
    'status, the engine\'s status and latency, bytes, client address, key pair, token id and trace id; never a body, a ' +
    "header's value or a token. Records in a window count against the servers' caps (docs/decisions.md). " +
    'A --stop with no open window changes nothing (exit 0).',
  examples: [{ lines: ['partnerctl record acme --for 15m', 'partnerctl record acme --for 2h --company c-42', 'partnerctl record acme --stop', 'partnerctl record --list'] }],
  run: (session, out, { args, options }) => runRecord(session, out, args[0], options),
});

async function runRecord(session: Session, out: Output, partnerArgument: string | undefined, options: OptionsOf<typeof RECORD_OPTIONS>): Promise<void> {
  const modes = [options.for !== undefined, options.stop === true, options.list === true].filter(Boolean).length;
  if (modes !== 1) throw new AppError('invalid_argument', 'give exactly one of --for <duration>, --stop or --list', { field: 'for' });
  if (options.company !== undefined && options.for === undefined) throw new AppError('invalid_argument', '--company narrows a window opened with --for', { field: 'company' });
  const recording = await import('../../domain/operations/recording.js');
  if (options.list) {
    if (partnerArgument !== undefined) throw new AppError('invalid_argument', '--list lists every open window; it takes no partner', { field: 'list' });
    return listWindows(session, out, recording);
  }
  if (options.stop) {
    const reference = await resolvePartnerArgument(session, partnerArgument);
    const result = await recording.stopRecording(await session.db(), session.who, reference);
    const who = `partner ${result.partner.name} (${result.partner.id})`;
    if (out.json) out.emitJson({ partner_id: result.partner.id, name: result.partner.name, stopped: result.stopped, changed: result.changed });
    else out.line(result.changed ? say`Stopped ${result.stopped} recording window(s) of ${who}.` : say`No recording window of ${who} was open; nothing changed.`);
    return;
  }
  const { parseDuration } = await import('../../domain/rules/validation.js');
  const ms = parseDuration(options.for!, '--for');
  // Too long a window is named before anything is asked of the database (exit 2).
  recording.checkRecordingLength(ms);
  const reference = await resolvePartnerArgument(session, partnerArgument);
  const result = await recording.startRecording(await session.db(), session.who, reference, ms, options.company);
  const { window } = result;
  if (out.json) {
    out.emitJson({ ...windowJson(window), name: result.partner.name, changed: true });
    return;
  }
  const scope = window.companyId === null ? 'every answer' : say`every answer naming company ${window.companyId}`;
  out.line(say`Recording ${scope} of partner ${result.partner.name} (${result.partner.id}) until ${window.endsAt.toISOString()}.`);
  out.line(say`Running servers apply it within a second; 'partnerctl requests ${result.partner.name}' lists what is recorded.`);
}

function windowJson(window: { id: string; partnerId: string; companyId: string | null; startedAt: Date; endsAt: Date; openedBy: string }): Record<string, unknown> {
  return { id: window.id, partner_id: window.partnerId, company_id: window.companyId, from: window.startedAt.toISOString(), until: window.endsAt.toISOString(), opened_by: window.openedBy };
}

async function listWindows(session: Session, out: Output, recording: typeof import('../../domain/operations/recording.js')): Promise<void> {
  const windows = await recording.openWindows(await session.db());
  if (out.json) {
    out.emitJson({ windows: windows.map(windowJson) });
    return;
  }
  if (windows.length === 0) {
    out.line(say`No recording window is open.`);
    return;
  }
  out.line(
    await out.table(
      ['PARTNER', 'COMPANY', 'FROM', 'UNTIL', 'OPENED BY'],
      windows.map((window) => [window.partnerId, window.companyId ?? 'any', window.startedAt.toISOString(), window.endsAt.toISOString(), window.openedBy]),
    ),
  );
}
