// The four PostgreSQL roles of `partnerctl db roles`, and the words for a privilege the connected role lacks.
// Operators log in as their own users, members of one of these roles; the audit trail records that login.
import { AppError } from '../errors.js';
import type { Database } from './client.js';

export const ROLES = ['partnerctl_support', 'partnerctl_oncall', 'partnerctl_admin', 'partnerctl_server'] as const;
const [SUPPORT, ONCALL, ADMIN, SERVER] = ROLES;

function ident(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * The SQL that creates the roles (reusing any the cluster already has, say from another database) and gives
 * them exactly their privileges in `database`: what an earlier run granted here is taken back first, so
 * running it again, after a migration added tables, leaves exactly this. None of the roles may update or
 * delete audit events, and none becomes an owner.
 */
export function rolesSql(database: string): string {
  const all = ROLES.join(', ');
  return `-- partnerctl db roles: four roles for ${database}; re-runnable (run it again after 'db migrate').
DO $roles$
BEGIN
${ROLES.map((role) => `  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${role}') THEN CREATE ROLE ${role} NOLOGIN; END IF;`).join('\n')}
END
$roles$;

-- Exactly these privileges in this database: take back what an earlier run granted.
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM ${all};
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM ${all};
GRANT CONNECT ON DATABASE ${ident(database)} TO ${all};
GRANT USAGE ON SCHEMA public TO ${all};

-- ${SUPPORT}: read everything, map and unmap companies, mint test tokens.
GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${SUPPORT};
-- but never a webhook's signing secret: only the admin and the server (which signs) read it.
REVOKE SELECT ON webhook_endpoints FROM ${SUPPORT};
GRANT SELECT (id, url, events, partner_id, description, created_at) ON webhook_endpoints TO ${SUPPORT};
GRANT UPDATE (value) ON revision TO ${SUPPORT};
GRANT INSERT ON audit_events TO ${SUPPORT};
GRANT USAGE ON SEQUENCE audit_events_id_seq TO ${SUPPORT};
GRANT INSERT, DELETE ON company_mappings TO ${SUPPORT};
-- A partner's updated_at moves with every change to it, a mapping included.
GRANT UPDATE (updated_at) ON partners TO ${SUPPORT};
GRANT INSERT ON signing_keys TO ${SUPPORT};
-- Recording windows (record): support opens and stops them.
GRANT INSERT, UPDATE (ends_at) ON recording_windows TO ${SUPPORT};

-- ${ONCALL}: support's, plus revoke and rotate keys, revoke tokens, disable and enable partners.
GRANT ${SUPPORT} TO ${ONCALL};
GRANT INSERT, UPDATE (status, superseded_at, revoked_at, retires_at, switched_at, after_switch_seconds) ON key_pairs TO ${ONCALL};
GRANT UPDATE (status, updated_at, tokens_revoked_before) ON partners TO ${ONCALL};
-- Their webhook events, written in the same transaction (the outbox).
GRANT INSERT ON webhook_events, webhook_deliveries TO ${ONCALL};

-- ${ADMIN}: everything (apply, create partners, issue keys, limits, and every table added since),
-- but never UPDATE or DELETE of audit events, nor the migration history.
GRANT ${ONCALL} TO ${ADMIN};
GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${ADMIN};
REVOKE UPDATE, DELETE ON audit_events FROM ${ADMIN};
REVOKE INSERT, UPDATE, DELETE ON audit_chain, _prisma_migrations FROM ${ADMIN};
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO ${ADMIN};
GRANT SELECT ON webhook_endpoints TO ${ADMIN};

-- ${SERVER}: what the API server (serve) needs and nothing else (it cannot create partners or keys).
GRANT SELECT ON partners, key_pairs, company_mappings, partner_limits, partner_networks, revision, signing_keys, usage_hours, _prisma_migrations TO ${SERVER};
GRANT UPDATE (last_used_at, last_refused_at, unlisted_refused_at, unlisted_refused_address) ON key_pairs TO ${SERVER};
-- An overlap's end, seen by the server (the partner's switch, a pair past its retires_at), and its audit event.
GRANT UPDATE (switched_at, retires_at, status, superseded_at) ON key_pairs TO ${SERVER};
GRANT SELECT, INSERT ON audit_events TO ${SERVER};
GRANT USAGE ON SEQUENCE audit_events_id_seq TO ${SERVER};
GRANT SELECT ON audit_chain TO ${SERVER};
GRANT UPDATE (value) ON revision TO ${SERVER};
GRANT INSERT, UPDATE ON usage_hours TO ${SERVER};
-- The gate's refusals on record and the exposure counts: written in batches, pruned after their retention.
GRANT SELECT, INSERT, UPDATE, DELETE ON gate_decisions, gate_decisions_unrecorded, exposure_hours TO ${SERVER};
-- Client assertions' jti already accepted (replay protection), pruned once expired.
GRANT SELECT, INSERT, UPDATE, DELETE ON assertion_jtis TO ${SERVER};
-- Recording windows: read with a partner's access snapshot (opened and stopped by an operator only).
GRANT SELECT ON recording_windows TO ${SERVER};
-- Its own row in the instance registry (heartbeat, applied revision; removed at shutdown).
GRANT SELECT, INSERT, UPDATE, DELETE ON serve_instances TO ${SERVER};
GRANT INSERT ON signing_keys TO ${SERVER};
-- Webhooks: the events of its own changes (the outbox), the reminders it finds, and their delivery.
GRANT SELECT ON webhook_endpoints, webhook_events, webhook_deliveries, webhook_reminders TO ${SERVER};
GRANT INSERT ON webhook_events, webhook_deliveries, webhook_reminders TO ${SERVER};
GRANT UPDATE (status, attempts, next_attempt_at, last_attempt_at, last_status, last_error, delivered_at) ON webhook_deliveries TO ${SERVER};
-- The delivery lease it takes, renews and gives up (one instance delivers at a time).
GRANT SELECT, INSERT, UPDATE, DELETE ON leases TO ${SERVER};
-- Secret scanning (PUBLIC_API_SECRET_SCANNING=github): the alerts handled, and the containment of a leaked
-- secret (its pair revoked) or token (the partner's brake), as revoke-keys and revoke-tokens do.
GRANT SELECT, INSERT ON leak_reports TO ${SERVER};
GRANT UPDATE (revoked_at, leak_reported_at, leak_url) ON key_pairs TO ${SERVER};
GRANT UPDATE (updated_at, tokens_revoked_before) ON partners TO ${SERVER};
`;
}

/** Whether the database refused a statement for want of a privilege (SQLSTATE 42501). */
export function isPermissionError(error: unknown): boolean {
  return String((error as { code?: unknown } | undefined)?.code ?? '') === '42501';
}

/**
 * The columns a statement needs its verb on: the select list, an INSERT's column list, an UPDATE's SET
 * targets (candidates only: words that are not columns of the table are dropped by the lookup).
 */
function statementColumns(verb: string, statement: string): string[] {
  const part =
    verb === 'SELECT'
      ? /^\s*SELECT\s+([\s\S]*?)\s+FROM\s/i.exec(statement)?.[1]
      : verb === 'INSERT'
        ? /^\s*INSERT\s+INTO\s+\S+\s*\(([^)]*)\)/i.exec(statement)?.[1]
        : verb === 'UPDATE'
          ? /\bSET\s+([\s\S]*?)(?:\s+WHERE\s|$)/i.exec(statement)?.[1]?.replace(/=[^,]*/g, '')
          : undefined;
  return [...new Set(part?.match(/[a-z_][a-z0-9_]*/gi) ?? [])];
}

/**
 * One line for a refused statement: the login, the privilege it lacks (the statement's verb on the table the
 * database named, and on the columns it names) and the first of the four roles that holds it here and that
 * the login is not already a member of. A refusal by one of the schema's own rules (a trigger's reason after
 * the table's name) is passed on with its reason: no membership would change it.
 */
export async function permissionDenied(db: Database, error: unknown): Promise<AppError> {
  const message = (error as Error).message ?? '';
  const statement = String((error as { statement?: unknown }).statement ?? '');
  const object = /permission denied for (table|sequence|relation|schema|database) "?([\w.]+)"?(?::\s*(.+))?/i.exec(message);
  const kind = object?.[1]?.toLowerCase() ?? 'table';
  const target = object?.[2] ?? 'unknown';
  const rule = object?.[3];
  const verb = kind === 'sequence' ? 'USAGE' : (/^\s*(SELECT|INSERT|UPDATE|DELETE|TRUNCATE)\b/i.exec(statement)?.[1]?.toUpperCase() ?? 'SELECT');
  let login = 'this login';
  let holder: string | undefined;
  try {
    const check =
      kind === 'sequence'
        ? 'has_sequence_privilege(r.oid, $1, $2)'
        : `(has_table_privilege(r.oid, $1, $2) OR ($2 IN ('SELECT', 'INSERT', 'UPDATE') AND EXISTS (
             SELECT 1 FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = ANY($4::text[]))
           AND NOT EXISTS (
             SELECT 1 FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = ANY($4::text[])
             AND NOT has_column_privilege(r.oid, $1, a.attname, $2))))`;
    const rows = await db.sql.query<{ login: string; holder: string | null }>(
      `SELECT session_user AS login,
              (SELECT r.rolname FROM pg_roles r WHERE r.rolname = ANY($3::text[]) AND NOT pg_has_role(session_user, r.oid, 'MEMBER') AND ${check}
               ORDER BY array_position($3::text[], r.rolname::text) LIMIT 1) AS holder`,
      [target, verb, [...ROLES], ...(kind === 'sequence' ? [] : [statementColumns(verb, statement)])],
    );
    login = rows[0]?.login ?? login;
    holder = rows[0]?.holder ?? undefined;
  } catch {
    // The words stay useful without the lookup.
  }
  if (rule) {
    return new AppError('permission_denied', `${verb} on ${target} refused for ${login}: ${rule}`, { hint: 'see docs/roles.md', cause: error });
  }
  const who = holder ? `${holder} has it` : "none of the four roles (docs/roles.md) has it";
  return new AppError('permission_denied', `${verb} on ${target} is not granted to ${login}; ${who}`, {
    hint: holder ? `ask for membership: GRANT ${holder} TO ${login} (docs/roles.md)` : 'see docs/roles.md',
    cause: error,
  });
}

export interface Principal {
  /** The login the database knows this connection as (session_user). */
  readonly login: string;
  /** Which of the four roles it holds, directly or through another (a superuser holds them all). */
  readonly roles: readonly string[];
  readonly superuser: boolean;
}

/** Who the database says this connection is: what `context show` verifies, not what the URL claims. */
export async function sessionPrincipal(db: Database): Promise<Principal> {
  const rows = await db.sql.query<{ login: string; roles: string[] | null; superuser: boolean }>(
    `SELECT session_user AS login,
            ARRAY(SELECT r.rolname::text FROM pg_roles r
                  WHERE r.rolname = ANY($1::text[]) AND pg_has_role(session_user, r.oid, 'MEMBER')
                  ORDER BY array_position($1::text[], r.rolname::text)) AS roles,
            (SELECT rolsuper FROM pg_roles WHERE rolname = session_user) AS superuser`,
    [[...ROLES]],
  );
  const row = rows[0]!;
  return { login: row.login, roles: row.roles ?? [], superuser: row.superuser === true };
}
