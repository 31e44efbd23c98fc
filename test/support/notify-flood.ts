// A NOTIFY flood (test/support/README.md, "NOTIFY flood"): notifications on a partnerctl channel from a
// PostgreSQL login that holds no partnerctl role and no grant at all. NOTIFY needs no privilege, so any
// login that can connect (CONNECT is granted to PUBLIC by default) can send them: what listens must take
// them as hints, never as facts, and never spend more per notification than per change.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { adminQuery } from './backends.js';

/** At most this many notifications per send: a flood, not a way to fill the server's queue (8 GB). */
export const MAX_NOTIFICATIONS = 100_000;
/** A send is cut by the server after this long (statement_timeout of the flooder's session). */
export const MAX_SEND_MS = 10_000;

export interface NotifyFlooder {
  /** The login's name: partnerctl_test_nobody_…, a member of no role. */
  login: string;
  /**
   * Sends `count` notifications on `channel` in one statement (delivered together at its commit);
   * payload i is `payload(i)` (default: i), at most 7,999 bytes each (PostgreSQL's limit).
   */
  send(channel: string, count: number, payload?: (i: number) => string): Promise<void>;
  /** Closes the connection and drops the login. */
  close(): Promise<void>;
}

/**
 * Creates a login with no role and no grant (a cluster-wide name of its own), connects it to the database of
 * `databaseUrl`, and hands back a flooder. `adminUrl` creates and drops the login.
 */
export async function roleLessFlooder(adminUrl: string, databaseUrl: string): Promise<NotifyFlooder> {
  const login = `partnerctl_test_nobody_${process.pid}_${randomBytes(4).toString('hex')}`;
  await adminQuery(adminUrl, `CREATE ROLE ${login} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT`);
  const url = new URL(databaseUrl);
  url.username = login;
  url.password = '';
  const client = new pg.Client({ connectionString: url.toString(), statement_timeout: MAX_SEND_MS });
  client.on('error', () => {});
  const drop = () => adminQuery(adminUrl, `DROP ROLE IF EXISTS ${login}`);
  try {
    await client.connect();
    // Proof of what it is: no membership in any role, no superuser.
    const { rows } = await client.query<{ memberships: string; superuser: boolean }>(
      'SELECT (SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = current_user) AS memberships, usesuper AS superuser FROM pg_user WHERE usename = current_user',
    );
    if (Number(rows[0]?.memberships) !== 0 || rows[0]?.superuser !== false) throw new Error(`${login} is not role-less: ${JSON.stringify(rows[0])}`);
  } catch (error) {
    await client.end().catch(() => {});
    await drop();
    throw error;
  }
  return {
    login,
    send: async (channel, count, payload = (i) => String(i)) => {
      if (!Number.isInteger(count) || count < 1 || count > MAX_NOTIFICATIONS) throw new Error(`a NOTIFY flood is 1..${MAX_NOTIFICATIONS} notifications, not ${count}`);
      const payloads = Array.from({ length: count }, (_, i) => payload(i));
      await client.query('SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p', [channel, payloads]);
    },
    close: async () => {
      await client.end().catch(() => {});
      await drop();
    },
  };
}
