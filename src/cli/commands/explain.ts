import type { Actor, Remedy } from '../../domain/operations/refusals.js';
import { defineCommand } from '../definition.js';
import { iso, type Output } from '../output.js';
import type { Session } from '../session.js';
import { say } from '../say.js';

/** A partner name as one shell word. */
function shellWord(value: string): string {
  return /^[A-Za-z0-9_.:@%+=,/-]+$/.test(value) ? value : `"${value.replace(/(["\\$`])/g, '\\$1')}"`;
}

/** The command line that changes the answer, for the operator. */
export function remedyCommand(remedy: Remedy): string {
  const partner = shellWord(remedy.partnerName);
  if (remedy.action === 'map_company') return `partnerctl map-company ${partner} --company ${shellWord(remedy.companyId)}`;
  if (remedy.action === 'enable_partner') return `partnerctl enable-partner ${partner}`;
  if (remedy.action === 'issue_keys') return `partnerctl issue-keys ${partner}`;
  return `partnerctl lookup ${remedy.keyPairId}`;
}

/** Who can act, in the operator's words. */
const ACTOR_WORDS: Record<Actor, string> = {
  client: "the partner's client",
  operator: 'an operator',
  engine_owners: "the recommendation engine's owners",
  database_owners: "the database's owners",
};

export const explainCommand = defineCommand({
  name: 'explain',
  group: 'Audit and webhooks',
  summary: 'why a request was not a success, from its request id',
  description:
    'why a request was refused or failed, from its request id (error.request_id), whichever instance answered: its cause (docs/reasons.md), who can act on it, and what would change the answer',
  arguments: [{ name: '<request-id>', description: 'the request id of the error answer (error.request_id, or the X-Request-Id header)' }],
  notes:
    'Servers write every answer that is not a success within about a second, with its cause (docs/reasons.md);\n' +
    'a success has none on record: exit 3 (not found), saying why none is. An argument that is not a request\n' +
    'id (a UUID) is a usage error: exit 2.',
  examples: [{ lines: ['partnerctl explain 3f0c1f7e-0d3b-4d53-9a55-8f4f0e2f6a10'] }],
  run: (session, out, { args }) => runExplain(session, out, args[0]!),
});

async function runExplain(session: Session, out: Output, requestId: string): Promise<void> {
  const [{ explainRequest }, db] = await Promise.all([import('../../domain/operations/refusals.js'), session.db()]);
  const { decision: d, explanation, actor, remedy } = await explainRequest(db, requestId);
  const command = remedy ? remedyCommand(remedy) : null;
  if (out.json) {
    out.emitJson({
      request_id: d.requestId,
      at: iso(d.at),
      status: d.status,
      reason: d.reason,
      route: d.route,
      method: d.method,
      path: d.path,
      partner_id: d.partnerId,
      key_pair_id: d.keyPairId,
      token_id: d.tokenId,
      company_id: d.companyId,
      client_address: d.clientAddress,
      engine_status: d.engineStatus,
      engine_ms: d.engineMs,
      bytes: d.bytes,
      trace_id: d.traceId,
      instance_id: d.instanceId,
      explanation,
      actor,
      remedy: command,
    });
    return;
  }
  const style = out.style;
  out.line(say`${style.bold(say`answered ${d.status}`)} (${d.reason}) at ${iso(d.at)} by instance ${d.instanceId}`);
  const what = d.route === 'exchange' ? 'token exchange' : d.route === 'data' ? 'data request' : 'request';
  out.line(say`  ${what}${d.method !== null ? say` ${d.method} ${d.path ?? ''}` : ''} from ${d.clientAddress}`);
  if (d.partnerId !== null) out.line(say`  partner:  ${d.partnerId}`);
  if (d.keyPairId !== null) out.line(say`  key pair: ${d.keyPairId}`);
  if (d.tokenId !== null) out.line(say`  token:    ${d.tokenId}`);
  if (d.companyId !== null) out.line(say`  company:  ${d.companyId}`);
  if (d.engineStatus !== null || d.engineMs !== null) out.line(say`  engine:   ${d.engineStatus ?? 'no answer'}${d.engineMs !== null ? say` after ${d.engineMs} ms` : ''}`);
  if (d.bytes !== null) out.line(say`  bytes:    ${d.bytes}`);
  if (d.traceId !== null) out.line(say`  trace:    ${d.traceId}`);
  out.line(say`Why: ${explanation}`);
  // A success on record in a recording window: nothing to mend.
  if (actor === null) return;
  out.line(say`Who can act: ${ACTOR_WORDS[actor]}`);
  out.line(command ? say`To change the answer: ${style.bold(command)}` : say`No operator command changes the answer: the one named above must act.`);
}
