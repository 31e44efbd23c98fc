// The vocabulary of the audit trail, in one place: the unit of work accepts only these actions
// (transactions.ts types AuditEntry.action with it), `audit --action` refuses any other, and the help lists
// them. No imports: the CLI's help loads it at start-up.

export const AUDIT_ACTIONS = [
  'partner.created',
  'partner.disabled',
  'partner.enabled',
  'partner.limits_set',
  'partner.network_set',
  'partner.credentials_set',
  'keys.issued',
  'keys.rotated',
  'keys.retired',
  'keys.revoked',
  'tokens.revoked',
  'company.mapped',
  'company.unmapped',
  'token.test_minted',
  'leak.reported',
  'webhook.added',
  'webhook.removed',
  'instance.forgotten',
  'recording.started',
  'recording.stopped',
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export function isAuditAction(value: string): value is AuditAction {
  return (AUDIT_ACTIONS as readonly string[]).includes(value);
}

/** One event of the audit trail as a change records it (the unit of work writes it with the change). */
export interface AuditEntry {
  action: AuditAction;
  partnerId?: string | null;
  details?: Record<string, unknown>;
}
