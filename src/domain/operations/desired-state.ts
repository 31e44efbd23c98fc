// Declarative provisioning: a document of partners (name, status, companies) is the desired state; a plan
// is what it would take to get there; applying runs the whole plan as ONE unit of work.
import { createRequire } from 'node:module';
import type { Database } from '../../db/client.js';
import { companyIdsOf } from '../../db/repositories/companies.js';
import { activeKeyPair } from '../../db/repositories/key-pairs.js';
import { partnerByName, partnerPage } from '../../db/repositories/partners.js';
import type { Queryable } from '../../db/unit.js';
import { AppError } from '../../errors.js';
import { closest } from '../../text.js';
import { bulkPolicy, mapCompaniesIn, unmapCompaniesIn } from './companies.js';
import { NO_LIMITS, partnerLimitsOn, replaceLimitsIn, sameLimits, type PartnerLimits } from './limits.js';
import { formatRate, MAX_COUNT, parseRate } from '../../rates.js';
import { canonicalCidr, canonicalRules, partnerNetwork, partnerNetworkOn, setNetworkIn } from './networks.js';
import { issueKeyPairIn, newKeyPair, type IssuedKeyPair, type NewKeyPair } from './key-pairs.js';
import { createPartnerIn, findPartner, printable, refuseSimilarName, setPartnerStatusIn, type PartnerRecord, type PartnerStatus } from './partners.js';
import { runUnit, type Actor } from './transactions.js';
import { setCredentialsPolicyIn } from './credentials-policy.js';
import { parsePublicKey, type RegisteredPublicKey } from '../rules/public-keys.js';
import { CREDENTIALS_POLICIES, type CredentialsPolicy } from '../rules/verdict.js';
import { nameKey } from '../../text.js';
import { isValidCompanyId, validatePartnerName } from '../rules/validation.js';

export interface DesiredPartner {
  name: string;
  /** Absent: an existing partner keeps its status, a new one is created active. */
  status?: PartnerStatus;
  /** Absent: the partner's mappings are not managed by the document (not even with --prune). */
  companies?: string[];
  /** The partner's network rules (canonical CIDRs); an empty list clears them. Absent: not managed by the document. */
  allow_from?: string[];
  /**
   * The partner's own limits, exactly: a field left out has no value of its own (the server's default), `{}`
   * clears them all. Absent: not managed by the document.
   */
  limits?: DesiredLimits;
  /** set-credentials: `secret`, `public-key` or `both`. Absent: not managed by the document. */
  credentials?: CredentialsPolicy;
  /**
   * The public key (a JWK, public members; `alg` and `kid` may be given) of the partner's active pair: registered
   * for a partner without an active pair; another active pair is refused (a rotation is rotate-keys). Absent: not managed.
   */
  public_key?: Record<string, unknown>;
}

/** Limits as set-limits takes them: `50/s`, a burst, a daily quota. */
export interface DesiredLimits {
  rate?: string;
  burst?: number;
  daily_quota?: number;
}

export interface DesiredState {
  partners: DesiredPartner[];
}

/** The document's shape (zod loaded on first use: export and the other commands never need it). */
let documentSchemaCache: ReturnType<typeof makeDocumentSchema> | undefined;
const documentSchema = () => (documentSchemaCache ??= makeDocumentSchema());

function makeDocumentSchema() {
  const { z } = createRequire(import.meta.url)('zod') as typeof import('zod');
  return z
    .object({
      partners: z.array(
        z
          .object({
            name: z.string(),
            status: z.enum(['active', 'disabled']).optional(),
            companies: z.array(z.string()).optional(),
            allow_from: z.array(z.string()).optional(),
            limits: z
              .object({
                rate: z.string().optional(),
                burst: z.number().int().min(1).max(MAX_COUNT).optional(),
                daily_quota: z.number().int().min(1).max(MAX_COUNT).optional(),
              })
              .strict()
              .optional(),
            credentials: z.enum(CREDENTIALS_POLICIES).optional(),
            public_key: z.record(z.string(), z.unknown()).optional(),
          })
          .strict(),
      ),
    })
    .strict();
}

const MAX_PROBLEMS_SHOWN = 20;

function pathText(path: readonly PropertyKey[]): string {
  return path.map((part, i) => (typeof part === 'number' ? `[${part}]` : `${i === 0 ? '' : '.'}${String(part)}`)).join('') || '(document)';
}

/**
 * Checks a parsed document strictly (unknown keys, wrong types, invalid names and company ids, a name given
 * twice), collecting every problem with its path into one error. Company ids repeated within a partner
 * count once.
 */
export function parseDesiredState(value: unknown, source: string): DesiredState {
  const problems: string[] = [];
  const parsed = documentSchema().safeParse(value);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      if (issue.code === 'unrecognized_keys') {
        // An unknown key, with the nearest key that place knows (`compnies` -> `companies`).
        const known =
          issue.path.length === 0
            ? ['partners']
            : issue.path.at(-1) === 'limits'
              ? ['rate', 'burst', 'daily_quota']
              : ['name', 'status', 'companies', 'allow_from', 'limits', 'credentials', 'public_key'];
        for (const key of issue.keys) {
          const near = closest(key, known, 1)[0];
          problems.push(`${pathText(issue.path)}: unknown key '${printable(key)}'${near ? `: did you mean '${near}'?` : ''}`);
        }
      } else problems.push(`${pathText(issue.path)}: ${issue.message}`);
    }
  }
  // The checks of names and ids run on whatever is there, so that one run names every problem.
  const raw = (value as { partners?: unknown } | null)?.partners;
  const seen = new Map<string, number>();
  (Array.isArray(raw) ? raw : []).forEach((partner: unknown, i) => {
    const { name, companies, allow_from: allowFrom, limits } = (partner ?? {}) as {
      name?: unknown;
      companies?: unknown;
      allow_from?: unknown;
      limits?: { rate?: unknown };
    };
    if (typeof limits?.rate === 'string') {
      try {
        parseRate(limits.rate);
      } catch (error) {
        problems.push(`partners[${i}].limits.rate: ${(error as Error).message}`);
      }
    }
    if (Array.isArray(allowFrom)) {
      allowFrom.forEach((cidr: unknown, j) => {
        if (typeof cidr !== 'string') return;
        try {
          canonicalCidr(cidr);
        } catch (error) {
          problems.push(`partners[${i}].allow_from[${j}]: ${(error as Error).message}`);
        }
      });
    }
    if (typeof name === 'string') {
      try {
        const valid = validatePartnerName(name);
        // Names are unique ignoring case and Unicode form, so `Initech` and `initech` are the same partner twice.
        const earlier = seen.get(nameKey(valid));
        if (earlier !== undefined) problems.push(`partners[${i}].name: '${valid}' is already given at partners[${earlier}]`);
        else seen.set(nameKey(valid), i);
      } catch (error) {
        problems.push(`partners[${i}].name: ${(error as Error).message}`);
      }
    }
    if (Array.isArray(companies)) {
      companies.forEach((id: unknown, j) => {
        if (typeof id === 'string' && !isValidCompanyId(id)) {
          problems.push(`partners[${i}].companies[${j}]: invalid company id (1-128 visible ASCII characters)`);
        }
      });
    }
  });
  problems.sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  if (problems.length > 0) {
    const shown = problems.slice(0, MAX_PROBLEMS_SHOWN).join('; ');
    const more = problems.length > MAX_PROBLEMS_SHOWN ? `; and ${problems.length - MAX_PROBLEMS_SHOWN} more` : '';
    throw new AppError('invalid_argument', `${source}: ${problems.length} problem${problems.length > 1 ? 's' : ''}: ${shown}${more}; nothing was changed`, {
      hint: 'the document is {partners: [{name, status?, companies?, allow_from?, limits?: {rate?, burst?, daily_quota?}, credentials?, public_key?}]}',
    });
  }
  const data = parsed.data as DesiredState;
  return {
    partners: data.partners.map((partner) => ({
      name: partner.name.normalize('NFC'),
      ...(partner.status ? { status: partner.status } : {}),
      ...(partner.companies ? { companies: [...new Set(partner.companies)] } : {}),
      ...(partner.allow_from ? { allow_from: canonicalRules(partner.allow_from) } : {}),
      ...(partner.limits ? { limits: documentLimits(limitsOf(partner.limits)) } : {}),
      ...(partner.credentials ? { credentials: partner.credentials } : {}),
      ...(partner.public_key ? { public_key: partner.public_key } : {}),
    })),
  };
}

/** A document's limits as the partner's own limits (fields left out: none of its own). */
function limitsOf(limits: DesiredLimits): PartnerLimits {
  return { rate: limits.rate === undefined ? null : parseRate(limits.rate), burst: limits.burst ?? null, dailyQuota: limits.daily_quota ?? null };
}

/** A partner's own limits as a document writes them: only the fields it has. */
function documentLimits(limits: PartnerLimits): DesiredLimits {
  return {
    ...(limits.rate ? { rate: formatRate(limits.rate) } : {}),
    ...(limits.burst !== null ? { burst: limits.burst } : {}),
    ...(limits.dailyQuota !== null ? { daily_quota: limits.dailyQuota } : {}),
  };
}

export interface PartnerPlan {
  name: string;
  /** Null for a partner the plan creates. */
  partnerId: string | null;
  create: boolean;
  /** The status change, if any ('enabled' / 'disabled'); a new partner's status is `createStatus`. */
  statusChange: 'enabled' | 'disabled' | null;
  createStatus: PartnerStatus | null;
  map: string[];
  unmap: string[];
  issueKeys: boolean;
  /** The network rules to set (an empty list clears them); null: unchanged. */
  network: string[] | null;
  /** The partner's own limits to set, as the document writes them (`{}` clears them); null: unchanged. */
  limits: DesiredLimits | null;
  /** The credentials policy to set; null: unchanged. */
  credentials: CredentialsPolicy | null;
  /** The public key to register (a public_key pair, issued instead of a secret pair); null: none. */
  publicKey: RegisteredPublicKey | null;
}

export interface Plan {
  /** Only the partners with something to change, in the document's order. */
  partners: PartnerPlan[];
  partnersCreated: number;
  partnersEnabled: number;
  partnersDisabled: number;
  companiesMapped: number;
  companiesUnmapped: number;
  keysIssued: number;
  networksSet: number;
  limitsSet: number;
  credentialsSet: number;
  /** Every partner, mapping and key change the plan makes: 0 when the database is already as described. */
  changes: number;
}

export interface PlanOptions {
  /** Unmap the companies of the named partners that the document does not list. */
  prune?: boolean;
  /** Issue a key pair to every named partner without an active one. */
  issueKeys?: boolean;
}

/** What it takes to get from the database as it is to the document. */
export function planDesiredState(db: Database, state: DesiredState, options: PlanOptions = {}): Promise<Plan> {
  return planOn(db.sql, state, options);
}

async function planOn(q: Queryable, state: DesiredState, options: PlanOptions): Promise<Plan> {
  const partners: PartnerPlan[] = [];
  for (const desired of state.partners) {
    const existing = (await partnerByName(q, desired.name)) as PartnerRecord | null;
    // A document names partners exactly: a name the same as another partner's but for case is refused.
    if (!existing) await refuseSimilarName(q, desired.name);
    const wanted = desired.companies ?? [];
    let map: string[] = wanted;
    let unmap: string[] = [];
    let statusChange: PartnerPlan['statusChange'] = null;
    let issueKeys = options.issueKeys === true;
    if (existing) {
      const current = await companyIdsOf(q, existing.id);
      const have = new Set(current);
      map = wanted.filter((id) => !have.has(id));
      if (options.prune && desired.companies) {
        const want = new Set(wanted);
        unmap = current.filter((id) => !want.has(id));
      }
      if (desired.status && desired.status !== existing.status) statusChange = desired.status === 'active' ? 'enabled' : 'disabled';
      if (issueKeys) issueKeys = (await activeKeyPair(q, existing.id)) === null;
    }
    let network: string[] | null = null;
    if (desired.allow_from !== undefined) {
      const current = existing ? await partnerNetworkOn(q, existing.id) : [];
      if (current.join(',') !== desired.allow_from.join(',')) network = desired.allow_from;
    }
    const credentials = desired.credentials !== undefined && desired.credentials !== (existing?.credentialsPolicy ?? 'both') ? desired.credentials : null;
    let publicKey: RegisteredPublicKey | null = null;
    if (desired.public_key !== undefined) {
      const path = `partners[${state.partners.indexOf(desired)}].public_key`;
      let key: RegisteredPublicKey;
      try {
        key = await parsePublicKey(JSON.stringify(desired.public_key));
      } catch (error) {
        throw new AppError('invalid_argument', `${path}: ${(error as Error).message}; nothing was changed`);
      }
      const active = existing ? await activeKeyPair(q, existing.id) : null;
      if (active && active.kid !== key.kid) {
        throw new AppError(
          'invalid_argument',
          `${path}: ${desired.name}'s active pair ${active.id} has ${active.kid ? `another public key (kid ${active.kid})` : 'a shared secret'}, and apply never rotates a key pair; nothing was changed`,
          { field: 'declared_public_key' },
        );
      }
      if (!active) {
        publicKey = key;
        // The declared key is the pair to issue: no secret pair besides it.
        issueKeys = false;
      }
    }
    let limits: DesiredLimits | null = null;
    if (desired.limits !== undefined) {
      const current = existing ? await partnerLimitsOn(q, existing.id) : NO_LIMITS;
      if (!sameLimits(current, limitsOf(desired.limits))) limits = desired.limits;
    }
    const plan: PartnerPlan = {
      name: desired.name,
      partnerId: existing?.id ?? null,
      create: !existing,
      statusChange,
      createStatus: existing ? null : (desired.status ?? 'active'),
      map,
      unmap,
      issueKeys,
      network,
      limits,
      credentials,
      publicKey,
    };
    if (plan.create || statusChange || map.length || unmap.length || issueKeys || network || limits || credentials || publicKey) partners.push(plan);
  }
  const count = (test: (plan: PartnerPlan) => boolean) => partners.filter(test).length;
  const totals = {
    partnersCreated: count((plan) => plan.create),
    partnersEnabled: count((plan) => plan.statusChange === 'enabled'),
    partnersDisabled: count((plan) => plan.statusChange === 'disabled'),
    companiesMapped: partners.reduce((sum, plan) => sum + plan.map.length, 0),
    companiesUnmapped: partners.reduce((sum, plan) => sum + plan.unmap.length, 0),
    keysIssued: count((plan) => plan.issueKeys || plan.publicKey !== null),
    networksSet: count((plan) => plan.network !== null),
    limitsSet: count((plan) => plan.limits !== null),
    credentialsSet: count((plan) => plan.credentials !== null),
  };
  return {
    partners,
    ...totals,
    changes:
      totals.partnersCreated +
      totals.partnersEnabled +
      totals.partnersDisabled +
      totals.companiesMapped +
      totals.companiesUnmapped +
      totals.keysIssued +
      totals.networksSet +
      totals.limitsSet +
      totals.credentialsSet,
  };
}

export interface ApplyResult {
  plan: Plan;
  /** The key pairs issued (their secrets shown once, by whoever asked for them). */
  issued: IssuedKeyPair[];
}

/**
 * Applies a document as ONE unit of work: the plan is made again inside the transaction (what is applied
 * is what was read under the write lock), then every change runs through the domain's `…In(unit, …)`
 * forms, each writing its audit events. Nothing is written when the plan is empty. The new key pairs are
 * handed over (`handOver`, only when there are some) before the commit: when that fails, nothing changes.
 */
export async function applyDesiredState(
  db: Database,
  who: Actor,
  state: DesiredState,
  options: PlanOptions = {},
  progress?: (done: number, total: number) => void,
  handOver?: (issued: IssuedKeyPair[]) => Promise<void>,
): Promise<ApplyResult> {
  // Key pairs are hashed (argon2, tens of ms each) before the transaction opens, for the partners that
  // need one now; a partner that needs one only by the time the unit runs gets one made there.
  const pairs = new Map<string, NewKeyPair>();
  if (options.issueKeys) {
    const before = await planDesiredState(db, state, options);
    for (const plan of before.partners) if (plan.issueKeys) pairs.set(plan.name, await newKeyPair(db.clock));
  }
  const size = state.partners.reduce((sum, partner) => sum + 1 + (partner.companies?.length ?? 0), 0);
  return runUnit(
    db,
    who,
    async (unit) => {
      const plan = await planOn(unit.tx, state, options);
      const issued: IssuedKeyPair[] = [];
      let done = 0;
      for (const step of plan.partners) {
        let partner: PartnerRecord;
        if (step.create) {
          partner = (await createPartnerIn(unit, { name: step.name })).partner;
          if (step.createStatus === 'disabled') partner = (await setPartnerStatusIn(unit, partner.id, 'disabled')).partner;
        } else {
          partner = await findPartner(unit.tx, step.partnerId!);
          if (step.statusChange) {
            partner = (await setPartnerStatusIn(unit, partner.id, step.statusChange === 'enabled' ? 'active' : 'disabled')).partner;
          }
        }
        step.partnerId = partner.id;
        if (step.map.length) await mapCompaniesIn(unit, partner, step.map);
        if (step.unmap.length) await unmapCompaniesIn(unit, partner, step.unmap);
        if (step.network) await setNetworkIn(unit, partner.id, step.network);
        if (step.limits) await replaceLimitsIn(unit, partner.id, limitsOf(step.limits));
        if (step.credentials) await setCredentialsPolicyIn(unit, partner.id, step.credentials);
        if (step.issueKeys) issued.push(await issueKeyPairIn(unit, partner.id, pairs.get(step.name) ?? (await newKeyPair(unit.clock))));
        if (step.publicKey) issued.push(await issueKeyPairIn(unit, partner.id, await newKeyPair(unit.clock, step.publicKey)));
        done += 1 + step.map.length + step.unmap.length;
        progress?.(done, size);
      }
      if (handOver && issued.length > 0) await handOver(issued);
      return { plan, issued };
    },
    bulkPolicy(size),
  );
}

/** The database as a document: every partner (or the ones named), oldest first, companies by id. */
export async function exportDesiredState(db: Database, references: readonly string[] = []): Promise<DesiredState> {
  const records: PartnerRecord[] = [];
  if (references.length > 0) {
    const seen = new Set<string>();
    for (const reference of references) {
      const partner = await findPartner(db.sql, reference);
      if (!seen.has(partner.id)) records.push(partner);
      seen.add(partner.id);
    }
  } else {
    let cursor: string | undefined;
    for (;;) {
      const page = await partnerPage(db.sql, { cursor, limit: 1000 });
      records.push(...(page as PartnerRecord[]));
      if (page.length < 1000) break;
      cursor = page.at(-1)!.id;
    }
  }
  const partners: DesiredPartner[] = [];
  for (const partner of records) {
    const allow = await partnerNetwork(db, partner.id);
    const limits = await partnerLimitsOn(db.sql, partner.id);
    const active = await activeKeyPair(db.sql, partner.id);
    partners.push({
      name: partner.name,
      status: partner.status,
      companies: await companyIdsOf(db.sql, partner.id),
      // Only partners with rules or limits carry them: a document without leaves them alone.
      ...(allow.length > 0 ? { allow_from: allow } : {}),
      ...(sameLimits(limits, NO_LIMITS) ? {} : { limits: documentLimits(limits) }),
      // Only a partner's own choices: the default policy and a secret pair are left out.
      ...(partner.credentialsPolicy === 'both' ? {} : { credentials: partner.credentialsPolicy as CredentialsPolicy }),
      ...(active?.publicKey ? { public_key: { ...(JSON.parse(active.publicKey) as Record<string, unknown>), alg: active.publicKeyAlg, kid: active.kid } } : {}),
    });
  }
  return { partners };
}
