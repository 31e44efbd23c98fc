import { EXIT } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import { iso, type Output } from '../output.js';
import type { Session } from '../session.js';

const INSTANCES_OPTIONS = defineOptions([
  { flags: '--fail-if-behind', description: 'exit 1 when any live instance is behind the current revision (a monitor check)' },
]);

export const instancesCommand = defineCommand({
  name: 'instances',
  group: 'Server',
  summary: 'the running serve instances and what each applied',
  description: 'list the running serve instances: heartbeat, the revision each applied, stale or behind',
  options: INSTANCES_OPTIONS,
  notes: `An instance heartbeats every second; one silent for over 10 s is stale:
listed, never awaited by a receipt. Behind: live and not yet at the
database's current revision.`,
  run: (session, out, { options }) => runInstances(session, out, options),
});

async function runInstances(session: Session, out: Output, options: OptionsOf<typeof INSTANCES_OPTIONS>): Promise<number | undefined> {
  const [{ instanceReport }, db] = await Promise.all([import('../../domain/instances.js'), session.db()]);
  const { revision, instances } = await instanceReport(db);
  if (out.json) {
    out.emitJson({
      revision,
      instances: instances.map((i) => ({
        instance_id: i.instanceId,
        host: i.host,
        pid: i.pid,
        version: i.version,
        address: i.address,
        started_at: iso(i.startedAt),
        last_seen_at: iso(i.lastSeenAt),
        applied_revision: i.appliedRevision,
        stale: i.stale,
        behind: i.behind,
      })),
    });
  } else {
    out.line(`Revision ${revision}; ${instances.length} registered serve instance(s).`);
    if (instances.length > 0) {
      out.line(
        await out.table(
          [
            { title: 'INSTANCE', whole: true },
            { title: 'HOST', min: 8, truncate: 'middle' },
            { title: 'PID', min: 3 },
            { title: 'ADDRESS', min: 10, optional: true },
            { title: 'APPLIED', min: 7 },
            { title: 'LAST SEEN', min: 10 },
            { title: 'STATE', min: 6 },
          ],
          instances.map((i) => [
            i.instanceId,
            i.host,
            i.pid,
            i.address,
            i.appliedRevision,
            i.lastSeenAt,
            i.stale ? 'stale' : i.behind ? 'behind' : 'current',
          ]),
        ),
      );
    }
  }
  const behind = instances.filter((i) => i.behind);
  if (options.failIfBehind && behind.length > 0) {
    out.note(
      `partnerctl: ${behind.length} live serve instance(s) behind revision ${revision}: ${behind.map((i) => `${i.instanceId} (${i.host}, pid ${i.pid}, at ${i.appliedRevision ?? 'none'})`).join(', ')}`,
    );
    return EXIT.error;
  }
  return undefined;
}
