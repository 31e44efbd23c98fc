import { defineCommand } from '../definition.js';
import { defineOptions } from '../options.js';
import { receiptJson, reportReceipt, WAIT_OPTIONS } from '../receipt.js';

// Only --wait: a re-check that did not wait would have nothing to say.
const RECEIPT_OPTIONS = defineOptions([{ ...WAIT_OPTIONS[0], description: 'wait this long for every live serve instance to confirm (500ms, 3s, 1m); exit 6 when one does not' }]);

export const receiptCommand = defineCommand({
  name: 'receipt',
  group: 'Server',
  summary: 'read-only re-check of a change (after exit 6)',
  description:
    'read-only re-check of a change that exited 6 (not_confirmed): which live serve instances applied its revision, and which may still serve the old state until when; changes nothing',
  arguments: [{ name: '<change-id>', description: "the change's id, as the not_confirmed hint and change_id in --json name it" }],
  options: RECEIPT_OPTIONS,
  notes: 'Exit codes: 0 every live instance applied the change (or none is registered), 6 one did not within --wait, 3 no such change.',
  examples: [{ caption: 'after revoke-keys exited 6 naming change 42', lines: ['partnerctl receipt 42 --wait 30s'] }],
  run: async (session, out, { args, options }) => {
    const { parseChangeId, parseWait, recheckReceipt } = await import('../../domain/runtime/receipts.js');
    const changeId = parseChangeId(args[0]!);
    const waitMs = parseWait(options.wait);
    const receipt = await recheckReceipt(await session.db(), changeId, waitMs);
    if (out.json) out.emitJson(receiptJson(receipt));
    return reportReceipt(out, receipt, options.wait);
  },
});
