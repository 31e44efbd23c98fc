// set-credentials (issue 39): which kinds of key pair a partner may exchange with, `secret`, `public-key` or
// `both` (the default). The exchange reads the policy from the partner's row with every exchange
// (verdict.ts `kindAllowed`), so a change holds from the next exchange on, on every instance.
import type { Database } from '../../db/client.js';
import { updateCredentialsPolicy } from '../../db/repositories/partners.js';
import { AppError } from '../../errors.js';
import { CREDENTIALS_POLICIES, type CredentialsPolicy } from '../rules/verdict.js';
import { findPartner, type PartnerRecord } from './partners.js';
import { runUnit, type Actor, type Unit } from './transactions.js';

export function isCredentialsPolicy(value: string): value is CredentialsPolicy {
  return (CREDENTIALS_POLICIES as readonly string[]).includes(value);
}

export async function setCredentialsPolicyIn(
  unit: Unit,
  reference: string,
  policy: CredentialsPolicy,
): Promise<{ partner: PartnerRecord; policy: CredentialsPolicy; changed: boolean }> {
  const partner = await findPartner(unit.tx, reference);
  if (partner.credentialsPolicy === policy) return { partner, policy, changed: false };
  const now = new Date(unit.clock.now());
  await updateCredentialsPolicy(unit.tx, partner.id, policy, now);
  unit.audit({ action: 'partner.credentials_set', partnerId: partner.id, details: { before: partner.credentialsPolicy, after: policy } });
  return { partner: { ...partner, credentialsPolicy: policy, updatedAt: now }, policy, changed: true };
}

export function setCredentialsPolicy(db: Database, who: Actor, reference: string, policy: string) {
  if (!isCredentialsPolicy(policy)) {
    throw new AppError('invalid_argument', `allow must be one of ${CREDENTIALS_POLICIES.join(', ')}, got '${policy.slice(0, 40)}'`, { field: 'allow' });
  }
  return runUnit(db, who, (unit) => setCredentialsPolicyIn(unit, reference, policy));
}
