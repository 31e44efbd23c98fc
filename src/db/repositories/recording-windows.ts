import { toDate } from '../sql.js';
import type { Queryable, SqlTx } from '../unit.js';

/** A recording window (docs/decisions.md): open while `endsAt` is ahead. */
export interface RecordingWindowRow {
  id: string;
  partnerId: string;
  companyId: string | null;
  startedAt: Date;
  endsAt: Date;
  openedBy: string;
}

type Raw = { id: string; partner_id: string; company_id: string | null; started_at: unknown; ends_at: unknown; opened_by: string };

function fromRaw(raw: Raw): RecordingWindowRow {
  return { id: raw.id, partnerId: raw.partner_id, companyId: raw.company_id, startedAt: toDate(raw.started_at)!, endsAt: toDate(raw.ends_at)!, openedBy: raw.opened_by };
}

export async function insertRecordingWindow(tx: SqlTx, row: RecordingWindowRow): Promise<void> {
  await tx.run('INSERT INTO recording_windows (id, partner_id, company_id, started_at, ends_at, opened_by) VALUES ($1, $2, $3, $4, $5, $6)', [
    row.id,
    row.partnerId,
    row.companyId,
    row.startedAt,
    row.endsAt,
    row.openedBy,
  ]);
}

/** The windows open at `now`, oldest first: a partner's, or every partner's. */
export async function openRecordingWindows(q: Queryable, now: Date, partnerId?: string): Promise<RecordingWindowRow[]> {
  const rows =
    partnerId === undefined
      ? await q.query<Raw>('SELECT id, partner_id, company_id, started_at, ends_at, opened_by FROM recording_windows WHERE ends_at > $1 ORDER BY started_at, id', [now])
      : await q.query<Raw>('SELECT id, partner_id, company_id, started_at, ends_at, opened_by FROM recording_windows WHERE partner_id = $1 AND ends_at > $2 ORDER BY started_at, id', [partnerId, now]);
  return rows.map(fromRaw);
}

/** Ends a partner's open windows now; how many were open. */
export function endRecordingWindows(tx: SqlTx, partnerId: string, now: Date): Promise<number> {
  return tx.run('UPDATE recording_windows SET ends_at = $1 WHERE partner_id = $2 AND ends_at > $3', [now, partnerId, now]);
}
