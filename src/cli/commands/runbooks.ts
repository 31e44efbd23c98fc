import type { DesiredLimits, Plan } from '../../domain/operations/desired-state.js';

import { AppError } from '../../errors.js';
import { defineCommand } from '../definition.js';
import { defineOptions, type OptionsOf } from '../options.js';
import type { Output } from '../output.js';
import { jsonSafe, terminalSafe } from '../../text.js';
import { progressBar } from '../progress.js';
import { noteCommit, parseWaitOption, receiptJson, reportReceipt, startWaiting, WAIT_OPTIONS } from '../receipt.js';
import { confirmDestructive } from '../prompts.js';
import { SecretFile, withSecretFile } from '../secret-file.js';
import type { Session } from '../session.js';
import { joined, say, type Said } from '../say.js';

/** A document as text: JSON when it looks like JSON (fast for big files), YAML otherwise. */
export async function parseDocument(text: string, source: string): Promise<unknown> {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{')) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new AppError('invalid_argument', `${source}: not valid JSON: ${(error as Error).message}; nothing was changed`, { cause: error });
    }
    // JSON.parse keeps the last of a duplicated key; YAML refuses it, and so does JSON here.
    const duplicate = duplicateJsonKey(text);
    if (duplicate) {
      throw new AppError('invalid_argument', `${source}: not valid JSON: duplicate key at ${duplicate}; nothing was changed`, {
        hint: 'give each key once',
      });
    }
    return value;
  }
  const { parse } = await import('yaml');
  try {
    return parse(text, { uniqueKeys: true, maxAliasCount: 0 }) ?? {};
  } catch (error) {
    // The parser's first line ("… at line 3, column 3:"), then the line itself, quoted.
    const first = (error as Error).message.split('\n')[0]!.replace(/:$/, '');
    const at = (error as { linePos?: { line: number }[] }).linePos?.[0]?.line;
    const line = at === undefined ? undefined : text.split('\n')[at - 1]?.replace(/\r$/, '');
    const quoted = line === undefined ? '' : `: ${JSON.stringify(line.length > 60 ? `${line.slice(0, 60)}…` : line)}`;
    throw new AppError('invalid_argument', `${source}: not valid YAML: ${first}${quoted}; nothing was changed`, { cause: error });
  }
}

interface Frame {
  /** An object's keys so far (undefined for an array). */
  keys?: Set<string>;
  /** The object's current key, or the array's current index. */
  at: string | number;
  expectingKey: boolean;
}

/**
 * The path (`partners[0].status`) of the first key given twice in one object of a JSON text that
 * JSON.parse accepted, or null. One pass over the text, for documents of any size.
 */
export function duplicateJsonKey(text: string): string | null {
  const stack: Frame[] = [];
  const path = (last: string) =>
    [...stack.slice(0, -1).map((frame) => frame.at), last]
      .map((part, i) => (typeof part === 'number' ? `[${part}]` : `${i === 0 ? '' : '.'}${/^[A-Za-z_][\w-]*$/.test(part) ? part : JSON.stringify(part)}`))
      .join('');
  const string = /"(?:[^"\\]|\\.)*"/y;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    const top = stack.at(-1);
    if (char === '"') {
      string.lastIndex = i;
      const literal = string.exec(text)![0];
      i += literal.length - 1;
      if (top?.keys && top.expectingKey) {
        const key = JSON.parse(literal) as string;
        if (top.keys.has(key)) return path(key);
        top.keys.add(key);
        top.at = key;
        top.expectingKey = false;
      }
    } else if (char === '{') stack.push({ keys: new Set(), at: '', expectingKey: true });
    else if (char === '[') stack.push({ at: 0, expectingKey: false });
    else if (char === '}' || char === ']') stack.pop();
    else if (char === ',' && top) {
      if (top.keys) top.expectingKey = true;
      else top.at = (top.at as number) + 1;
    }
  }
  return null;
}

const APPLY_OPTIONS = defineOptions([
  { flags: '-f, --file <file|->', description: "the document, YAML or JSON ('-' reads stdin)" },
  { flags: '--dry-run', description: 'print the plan only; change nothing' },
  {
    flags: '--prune',
    description: 'also unmap the companies of the named partners that the document does not list (never removes a partner or a key)',
  },
  {
    flags: '--issue-keys-to <file>',
    description: 'issue a key pair to each named partner without an active one; secrets go to this new file (mode 0600), never to stdout',
  },
  ...WAIT_OPTIONS.map((option) => ({ ...option, description: `when the plan disables a partner: ${option.description}` })),
]);

export const applyCommand = defineCommand({
  name: 'apply',
  changes: true,
  group: 'State as code',
  summary: 'make the database match a document of partners',
  description:
    'make the database match a document of partners (name, status, companies): plan, then apply in one transaction (asks to confirm disabling partners or unmapping companies)',
  options: APPLY_OPTIONS,
  notes: `The document:
  partners:
    - name: Acme Pricing
      # optional: absent keeps an existing partner's status; new partners are
      # active
      status: active
      # optional: absent leaves the partner's mappings alone
      companies: [company-1, company-2]
      # optional: the client addresses allowed (set-network); [] clears them;
      # absent leaves the partner's rules alone
      allow_from: [203.0.113.0/24]
      # optional: the partner's own limits, exactly (a field left out: the
      # server's default); {} clears them; absent leaves them alone
      limits: {rate: 50/s, burst: 100, daily_quota: 1000000}

Re-applying the same document changes nothing (exit 0, "changes": 0).
Disabling partners or unmapping companies asks first, after showing the plan
(--yes without a terminal). --issue-keys-to writes the new secrets inside the
transaction: a file that exists is refused (exit 2) and nothing changes; with
nothing to issue the file is not touched.`,
  examples: [{ lines: ['partnerctl export > partners.yaml', 'partnerctl apply -f partners.yaml --dry-run'] }],
  run: (session, out, { options }) => runApply(session, out, options),
});

async function runApply(session: Session, out: Output, options: OptionsOf<typeof APPLY_OPTIONS>): Promise<number | undefined> {
  if (options.file === undefined) {
    throw new AppError('missing_argument', 'missing -f <file|->', { hint: "pass -f desired.yaml, or -f - to read stdin" });
  }
  const waitMs = options.dryRun ? null : await parseWaitOption(options);
  const [{ applyDesiredState, parseDesiredState, planDesiredState }, { readInput }] = await Promise.all([
    import('../../domain/operations/desired-state.js'),
    import('../inputs.js'),
  ]);
  const source = options.file === '-' ? '-f - (stdin)' : `-f ${options.file}`;
  const state = parseDesiredState(await parseDocument(await readInput(session, options.file, '-f'), source), source);
  const planOptions = { prune: options.prune === true, issueKeys: options.issueKeysTo !== undefined };
  const db = await session.db();
  // Disabling partners and unmapping companies cut traffic at once: confirmed, as disable-partner and
  // unmap-company are (--yes without a terminal), after the plan is shown. A dry run never asks.
  let shown = false;
  if (!options.dryRun && !session.options.yes) {
    const preview = await planDesiredState(db, state, planOptions);
    const cuts = [
      preview.partnersDisabled ? 'a disabled partner\'s tokens are refused at once' : '',
      preview.companiesUnmapped ? "an unmapped company's requests get 404 at once" : '',
    ].filter(Boolean);
    if (cuts.length > 0) {
      if (session.interactive) {
        await printPlan(out, preview);
        shown = true;
      }
      await confirmDestructive(session, `Apply ${plural(preview.changes, 'change')} (${planCounts(preview)}); ${cuts.join(', ')}`);
    }
  }
  // The secrets are written inside the transaction (a new file, mode 0600, never one that exists), and only
  // when there are some: a file that cannot be written changes nothing; a re-run with none leaves it alone.
  const keysFile = options.issueKeysTo !== undefined && !options.dryRun ? new SecretFile(options.issueKeysTo, '--issue-keys-to') : null;
  let plan: Plan;
  let applied = false;
  let committedAt = 0;
  if (options.dryRun) {
    plan = await planDesiredState(db, state, planOptions);
  } else {
    const size = state.partners.reduce((sum, partner) => sum + 1 + (partner.companies?.length ?? 0), 0);
    const bar = progressBar(session.terminal, say`applying`, size);
    let result;
    try {
      result = await withSecretFile(keysFile, () =>
        applyDesiredState(
          db,
          session.who,
          state,
          planOptions,
          (done) => bar.update(done),
          keysFile ? (issued) => keysFile.write(issued) : undefined,
        ),
      );
    } finally {
      bar.done();
    }
    committedAt = db.clock.now();
    plan = result.plan;
    applied = plan.changes > 0;
  }
  // A plan that disables a partner refuses its credentials: wait for the serve instances to confirm.
  const waiting = plan.partnersDisabled > 0 && !options.dryRun ? await startWaiting(db, waitMs) : null;
  if (waiting) noteCommit(out, session.options.debug, committedAt);
  const receipt = waiting ? await waiting.finish(committedAt) : null;
  const waitText = options.wait || '3s';
  if (out.json) {
    out.emitJson({
      plan: planJson(plan),
      applied,
      // Where the new secrets went; null when none were issued (the file was not touched).
      ...(keysFile ? { keys_file: keysFile.written ? keysFile.path : null } : {}),
      changed: applied,
      ...receiptJson(receipt),
    });
    return reportReceipt(out, receipt, waitText);
  }
  // The plan shown before the question is not shown again.
  if (!shown) await printPlan(out, plan);
  if (plan.changes === 0) out.line(say`Nothing to change: the database already matches the document.`);
  else if (options.dryRun) out.line(say`Dry run: nothing was changed.`);
  else {
    out.line(say`Applied ${plan.changes} change${plan.changes === 1 ? '' : 's'} in one transaction.`);
    if (keysFile?.written) out.line(say`The secrets of ${plural(plan.keysIssued, 'new key pair')} are in ${keysFile.path} (mode 0600); they are shown nowhere else.`);
  }
  return reportReceipt(out, receipt, waitText);
}

function planJson(plan: Plan) {
  return {
    changes: plan.changes,
    partners_created: plan.partnersCreated,
    partners_enabled: plan.partnersEnabled,
    partners_disabled: plan.partnersDisabled,
    companies_mapped: plan.companiesMapped,
    companies_unmapped: plan.companiesUnmapped,
    keys_issued: plan.keysIssued,
    networks_set: plan.networksSet,
    limits_set: plan.limitsSet,
    credentials_set: plan.credentialsSet,
    partners: plan.partners.map((step) => ({
      name: step.name,
      partner_id: step.partnerId,
      created: step.create,
      status: step.create ? step.createStatus : step.statusChange === null ? null : step.statusChange === 'enabled' ? 'active' : 'disabled',
      companies_mapped: step.map,
      companies_unmapped: step.unmap,
      key_issued: step.issueKeys,
      ...(step.network === null ? {} : { allow_from: step.network }),
      ...(step.limits === null ? {} : { limits: step.limits }),
      ...(step.credentials === null ? {} : { credentials: step.credentials }),
      ...(step.publicKey === null ? {} : { public_key_kid: step.publicKey.kid }),
    })),
  };
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** Every kind of change the plan makes, counted (creations included): `1 partner created, 2 companies unmapped`. */
function planCounts(plan: Plan): string {
  const kinds: [number, string, string][] = [
    [plan.partnersCreated, 'partner created', 'partners created'],
    [plan.partnersEnabled, 'partner enabled', 'partners enabled'],
    [plan.partnersDisabled, 'partner disabled', 'partners disabled'],
    [plan.companiesMapped, 'company mapped', 'companies mapped'],
    [plan.companiesUnmapped, 'company unmapped', 'companies unmapped'],
    [plan.keysIssued, 'key pair issued', 'key pairs issued'],
    [plan.networksSet, 'network rule set changed', 'network rule sets changed'],
    [plan.limitsSet, 'partner limits changed', 'partner limits changed'],
    [plan.credentialsSet, 'credentials policy set', 'credentials policies set'],
  ];
  return kinds
    .filter(([n]) => n > 0)
    .map(([n, one, many]) => `${n} ${n === 1 ? one : many}`)
    .join(', ');
}

function limitsText(limits: DesiredLimits): Said {
  const set = Object.entries(limits);
  return set.length === 0 ? say`clear the limits (the server's defaults)` : say`limits ${joined(set.map(([key, value]) => say`${key}=${value}`), ' ')}`;
}

/** The plan, one line a partner; on a terminal additions green, removals red, other changes yellow. */
async function printPlan(out: Output, plan: Plan): Promise<void> {
  const style = out.style;
  for (const step of plan.partners) {
    const parts: Said[] = [];
    const added = (text: Said) => parts.push(style.green(text));
    const removed = (text: Said) => parts.push(style.red(text));
    const changed = (text: Said) => parts.push(style.yellow(text));
    if (step.create) added(say`create (${step.createStatus})`);
    if (step.statusChange) (step.statusChange === 'enabled' ? added : removed)(step.statusChange === 'enabled' ? say`enable` : say`disable`);
    if (step.map.length) added(say`map ${plural(step.map.length, 'company', 'companies')}`);
    if (step.unmap.length) removed(say`unmap ${plural(step.unmap.length, 'company', 'companies')}`);
    if (step.issueKeys) added(say`issue a key pair`);
    if (step.publicKey) added(say`register public key ${step.publicKey.kid}`);
    if (step.credentials) changed(say`allow ${step.credentials} credentials`);
    if (step.network) changed(step.network.length === 0 ? say`clear the network rules` : say`allow only ${joined(step.network)}`);
    if (step.limits) changed(limitsText(step.limits));
    const mark = step.create ? style.green('+') : style.yellow('~');
    out.line(say`${mark} ${step.name}${step.partnerId ? say` (${step.partnerId})` : ''}: ${joined(parts)}`);
  }
  const keys = plan.keysIssued ? say`; ${plural(plan.keysIssued, 'key pair')} issued` : '';
  const networks = plan.networksSet ? say`; ${plural(plan.networksSet, 'network rule set')} changed` : '';
  const limits = plan.limitsSet ? say`; ${plural(plan.limitsSet, "partner's limits", "partners' limits")} changed` : '';
  const credentials = plan.credentialsSet ? say`; ${plural(plan.credentialsSet, 'credentials policy', 'credentials policies')} set` : '';
  out.line(
    say`Plan: ${plural(plan.partnersCreated, 'partner')} created, ${plan.partnersEnabled} enabled, ${plan.partnersDisabled} disabled; ${plural(plan.companiesMapped, 'company', 'companies')} mapped, ${plan.companiesUnmapped} unmapped${keys}${networks}${limits}${credentials} (${plural(plan.changes, 'change')})`,
  );
}

const EXPORT_OPTIONS = defineOptions([{ flags: '--partner <partner>', description: 'only this partner (id or name); repeat for more', repeatable: true }]);

export const exportCommand = defineCommand({
  name: 'export',
  group: 'State as code',
  summary: 'print the partners as a document for apply',
  description: 'print partners, their status, companies, network rules and limits as a document for apply (YAML; JSON with --json)',
  options: EXPORT_OPTIONS,
  run: (session, out, { options }) => runExport(session, out, options),
});

async function runExport(session: Session, out: Output, options: OptionsOf<typeof EXPORT_OPTIONS>): Promise<void> {
  const [{ exportDesiredState }, db] = await Promise.all([import('../../domain/operations/desired-state.js'), session.db()]);
  const state = await exportDesiredState(db, options.partner ?? []);
  if (out.json) {
    out.emitJson(state);
    return;
  }
  // The yaml library quotes whatever a reader could take for something else (`true`, `12`, `#x`, `a: b`).
  // Strings holding control or bidi characters are double-quoted, those characters written as YAML escapes
  // (`\u202e`): the same value for apply, nothing a terminal acts on.
  const { Document, visit } = await import('yaml');
  const document = new Document(state);
  visit(document, {
    Scalar(_key, node) {
      if (typeof node.value === 'string' && terminalSafe(node.value) !== node.value) node.type = 'QUOTE_DOUBLE';
    },
  });
  session.terminal.out.write(jsonSafe(document.toString({ lineWidth: 0 })));
}
