// What `show-partner` shows, read in one call: the partner, its limits and network rules, its key pairs
// with their state now, and its first companies. (A module of its own: limits and networks name partners.)
import type { Database } from '../../db/client.js';
import { mappingCount, mappingPage } from '../../db/repositories/companies.js';
import { keyPairsOf, type KeyPairRow } from '../../db/repositories/key-pairs.js';
import { keyPairState, type KeyPairState } from '../rules/key-pair-state.js';
import { partnerLimits, type PartnerLimits } from './limits.js';
import { partnerNetwork } from './networks.js';
import { findPartner, type PartnerRecord } from './partners.js';

export interface PartnerDetails {
  partner: PartnerRecord;
  /** Its own limits (null fields: the server's defaults). */
  limits: PartnerLimits;
  /** Its network rules (canonical CIDRs); empty: any client address. */
  network: string[];
  /** Newest first, each with its state now (key-pair-state.ts). */
  keyPairs: (Omit<KeyPairRow, 'partnerId'> & { state: KeyPairState })[];
  /** The first SHOWN_COMPANIES, by id (list-companies pages through the rest). */
  companies: { companyId: string; createdAt: Date }[];
  companyCount: number;
}

const SHOWN_COMPANIES = 20;

export async function showPartner(db: Database, reference: string): Promise<PartnerDetails> {
  const partner = await findPartner(db.sql, reference);
  const [pairs, companies, companyCount, limits, network] = await Promise.all([
    keyPairsOf(db.sql, partner.id),
    mappingPage(db.sql, partner.id, { limit: SHOWN_COMPANIES }),
    mappingCount(db.sql, partner.id),
    partnerLimits(db, partner.id),
    partnerNetwork(db, partner.id),
  ]);
  const now = db.clock.now();
  const keyPairs = pairs.map((pair) => ({ ...pair, state: keyPairState(pair, now) }));
  return { partner, limits, network, keyPairs, companies, companyCount };
}
