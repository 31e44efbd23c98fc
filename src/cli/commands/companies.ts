import { mapCompany, unmapCompany } from '../../domain/companies.js';
import type { Output } from '../output.js';
import { askText, confirmDestructive, requireValue } from '../prompts.js';
import type { Session } from '../session.js';
import { resolvePartnerArgument } from './partners.js';

export async function runMapping(
  session: Session,
  out: Output,
  partnerArgument: string | undefined,
  options: { company?: string },
  action: 'map' | 'unmap',
): Promise<void> {
  const reference = await resolvePartnerArgument(session, partnerArgument);
  const company = await requireValue(session, options.company, '--company <company_id>', () => askText(session, 'Company id'));
  if (action === 'unmap') {
    await confirmDestructive(session, `Unmap company '${company}' from '${reference}' (its requests get 404 at once)`);
  }
  const db = await session.db();
  const change = await (action === 'map' ? mapCompany : unmapCompany)(db, session.who, reference, company);
  if (out.json) {
    out.emitJson({ partner_id: change.partner.id, company_id: change.companyId, changed: change.changed });
    return;
  }
  const where = `${change.partner.name} (${change.partner.id})`;
  if (!change.changed) {
    out.line(`Company ${change.companyId} was already ${action === 'map' ? 'mapped to' : 'not mapped to'} ${where}; nothing changed`);
  } else {
    out.line(`${action === 'map' ? 'Mapped' : 'Unmapped'} company ${change.companyId} ${action === 'map' ? 'to' : 'from'} ${where}`);
  }
}
