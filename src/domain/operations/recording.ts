// Recording windows (issue 38, docs/decisions.md): while one is open, every answer of its partner is on
// record, successes included (cause `recorded`). Opening and stopping are audited changes: they bump the
// revision, so every running server learns them within its staleness bound (runtime/access.ts reads a
// partner's open windows with its snapshot).
import { randomUUID } from 'node:crypto';
import type { Database } from '../../db/client.js';
import { endRecordingWindows, insertRecordingWindow, openRecordingWindows, type RecordingWindowRow } from '../../db/repositories/recording-windows.js';
import { AppError } from '../../errors.js';
import { formatDuration, validateCompanyId } from '../rules/validation.js';
import { findPartner, type PartnerRecord } from './partners.js';
import { runUnit, type Actor } from './transactions.js';

/** The longest a window may be open: a day. */
export const RECORDING_MAX_MS = 86_400_000;

/** A window's length, checked before anything is asked of the database (a longer one is a usage error). */
export function checkRecordingLength(ms: number): void {
  if (ms > RECORDING_MAX_MS) {
    throw new AppError('invalid_argument', `for must be at most ${formatDuration(RECORDING_MAX_MS)} (a recording window lasts a day at most), got ${formatDuration(ms)}`, { field: 'for' });
  }
}

/**
 * Opens a window on a partner (with a company: only requests naming it) for `ms` from now; audited as
 * `recording.started`. A second window may overlap the first: answers inside either are recorded.
 */
export function startRecording(db: Database, who: Actor, reference: string, ms: number, companyId?: string): Promise<{ partner: PartnerRecord; window: RecordingWindowRow; changed: true }> {
  checkRecordingLength(ms);
  const company = companyId === undefined ? null : validateCompanyId(companyId);
  return runUnit(db, who, async (unit) => {
    const partner = await findPartner(unit.tx, reference);
    const now = unit.clock.now();
    const window: RecordingWindowRow = { id: randomUUID(), partnerId: partner.id, companyId: company, startedAt: new Date(now), endsAt: new Date(now + ms), openedBy: who.actor };
    await insertRecordingWindow(unit.tx, window);
    unit.audit({ action: 'recording.started', partnerId: partner.id, details: { window_id: window.id, company_id: company, ends_at: window.endsAt.toISOString() } });
    return { partner, window, changed: true as const };
  });
}

/** Ends a partner's open windows now; audited as `recording.stopped`. None open: nothing changes. */
export async function stopRecording(db: Database, who: Actor, reference: string): Promise<{ partner: PartnerRecord; stopped: number; changed: boolean }> {
  return runUnit(db, who, async (unit) => {
    const partner = await findPartner(unit.tx, reference);
    const stopped = await endRecordingWindows(unit.tx, partner.id, new Date(unit.clock.now()));
    if (stopped > 0) unit.audit({ action: 'recording.stopped', partnerId: partner.id, details: { windows: stopped } });
    return { partner, stopped, changed: stopped > 0 };
  });
}

/** The windows open now, oldest first. */
export function openWindows(db: Database): Promise<RecordingWindowRow[]> {
  return openRecordingWindows(db.sql, new Date(db.clock.now()));
}
