import type { Logger } from 'pino';
import { loggableChain } from './logged-errors.js';
import type { AccessOptions } from './access.js';

/** AccessState's log lines: a database outage starting and ending, the LISTEN connection lost. */
export function accessLog(logger: Logger | undefined): Pick<AccessOptions, 'onOutage' | 'onListenerLost'> {
  return {
    onOutage: (event) => {
      if (event.kind === 'start') {
        logger?.error(
          {
            err: loggableChain(event.error),
            last_confirmed_at: new Date(event.lastConfirmedAt).toISOString(),
            revision: event.revision,
            serving_until: event.servingUntil === null ? null : new Date(event.servingUntil).toISOString(),
          },
          event.servingUntil === null
            ? 'DATABASE OUTAGE started: the revision cannot be read; data requests answer 503 past the 1 s staleness bound'
            : 'DATABASE OUTAGE started: the revision cannot be read; data requests are decided from the last confirmed state until serving_until, then 503; token exchanges 503',
        );
      } else {
        logger?.warn(
          {
            since: new Date(event.since).toISOString(),
            ended_at: new Date(event.endedAt).toISOString(),
            duration_ms: event.endedAt - event.since,
            served_unconfirmed: event.servedUnconfirmed,
            revision_before: event.revisionBefore,
            revision: event.revision,
          },
          'database outage ended: the revision was read again; requests served from unconfirmed state during it in served_unconfirmed',
        );
      }
    },
    onListenerLost: (error) =>
      logger?.warn(
        { err: { message: (error as Error)?.message } },
        'the LISTEN connection for access changes was lost; reconnecting (the revision poll covers the gap)',
      ),
  };
}
